import type { AuthorizeOutcome } from '../../domain/authorization';
import type { Account, StoredKey } from '../../domain/key-records';
import type { LimitState } from '../../domain/rate-limits';
import type { KeyEnvironment } from '../../keys/customer-key';
import type { UsageApplyOutcome, UsageBilling } from '../../domain/usage-record';
import { CorruptRecordError, StoreUnavailableError, type CreditResult, type RotateKeyResult } from '../store';
import { exactBalance, fieldsOf, parseAccount, parseKey } from './redis-records';
import { redisKeys } from './redis-keys';

/**
 * A Lua script as the store runs it. Each runs atomically on the node that
 * owns its first key; every key a script touches shares the `{acct:ID}` hash
 * tag (src/store/redis/redis-keys.ts builds every key name, the scripts only
 * read them from KEYS and ARGV).
 */
export interface LuaScript<Keys extends readonly string[], Argv extends readonly string[], Reply> {
  /** KEYS, named in order; ioredis is told how many there are. */
  readonly keys: Keys;
  /** ARGV, named in order; a last name starting with `...` takes all the remaining arguments. */
  readonly argv: Argv;
  readonly lua: string;
  /** Reads the raw reply; anything unexpected is a StoreUnavailableError, never a guess. */
  readonly parseReply: (reply: unknown) => Reply;
}

/** Infers the KEYS and ARGV names as tuples, so that each script's call signature derives from them. */
function script<const Keys extends readonly string[], const Argv extends readonly string[], Reply>(
  definition: LuaScript<Keys, Argv, Reply>,
): LuaScript<Keys, Argv, Reply> {
  return definition;
}

/**
 * Lua: epoch milliseconds → the ISO-8601 text JavaScript's toISOString()
 * writes (civil-from-days, H. Hinnant), for times the rotate script takes
 * from Redis's clock. The contract suite compares it with toISOString().
 */
const LUA_ISO_8601 = `
local function iso8601(ms)
  local days = math.floor(ms / 86400000)
  local rest = ms - days * 86400000
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local day = doy - math.floor((153 * mp + 2) / 5) + 1
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400
  if month <= 2 then year = year + 1 end
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', year, month, day,
    math.floor(rest / 3600000), math.floor(rest / 60000) % 60, math.floor(rest / 1000) % 60, rest % 1000)
end`;

/**
 * How often (µs) an allowed decision deletes an account's bucket fields whose
 * time has passed: the hash then holds at most an hour's worth of stale buckets.
 */
const BUCKET_SWEEP_INTERVAL_US = 3_600_000_000;

/** How often (µs) the usage script deletes spent token buckets and old months' spend of an account. */
const USAGE_SWEEP_INTERVAL_US = 3_600_000_000;

/**
 * Lua: token budget buckets, exact in doubles (mirrors
 * src/limits/token-budget.ts, which uses BigInt; a test holds the two
 * equal). A bucket field holds `<tatUs>` or `<tatUs> <fraction>` (the TAT's
 * fraction of a µs as a numerator over the budget's tokens). Budgets are at
 * most 10^9 tokens and 10^6 tokens per second over a window of at most 31
 * days, so every product below stays under 2^53.
 * - tb_parse(text, tokens): tat, fraction; nil for an absent or unreadable bucket.
 * - tb_consume(text, now, n, tokens, window_s): the bucket's new text after
 *   using n tokens at `now` (µs).
 * - tb_unrefilled(debt_us, fraction, tokens, window_s): whole tokens not yet
 *   refilled in a bucket debt_us (+ fraction/tokens) µs ahead of now, for a
 *   debt under one window (a bigger debt means the budget is exhausted). For
 *   the Check: remaining = tokens − tb_unrefilled.
 */
