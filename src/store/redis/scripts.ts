/**
 * Lua scripts. Each runs atomically on the node that owns its first key;
 * every key a script touches shares the `{acct:ID}` hash tag.
 */

// Create-if-absent in one step so two admins racing on one id cannot overwrite each other.
export const CREATE_ACCOUNT_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1`;

// The key record and the account's key set change together, and only for an account that exists.
export const INSERT_KEY_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 'account_not_found' end
redis.call('HSET', KEYS[2], unpack(ARGV, 2))
redis.call('SADD', KEYS[3], ARGV[1])
return 'created'`;

// Applies a JSON patch to the account; null removes creditBalance or a limits scope.
export const UPDATE_ACCOUNT_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local p = cjson.decode(ARGV[1])
if p.name ~= nil then redis.call('HSET', KEYS[1], 'name', p.name) end
if p.status ~= nil then redis.call('HSET', KEYS[1], 'status', p.status) end
if p.creditBalance == cjson.null then redis.call('HDEL', KEYS[1], 'creditBalance')
elseif p.creditBalance ~= nil then redis.call('HSET', KEYS[1], 'creditBalance', p.creditBalance) end
if p.limits ~= nil then
  local current = redis.call('HGET', KEYS[1], 'limits')
  local limits = {}
  if current then limits = cjson.decode(current) end
  for _, scope in ipairs({'key', 'account'}) do
    if p.limits[scope] == cjson.null then limits[scope] = nil
    elseif p.limits[scope] ~= nil then limits[scope] = p.limits[scope] end
  end
  if next(limits) == nil then redis.call('HDEL', KEYS[1], 'limits')
  else redis.call('HSET', KEYS[1], 'limits', cjson.encode(limits)) end
end
return redis.call('HGETALL', KEYS[1])`;

// Adds credit atomically; a post-paid account (no balance) is refused.
export const ADJUST_CREDIT_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 'account_not_found' end
if redis.call('HEXISTS', KEYS[1], 'creditBalance') == 0 then return 'not_prepaid' end
return tostring(redis.call('HINCRBY', KEYS[1], 'creditBalance', ARGV[1]))`;

// Applies a JSON patch to a key record; null removes the limits override or the expiry.
export const UPDATE_KEY_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local p = cjson.decode(ARGV[1])
if p.name ~= nil then redis.call('HSET', KEYS[1], 'name', p.name) end
if p.limits == cjson.null then redis.call('HDEL', KEYS[1], 'limits')
elseif p.limits ~= nil then redis.call('HSET', KEYS[1], 'limits', p.limitsJson) end
if p.expiresAt == cjson.null then redis.call('HDEL', KEYS[1], 'expiresAt', 'expiresAtMs')
elseif p.expiresAt ~= nil then redis.call('HSET', KEYS[1], 'expiresAt', p.expiresAt, 'expiresAtMs', p.expiresAtMs) end
return redis.call('HGETALL', KEYS[1])`;

// Revokes a key from the next request on; keeps the first revocation time.
export const REVOKE_KEY_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HSET', KEYS[1], 'status', 'revoked')
redis.call('HSETNX', KEYS[1], 'revokedAt', ARGV[1])
return redis.call('HGETALL', KEYS[1])`;

// Rotation in one step under the account's tag: the old key is revoked now
// (or at the end of the grace period) in the same instant the new key exists.
//   KEYS: old key record, new key record, account key set
//   ARGV: now ms, now ISO, grace ms, revokeAt ISO, new key id, new key fields...
export const ROTATE_KEY_LUA = `
local old = redis.call('HMGET', KEYS[1], 'status', 'replacedBy', 'expiresAtMs', 'revokeAtMs')
if not old[1] then return {'key_not_found'} end
local now = tonumber(ARGV[1])
if old[1] == 'revoked' or (old[4] and tonumber(old[4]) <= now) then return {'key_revoked'} end
if old[2] then return {'key_already_rotated', old[2]} end
if old[3] and tonumber(old[3]) <= now then return {'key_expired'} end
local grace = tonumber(ARGV[3])
if grace == 0 then
  redis.call('HSET', KEYS[1], 'status', 'revoked', 'revokedAt', ARGV[2])
else
  redis.call('HSET', KEYS[1], 'revokeAt', ARGV[4], 'revokeAtMs', string.format('%.0f', now + grace))
end
redis.call('HSET', KEYS[1], 'replacedBy', ARGV[5])
redis.call('HSET', KEYS[2], unpack(ARGV, 6))
redis.call('SADD', KEYS[3], ARGV[5])
return {'rotated'}`;