export const LUA_TOKEN_BUDGET = `
local function divmod(x, y)
  local q = math.floor(x / y)
  local r = x - q * y
  if r < 0 then q = q - 1; r = r + y elseif r >= y then q = q + 1; r = r - y end
  return q, r
end
local function tb_parse(text, tokens)
  if not text then return nil end
  local tat, fraction = string.match(text, '^(%d+) (%d+)$')
  if tat then tat, fraction = tonumber(tat), tonumber(fraction) else tat, fraction = tonumber(text), 0 end
  if not tat then return nil end
  if fraction >= tokens then fraction = 0 end
  return tat, fraction
end
local function tb_consume(text, now, n, tokens, window_s)
  local tat, fraction = tb_parse(text, tokens)
  if not tat or tat < now then tat, fraction = now, 0 end
  local a, b = divmod(n, tokens)
  local c, r = divmod(b * window_s, tokens)
  local d, e = divmod(r * 1000000, tokens)
  tat = tat + a * window_s * 1000000 + c * 1000000 + d
  fraction = fraction + e
  if fraction >= tokens then tat = tat + 1; fraction = fraction - tokens end
  if fraction == 0 then return string.format('%.0f', tat) end
  return string.format('%.0f %.0f', tat, fraction)
end
local function tb_unrefilled(debt_us, fraction, tokens, window_s)
  local d1, d0 = divmod(debt_us, 1000000)
  local q1, r1 = divmod(d1 * tokens, window_s)
  local q2 = divmod(r1 * 1000000 + d0 * tokens + fraction, window_s * 1000000)
  return q1 + q2
end`;