// Last use, keeping the later time; a key that no longer exists is not recreated.
export const RECORD_LAST_USED_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local current = redis.call('HGET', KEYS[1], 'lastUsedMs')
if current and tonumber(current) >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'lastUsedMs', ARGV[1], 'lastUsedAt', ARGV[2])
return 1`;

/**
 * The whole decision for a known key in one round trip. Mirrors
 * authorizeAccountState() in src/limits/authorize-account-state.ts (the
 * in-memory store runs that); the shared contract suite keeps them equal.
 *   KEYS[1] account hash, KEYS[2] key record
 *   ARGV[1] key id, ARGV[2] default plan JSON, ARGV[3] now in µs ('' = Redis TIME),
 *   ARGV[4] the account's key prefix (hash tag) for bucket names
 * Bucket keys are built here rather than passed in, because the limits that
 * apply are only known after reading the records; they share the account's
 * hash tag, so they live in the same cluster slot as KEYS[1].
 */
export const AUTHORIZE_LUA = `
local k = redis.call('HMGET', KEYS[2], 'status', 'expiresAtMs', 'limits', 'prefix', 'environment', 'revokeAtMs')
local a = redis.call('HMGET', KEYS[1], 'status', 'creditBalance', 'limits')
if not k[1] or not a[1] then return {'unknown_key'} end
local now
if ARGV[3] ~= '' then now = tonumber(ARGV[3])
else local t = redis.call('TIME'); now = tonumber(t[1]) * 1000000 + tonumber(t[2]) end
local prefix = k[4]
if k[1] == 'revoked' or (k[6] and tonumber(k[6]) * 1000 <= now) then return {'key_revoked', prefix} end
if k[2] and tonumber(k[2]) * 1000 <= now then return {'key_expired', prefix} end
if a[1] == 'suspended' then return {'account_suspended', prefix} end
if a[2] and tonumber(a[2]) <= 0 then return {'credit_exhausted', prefix} end
local plan = cjson.decode(ARGV[2])
local overrides = {}
if a[3] then overrides = cjson.decode(a[3]) end
local key_limits = plan.key
if k[3] then key_limits = cjson.decode(k[3]) elseif overrides.key then key_limits = overrides.key end
local account_limits = overrides.account or plan.account
local writes, tight, refused = {}, nil, nil
local function step(scope, bucket, lim)
  local window = lim.windowSeconds * 1000000
  local interval = math.max(1, math.floor(window / lim.limit))
  local stored = redis.call('GET', bucket)
  local tat = now
  if stored then tat = math.max(tonumber(stored), now) end
  local new_tat = tat + interval
  local allow_at = new_tat - window
  if now < allow_at then
    local retry = math.ceil((allow_at - now) / 1000)
    if refused == nil or retry > refused[6] then
      refused = {scope, lim.limit, lim.windowSeconds, 0, math.ceil((tat - now) / 1000), retry}
    end
  else
    local remaining = math.floor((window - (new_tat - now)) / interval)
    local reset = math.ceil((new_tat - now) / 1000)
    writes[#writes + 1] = {bucket, new_tat, reset + 1}
    if tight == nil or remaining < tight[4] then tight = {scope, lim.limit, lim.windowSeconds, remaining, reset} end
  end
end
for _, lim in ipairs(key_limits) do step('key', ARGV[4] .. 'rl:k:' .. ARGV[1] .. ':' .. lim.windowSeconds, lim) end
for _, lim in ipairs(account_limits) do step('account', ARGV[4] .. 'rl:a:' .. lim.windowSeconds, lim) end
local function strings(t)
  local out = {}
  for i, v in ipairs(t) do
    if type(v) == 'number' then out[i] = string.format('%.0f', v) else out[i] = v end
  end
  return out
end
if refused then
  local r = strings(refused)
  return {'rate_limited', prefix, r[1], r[2], r[3], r[4], r[5], r[6]}
end
for _, w in ipairs(writes) do redis.call('SET', w[1], string.format('%.0f', w[2]), 'PX', string.format('%.0f', w[3])) end
if tight then
  local t = strings(tight)
  return {'allow', prefix, k[5], t[1], t[2], t[3], t[4], t[5]}
end
return {'allow', prefix, k[5]}`;