/** Every script, declared once: `defineCommand` registers each under its name, and `ScriptCommands` types it. */
export const REDIS_SCRIPTS = {
  // Create-if-absent in one step so two admins racing on one id cannot overwrite each other.
  gwaCreateAccount: script({
    keys: ['account'],
    argv: ['...accountFields'],
    lua: `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1`,
    parseReply: (reply): boolean => reply === 1,
  }),

  // The key record and the account's key set change together, and only for an
  // account that exists. Run again with the same record it writes the same
  // fields and answers 'created' again, so a call whose reply was lost can be
  // repeated.
  gwaInsertKey: script({
    keys: ['account', 'keyRecord', 'accountKeys'],
    argv: ['keyId', '...keyFields'],
    lua: `
if redis.call('EXISTS', KEYS[1]) == 0 then return 'account_not_found' end
redis.call('HSET', KEYS[2], unpack(ARGV, 2))
redis.call('SADD', KEYS[3], ARGV[1])
return 'created'`,
    parseReply: (reply) => oneOf(reply, ['created', 'account_not_found'] as const, 'insert key'),
  }),

  // Applies a JSON patch to the account; null removes creditBalance, a limits or token budget scope, or the spend cap.
  gwaUpdateAccount: script({
    keys: ['account'],
    argv: ['patchJson'],
    lua: `
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
if p.tokenBudgets ~= nil then
  local current = redis.call('HGET', KEYS[1], '${redisKeys.tokenBudgetsField()}')
  local budgets = {}
  if current then budgets = cjson.decode(current) end
  for _, scope in ipairs({'key', 'account'}) do
    if p.tokenBudgets[scope] == cjson.null then budgets[scope] = nil
    elseif p.tokenBudgets[scope] ~= nil then budgets[scope] = p.tokenBudgets[scope] end
  end
  if next(budgets) == nil then redis.call('HDEL', KEYS[1], '${redisKeys.tokenBudgetsField()}')
  else redis.call('HSET', KEYS[1], '${redisKeys.tokenBudgetsField()}', cjson.encode(budgets)) end
end
if p.monthlySpendCap == cjson.null then redis.call('HDEL', KEYS[1], '${redisKeys.monthlySpendCapField()}')
elseif p.monthlySpendCap ~= nil then redis.call('HSET', KEYS[1], '${redisKeys.monthlySpendCapField()}', p.monthlySpendCap) end
return redis.call('HGETALL', KEYS[1])`,
    parseReply: (reply): Account | null => (reply ? parseAccount(fieldsOf(reply)) : null),
  }),

  // Adds credit atomically; a post-paid account (no balance) is refused, and so
  // is a result outside ±limit, before anything is written. Balance, amount
  // and limit are at most 2 × 10^15 in size, so the sum is exact in a Lua
  // double; the answer is formatted with %.0f, because tostring() keeps only
  // 14 significant digits.
  gwaAdjustCredit: script({
    keys: ['account'],
    argv: ['amount', 'limit'],
    lua: `
if redis.call('EXISTS', KEYS[1]) == 0 then return {'account_not_found'} end
local stored = redis.call('HGET', KEYS[1], 'creditBalance')
if not stored then return {'not_prepaid'} end
if not string.match(stored, '^-?%d+$') or string.len(stored) > 17 then return {'balance_unreadable', stored} end
local balance = tonumber(stored)
local limit = tonumber(ARGV[2])
if math.abs(balance) > 9007199254740991 then return {'balance_unreadable', stored} end
local result = balance + tonumber(ARGV[1])
if math.abs(result) > limit then return {'balance_out_of_range', stored} end
local text = string.format('%.0f', result)
redis.call('HSET', KEYS[1], 'creditBalance', text)
return {'ok', text}`,
    parseReply: parseCreditReply,
  }),

  // Applies a JSON patch to a key record; null removes the limits or token budget override, the expiry or the spend cap.
  gwaUpdateKey: script({
    keys: ['keyRecord'],
    argv: ['patchJson'],
    lua: `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local p = cjson.decode(ARGV[1])
if p.name ~= nil then redis.call('HSET', KEYS[1], 'name', p.name) end
if p.limits == cjson.null then redis.call('HDEL', KEYS[1], 'limits')
elseif p.limits ~= nil then redis.call('HSET', KEYS[1], 'limits', p.limitsJson) end
if p.expiresAt == cjson.null then redis.call('HDEL', KEYS[1], 'expiresAt', 'expiresAtMs')
elseif p.expiresAt ~= nil then redis.call('HSET', KEYS[1], 'expiresAt', p.expiresAt, 'expiresAtMs', p.expiresAtMs) end
if p.tokenBudgets == cjson.null then redis.call('HDEL', KEYS[1], '${redisKeys.tokenBudgetsField()}')
elseif p.tokenBudgets ~= nil then redis.call('HSET', KEYS[1], '${redisKeys.tokenBudgetsField()}', p.tokenBudgetsJson) end
if p.monthlySpendCap == cjson.null then redis.call('HDEL', KEYS[1], '${redisKeys.monthlySpendCapField()}')
elseif p.monthlySpendCap ~= nil then redis.call('HSET', KEYS[1], '${redisKeys.monthlySpendCapField()}', p.monthlySpendCap) end
return redis.call('HGETALL', KEYS[1])`,
    parseReply: parseKeyOrNull,
  }),

  // Revokes a key from the next request on; keeps the first revocation time.
  gwaRevokeKey: script({
    keys: ['keyRecord'],
    argv: ['nowIso'],
    lua: `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HSET', KEYS[1], 'status', 'revoked')
redis.call('HSETNX', KEYS[1], 'revokedAt', ARGV[1])
return redis.call('HGETALL', KEYS[1])`,
    parseReply: parseKeyOrNull,
  }),

  // Rotation in one step under the account's tag: the old key is revoked now
  // (or at the end of the grace period) in the same instant the new key's
  // record exists. Its global indexes were written before (see the store). "Now"
  // is Redis's TIME, the clock every Check is decided on ('' = TIME; tests pass
  // an override). The answer carries both records, so nothing is read after
  // the point of no return. The same rotation run again (same new key id, its
  // record present) changes nothing and answers as the first run did: the
  // store repeats a call whose reply was lost, and must learn what happened.
  gwaRotateKey: script({
    keys: ['oldKeyRecord', 'newKeyRecord', 'accountKeys'],
    argv: ['nowMsOverride', 'graceMs', 'newKeyId', '...newKeyFields'],
    lua: `${LUA_ISO_8601}
local old = redis.call('HMGET', KEYS[1], 'status', 'replacedBy', 'expiresAtMs', 'revokeAtMs')
if not old[1] then return {'key_not_found'} end
if old[2] == ARGV[3] and redis.call('EXISTS', KEYS[2]) == 1 then
  return {'rotated', redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
end
local now
if ARGV[1] ~= '' then now = tonumber(ARGV[1])
else local t = redis.call('TIME'); now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end
if old[1] == 'revoked' or (old[4] and tonumber(old[4]) <= now) then return {'key_revoked'} end
if old[2] then return {'key_already_rotated', old[2]} end
if old[3] and tonumber(old[3]) <= now then return {'key_expired'} end
local grace = tonumber(ARGV[2])
if grace == 0 then
  redis.call('HSET', KEYS[1], 'status', 'revoked', 'revokedAt', iso8601(now))
else
  redis.call('HSET', KEYS[1], 'revokeAt', iso8601(now + grace), 'revokeAtMs', string.format('%.0f', now + grace))
end
redis.call('HSET', KEYS[1], 'replacedBy', ARGV[3])
redis.call('HSET', KEYS[2], unpack(ARGV, 4))
redis.call('SADD', KEYS[3], ARGV[3])
return {'rotated', redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}`,
    parseReply: parseRotateReply,
  }),

  // Last use, keeping the later time; a key that no longer exists is not recreated.
  gwaRecordLastUsed: script({
    keys: ['keyRecord'],
    argv: ['atMs', 'atIso'],
    lua: `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local current = redis.call('HGET', KEYS[1], 'lastUsedMs')
if current and tonumber(current) >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'lastUsedMs', ARGV[1], 'lastUsedAt', ARGV[2])
return 1`,
    parseReply: (reply): boolean => reply === 1,
  }),

  /**
   * The whole decision for a known key in one round trip. Mirrors
   * authorizeAccountState() in src/limits/authorize-account-state.ts (the
   * in-memory store runs that); the shared contract suite keeps them equal.
   *
   * Five commands when allowed: EVALSHA, HMGET key record, HMGET account
   * record with the bucket fields, TIME, one HSET of the buckets. Buckets
   * are fields of the account hash (no TTL of their own): a field whose TAT
   * has passed is equivalent to an absent one, and at most once per
   * BUCKET_SWEEP_INTERVAL_US an allowed decision deletes those (buckets of
   * rotated or revoked keys, of windows no longer in use), so the hash does
   * not grow without bound. Field names are redisKeys' prefixes plus each
   * limit's window in seconds. The bucket fields of the limits that apply
   * are read with the account when the key's limits are known from its
   * record or the default plan; an account override with other windows costs
   * one more HMGET. The default plan comes as numbers (count of key limits,
   * then limit/window pairs, key scope first), not JSON, so it is not decoded
   * on every call. `nowUs` '' means Redis's own TIME.
   */
  gwaAuthorize: script({
    keys: ['account', 'keyRecord'],
    argv: [
      'nowUs',
      'bucketFieldPrefix',
      'keyBucketFieldPrefix',
      'accountBucketFieldPrefix',
      'sweepField',
      'planKeyLimitCount',
      '...planLimits',
    ],
    lua: `
local k = redis.call('HMGET', KEYS[2], 'status', 'expiresAtMs', 'limits', 'prefix', 'environment', 'revokeAtMs')
if not k[1] then return {'unknown_key'} end
local split = 6 + 2 * tonumber(ARGV[6])
local function plan_limits(from, to)
  local out = {}
  for i = from, to, 2 do out[#out + 1] = {limit = tonumber(ARGV[i]), windowSeconds = tonumber(ARGV[i + 1])} end
  return out
end
local plan_key, plan_account = plan_limits(7, split), plan_limits(split + 1, #ARGV)
local own_key_limits = nil
if k[3] then own_key_limits = cjson.decode(k[3]) end
local fields, slot = {'status', 'creditBalance', 'limits', ARGV[5]}, {}
local function want(field)
  if not slot[field] then fields[#fields + 1] = field; slot[field] = #fields end
end
for _, lim in ipairs(own_key_limits or plan_key) do want(ARGV[3] .. lim.windowSeconds) end
for _, lim in ipairs(plan_account) do want(ARGV[4] .. lim.windowSeconds) end
local a = redis.call('HMGET', KEYS[1], unpack(fields))
if not a[1] then return {'unknown_key'} end
local now
if ARGV[1] ~= '' then now = tonumber(ARGV[1])
else local t = redis.call('TIME'); now = tonumber(t[1]) * 1000000 + tonumber(t[2]) end
local prefix = k[4]
if k[1] == 'revoked' or (k[6] and tonumber(k[6]) * 1000 <= now) then return {'key_revoked', prefix} end
if k[2] and tonumber(k[2]) * 1000 <= now then return {'key_expired', prefix} end
if a[1] == 'suspended' then return {'account_suspended', prefix} end
if a[2] and tonumber(a[2]) <= 0 then return {'credit_exhausted', prefix} end
local overrides = {}
if a[3] then overrides = cjson.decode(a[3]) end
local key_limits = own_key_limits or overrides.key or plan_key
local account_limits = overrides.account or plan_account
local stored = {}
for field, i in pairs(slot) do stored[field] = a[i] end
local missing = {}
for _, lim in ipairs(key_limits) do local f = ARGV[3] .. lim.windowSeconds; if not slot[f] then missing[#missing + 1] = f end end
for _, lim in ipairs(account_limits) do local f = ARGV[4] .. lim.windowSeconds; if not slot[f] then missing[#missing + 1] = f end end
if #missing > 0 then
  local more = redis.call('HMGET', KEYS[1], unpack(missing))
  for i, f in ipairs(missing) do stored[f] = more[i] end
end
local writes, written, tight, refused = {}, {}, nil, nil
local function step(scope, field, lim)
  local window = lim.windowSeconds * 1000000
  local interval = math.max(1, math.floor(window / lim.limit))
  local tat = now
  if stored[field] then tat = math.max(tonumber(stored[field]), now) end
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
    writes[#writes + 1] = field
    writes[#writes + 1] = string.format('%.0f', new_tat)
    written[field] = true
    if tight == nil or remaining < tight[4] then tight = {scope, lim.limit, lim.windowSeconds, remaining, reset} end
  end
end
for _, lim in ipairs(key_limits) do step('key', ARGV[3] .. lim.windowSeconds, lim) end
for _, lim in ipairs(account_limits) do step('account', ARGV[4] .. lim.windowSeconds, lim) end
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
if #writes > 0 then
  local sweep_at = a[4] and tonumber(a[4])
  if not sweep_at or sweep_at <= now then
    if sweep_at then
      local all, stale, p = redis.call('HGETALL', KEYS[1]), {}, ARGV[2]
      for i = 1, #all, 2 do
        local f = all[i]
        if string.sub(f, 1, #p) == p and not written[f] and (tonumber(all[i + 1]) or 0) <= now then stale[#stale + 1] = f end
      end
      if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
    end
    writes[#writes + 1] = ARGV[5]
    writes[#writes + 1] = string.format('%.0f', now + ${BUCKET_SWEEP_INTERVAL_US})
  end
  redis.call('HSET', KEYS[1], unpack(writes))
end
if tight then
  local t = strings(tight)
  return {'allow', prefix, k[5], t[1], t[2], t[3], t[4], t[5]}
end
return {'allow', prefix, k[5]}`,
    parseReply: parseAuthorizeReply,
  }),

  /**
   * One usage record applied to its account, exactly once per request id:
   * mirrors applyUsageToAccountState() in src/limits/usage-account-state.ts
   * (the in-memory store runs that; the contract suite keeps them equal).
   *
   * Every read and check comes first and every write after, so nothing can
   * fail half-way through the money: a corrupt amount is answered 'corrupt'
   * before anything is written. Then in this order: the account's balance,
   * shortfall, month spend of account and key and token buckets (one HSET),
   * the marker, and last the hour and day aggregates (an aggregate that cannot
   * be written fails the script after the money and the marker are in, so a
   * retry answers 'duplicate' and nothing is counted twice).
   *
   * The marker holds how the record was billed (`prepaid:<shortfall>`), for
   * the stream entry of a record whose first reply was lost. Token buckets use
   * Redis's clock (the Check's); spend and aggregates the record's own time,
   * so a record applied late still counts in the hour, day and month it
   * happened. At most once an hour (usageSweepAtUs) the script deletes token
   * buckets whose time has passed and spend of months before the previous
   * one, before reading what it needs. `nowUs` '' means Redis's own TIME.
   */
  gwaApplyUsage: script({
    keys: ['account', 'keyRecord', 'appliedMarker', 'hourAggregate', 'dayAggregate'],
    argv: [
      'nowUs',
      'markerTtlMs',
      'costMinorUnits',
      'totalTokens',
      'accountSpendField',
      'keySpendField',
      'keyTokenBucketFieldPrefix',
      'accountTokenBucketFieldPrefix',
      'creditLimit',
      'hourExpiresAtMs',
      'dayExpiresAtMs',
      'planKeyBudgetCount',
      'planAccountBudgetCount',
      '...planBudgetsThenAggregateIncrements',
    ],
    lua: `${LUA_ISO_8601}
${LUA_TOKEN_BUDGET}
local first = redis.call('GET', KEYS[3])
if first then return {'duplicate', first} end
local a = redis.call('HMGET', KEYS[1], 'id', 'creditBalance', '${redisKeys.tokenBudgetsField()}', ARGV[5], ARGV[6],
  '${redisKeys.creditShortfallField()}', '${redisKeys.usageSweepField()}')
if not a[1] then return {'account_not_found'} end
local function amount(text, name)
  if not text then return 0 end
  if not string.match(text, '^%d+$') or string.len(text) > 16 then error({corrupt = name, text = text}) end
  return tonumber(text)
end
local ok, problem = pcall(function()
  if a[2] and (not string.match(a[2], '^-?%d+$') or string.len(a[2]) > 17 or math.abs(tonumber(a[2])) > 9007199254740991) then
    error({corrupt = 'creditBalance', text = a[2]})
  end
  amount(a[4], ARGV[5]); amount(a[5], ARGV[6]); amount(a[6], '${redisKeys.creditShortfallField()}')
end)
if not ok then
  if type(problem) == 'table' then return {'corrupt', problem.corrupt, problem.text} end
  error(problem)
end
local now
if ARGV[1] ~= '' then now = tonumber(ARGV[1])
else local t = redis.call('TIME'); now = tonumber(t[1]) * 1000000 + tonumber(t[2]) end
local writes, gone = {}, {}
local sweep_at = a[7] and tonumber(a[7])
if not sweep_at or sweep_at <= now then
  if sweep_at then
    local oldest = iso8601(math.floor(now / 1000)):sub(1, 7)
    local year, month = tonumber(oldest:sub(1, 4)), tonumber(oldest:sub(6, 7))
    if month == 1 then oldest = string.format('%04d-12', year - 1) else oldest = string.format('%04d-%02d', year, month - 1) end
    local all, stale = redis.call('HGETALL', KEYS[1]), {}
    for i = 1, #all, 2 do
      local f = all[i]
      local prefix = string.sub(f, 1, 3)
      if (prefix == '${redisKeys.tokenBucketFieldPrefix()}' and (tonumber(string.match(all[i + 1], '^%d+')) or 0) < now)
        or (prefix == '${redisKeys.spendFieldPrefix()}' and string.sub(f, -7) < oldest) then
        stale[#stale + 1] = f; gone[f] = true
      end
    end
    if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
  end
  writes[#writes + 1] = '${redisKeys.usageSweepField()}'
  writes[#writes + 1] = string.format('%.0f', now + ${USAGE_SWEEP_INTERVAL_US})
end
local cost = tonumber(ARGV[3])
local billing, shortfall = 'postpaid', 0
if a[2] then
  billing = 'prepaid'
  local debited = tonumber(a[2]) - cost
  local balance = math.max(debited, -tonumber(ARGV[9]))
  shortfall = balance - debited
  writes[#writes + 1] = 'creditBalance'
  writes[#writes + 1] = string.format('%.0f', balance)
  if shortfall > 0 then
    writes[#writes + 1] = '${redisKeys.creditShortfallField()}'
    writes[#writes + 1] = string.format('%.0f', amount(a[6]) + shortfall)
  end
end
for i, field in ipairs({ARGV[5], ARGV[6]}) do
  local spent = 0
  if not gone[field] then spent = amount(a[3 + i]) end
  writes[#writes + 1] = field
  writes[#writes + 1] = string.format('%.0f', math.min(spent + cost, 9007199254740991))
end
local key_count, account_count = tonumber(ARGV[12]), tonumber(ARGV[13])
local aggregates_from = 14 + 2 * (key_count + account_count)
local tokens = tonumber(ARGV[4])
if tokens > 0 then
  local function plan_budgets(from, count)
    local out = {}
    for i = from, from + 2 * count - 1, 2 do out[#out + 1] = {tokens = tonumber(ARGV[i]), windowSeconds = tonumber(ARGV[i + 1])} end
    return out
  end
  local overrides = {}
  if a[3] then overrides = cjson.decode(a[3]) end
  local own = redis.call('HGET', KEYS[2], '${redisKeys.tokenBudgetsField()}')
  local key_budgets = (own and cjson.decode(own)) or overrides.key or plan_budgets(14, key_count)
  local account_budgets = overrides.account or plan_budgets(14 + 2 * key_count, account_count)
  local fields, budgets = {}, {}
  for _, b in ipairs(key_budgets) do fields[#fields + 1] = ARGV[7] .. b.windowSeconds; budgets[#budgets + 1] = b end
  for _, b in ipairs(account_budgets) do fields[#fields + 1] = ARGV[8] .. b.windowSeconds; budgets[#budgets + 1] = b end
  if #fields > 0 then
    local stored = redis.call('HMGET', KEYS[1], unpack(fields))
    for i, b in ipairs(budgets) do
      writes[#writes + 1] = fields[i]
      writes[#writes + 1] = tb_consume(stored[i], now, tokens, b.tokens, b.windowSeconds)
    end
  end
end
redis.call('HSET', KEYS[1], unpack(writes))
local outcome = billing .. ':' .. string.format('%.0f', shortfall)
redis.call('SET', KEYS[3], outcome, 'PX', ARGV[2])
local now_ms = math.floor(now / 1000)
for i, expires in ipairs({ARGV[10], ARGV[11]}) do
  if tonumber(expires) > now_ms then
    for j = aggregates_from, #ARGV, 2 do redis.call('HINCRBY', KEYS[3 + i], ARGV[j], ARGV[j + 1]) end
    redis.call('PEXPIREAT', KEYS[3 + i], expires)
  end
end
return {'applied', outcome}`,
    parseReply: parseApplyUsageReply,
  }),

  // One usage record appended to the billing stream, exactly once per account
  // and request id; the marker holds the entry id. The stream is trimmed to
  // about maxLength entries (MAXLEN ~, which trims whole macro nodes: cheap).
  gwaAppendUsageStream: script({
    keys: ['stream', 'streamedMarker'],
    argv: ['markerTtlMs', 'maxLength', '...fields'],
    lua: `
local first = redis.call('GET', KEYS[2])
if first then return {'duplicate', first} end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3))
redis.call('SET', KEYS[2], id, 'PX', ARGV[1])
return {'appended', id}`,
    parseReply: (reply): 'appended' | 'duplicate' => {
      const kind: unknown = Array.isArray(reply) ? (reply as unknown[])[0] : reply;
      return oneOf(kind, ['appended', 'duplicate'] as const, 'usage stream');
    },
  }),
};

type ScriptName = keyof typeof REDIS_SCRIPTS;

/** `['a', 'b']` → `[string, string]`; `['a', '...rest']` → `[string, ...string[]]`. */
type StringsNamed<Names extends readonly string[]> = Names extends readonly [...infer Fixed extends readonly string[], `...${string}`]
  ? [...{ -readonly [I in keyof Fixed]: string }, ...string[]]
  : { -readonly [I in keyof Names]: string };

/** The commands `defineCommand` adds to a client: KEYS then ARGV, all strings; the raw reply goes to the script's parseReply. */
export type ScriptCommands = {
  [Name in ScriptName]: (typeof REDIS_SCRIPTS)[Name] extends LuaScript<infer Keys, infer Argv, unknown>
    ? (...args: [...StringsNamed<Keys>, ...StringsNamed<Argv>]) => Promise<unknown>
    : never;
};

function oneOf<const T extends string>(reply: unknown, expected: readonly T[], what: string): T {
  if (typeof reply === 'string' && (expected as readonly string[]).includes(reply)) return reply as T;
  throw new StoreUnavailableError(`unexpected ${what} reply from Redis: ${String(reply)}`);
}

function parseKeyOrNull(reply: unknown): StoredKey | null {
  return reply ? parseKey(fieldsOf(reply)) : null;
}

function parseRotateReply(reply: unknown): RotateKeyResult {
  if (!Array.isArray(reply)) throw new StoreUnavailableError('unexpected rotate reply from Redis');
  const [kind, second, third] = reply as unknown[];
  if (kind === 'rotated') return { kind, oldKey: parseKey(fieldsOf(second)), newKey: parseKey(fieldsOf(third)) };
  if (kind === 'key_already_rotated' && typeof second === 'string') return { kind, replacedBy: second };
  if (kind === 'key_not_found' || kind === 'key_revoked' || kind === 'key_expired') return { kind };
  throw new StoreUnavailableError(`unexpected rotate reply from Redis: ${String(kind)}`);
}

function parseCreditReply(reply: unknown): CreditResult {
  if (!Array.isArray(reply)) throw new StoreUnavailableError('unexpected credit reply from Redis');
  const [kind, balance] = reply as unknown[];
  switch (kind) {
    case 'account_not_found':
    case 'not_prepaid':
      return { kind };
    case 'ok':
    case 'balance_out_of_range':
      return { kind, creditBalance: exactBalance(balance) };
    case 'balance_unreadable':
      // The stored balance itself is bad: nothing was written; the account needs repair.
      throw new CorruptRecordError('account', `creditBalance '${String(balance)}' is not an exact whole number`);
    default:
      throw new StoreUnavailableError(`unexpected credit reply from Redis: ${String(kind)}`);
  }
}

function limitState(fields: string[]): LimitState {
  const [scope, limit, windowSeconds, remaining, resetMs] = fields;
  if (scope !== 'key' && scope !== 'account') throw new StoreUnavailableError(`unexpected limit scope from Redis: ${scope}`);
  return {
    scope,
    limit: Number(limit),
    windowSeconds: Number(windowSeconds),
    remaining: Number(remaining),
    resetMs: Number(resetMs),
  };
}

function parseAuthorizeReply(reply: unknown): AuthorizeOutcome {
  if (!Array.isArray(reply) || typeof reply[0] !== 'string') throw new StoreUnavailableError('unexpected authorize reply from Redis');
  const [kind, prefix = '', ...rest] = reply.map(String);
  switch (kind) {
    case 'unknown_key':
      return { kind };
    case 'key_revoked':
    case 'key_expired':
    case 'account_suspended':
    case 'credit_exhausted':
      return { kind, prefix };
    case 'rate_limited':
      return { kind, prefix, hit: { ...limitState(rest.slice(0, 5)), retryAfterMs: Number(rest[5]) } };
    case 'allow': {
      const [environment, ...limit] = rest;
      return limit.length > 0
        ? { kind, prefix, environment: environment as KeyEnvironment, tightest: limitState(limit) }
        : { kind, prefix, environment: environment as KeyEnvironment };
    }
    default:
      throw new StoreUnavailableError(`unexpected authorize reply from Redis: ${kind}`);
  }
}

/** `prepaid:0` → what the first application did. */
function parseBilling(text: unknown): { billing: UsageBilling; creditShortfall: number } {
  const [billing, shortfall] = String(text).split(':');
  if ((billing !== 'prepaid' && billing !== 'postpaid') || !/^[0-9]+$/.test(shortfall ?? '')) {
    throw new StoreUnavailableError(`unexpected usage marker in Redis: ${String(text)}`);
  }
  return { billing, creditShortfall: Number(shortfall) };
}

function parseApplyUsageReply(reply: unknown): UsageApplyOutcome {
  if (!Array.isArray(reply)) throw new StoreUnavailableError('unexpected usage reply from Redis');
  const [kind, second, third] = reply as unknown[];
  switch (kind) {
    case 'applied':
    case 'duplicate':
      return { kind, ...parseBilling(second) };
    case 'account_not_found':
      return { kind };
    case 'corrupt':
      // Nothing was written; the account needs repair before this record can be applied.
      throw new CorruptRecordError('account', `${String(second)} '${String(third)}' is not an exact whole number`);
    default:
      throw new StoreUnavailableError(`unexpected usage reply from Redis: ${String(kind)}`);
  }
}
