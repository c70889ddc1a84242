import type { AuthorizeOutcome } from '../../domain/authorization';
import type { Account, StoredKey } from '../../domain/key-records';
import type { Member } from '../../domain/members';
import type { LimitState } from '../../domain/rate-limits';
import type { KeyEnvironment } from '../../keys/customer-key';
import {
  CorruptRecordError,
  StoreUnavailableError,
  type ActiveKeyCapReached,
  type AddMemberResult,
  type CreditResult,
  type MemberChangeResult,
  type RotateKeyResult,
} from '../store';
import { exactBalance, fieldsOf, parseAccount, parseKey, parseMember } from './redis-records';

/**
 * A Lua script as the store runs it. Each runs atomically on the node that
 * owns its first key; every key a script touches shares the `{acct:ID}` hash
 * tag (src/store/redis/redis-keys.ts builds every key name, the scripts only
 * read them from KEYS and ARGV).
 */
export interface LuaScript<Keys extends readonly string[], Argv extends readonly string[], Reply> {
  /**
   * KEYS, named in order; ioredis is told how many there are. A last name
   * starting with `...` takes any number of keys: the call then starts with
   * the number of keys (see ScriptCommands).
   */
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

/** A capped write's answer when the account's active keys are not indexed yet: index them, then run it again. */
export const ACTIVE_KEYS_NOT_INDEXED = 'active_keys_not_indexed';

/**
 * Lua: the store's "now" in ms (an override from the tests, else Redis
 * TIME), and the count of an account's keys toward its active-key cap
 * (src/domain/active-key-cap.ts countsTowardCap). The account's
 * `activeKeys` sorted set holds every key that is not revoked, scored by
 * when it stops counting (the end of a rotation grace period, else +inf),
 * so the count is one ZCOUNT however many keys the account ever had. A
 * field of the account hash (redisKeys.activeKeysIndexedField, passed in
 * ARGV) says the set is complete; nil
 * means it has not been built yet for this account (keys created before the
 * cap existed): the store builds it (gwaIndexActiveKeys) and retries.
 */
const LUA_ACTIVE_KEYS = `
local function now_ms(override)
  if override ~= '' then return tonumber(override) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function counted_toward_cap(account, active_keys, indexed_field, now)
  if redis.call('HEXISTS', account, indexed_field) == 0 then return nil end
  local now_text = string.format('%.0f', now)
  redis.call('ZREMRANGEBYSCORE', active_keys, '-inf', now_text)
  return redis.call('ZCOUNT', active_keys, '(' .. now_text, '+inf')
end
local function cap_of(account, default)
  local own = redis.call('HGET', account, 'maxActiveKeys')
  if own then return tonumber(own) end
  return tonumber(default)
end`;

/** Lua: the last-owner rule's count (src/domain/members.ts isActingOwner): owners that are bound identities. */
const LUA_ACTING_OWNERS = `
local function acting_owners(members)
  local n = 0
  for _, json in ipairs(redis.call('HVALS', members)) do
    local m = cjson.decode(json)
    if m.role == 'owner' and m.principal.kind == 'identity' then n = n + 1 end
  end
  return n
end
local function leaves_no_owner(members, m)
  return m.role == 'owner' and m.principal.kind == 'identity' and acting_owners(members) == 1
end`;

/**
 * How often (µs) an allowed decision deletes an account's bucket fields whose
 * time has passed: the hash then holds at most an hour's worth of stale buckets.
 */
const BUCKET_SWEEP_INTERVAL_US = 3_600_000_000;

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

  // The key record, the account's key set and its active keys change
  // together, and only for an account that exists and is below its
  // active-key cap, counted in the same step. Run again with the same record
  // it finds it written and answers 'created' again (before counting, so the
  // key never counts against itself): a call whose reply was lost can be
  // repeated.
  gwaInsertKey: script({
    keys: ['account', 'keyRecord', 'accountKeys', 'activeKeys'],
    argv: ['nowMsOverride', 'defaultMaxActiveKeys', 'indexedField', 'keyId', '...keyFields'],
    lua: `${LUA_ACTIVE_KEYS}
if redis.call('EXISTS', KEYS[1]) == 0 then return {'account_not_found'} end
if redis.call('EXISTS', KEYS[2]) == 1 then return {'created'} end
local counted = counted_toward_cap(KEYS[1], KEYS[4], ARGV[3], now_ms(ARGV[1]))
if counted == nil then return {'${ACTIVE_KEYS_NOT_INDEXED}'} end
local cap = cap_of(KEYS[1], ARGV[2])
if not cap then return {'cap_unreadable'} end
if counted >= cap then return {'active_key_cap_reached', tostring(cap), tostring(counted)} end
redis.call('HSET', KEYS[2], unpack(ARGV, 5))
redis.call('SADD', KEYS[3], ARGV[4])
redis.call('ZADD', KEYS[4], '+inf', ARGV[4])
return {'created'}`,
    parseReply: parseInsertReply,
  }),

  // Applies a JSON patch to the account; null removes creditBalance or a limits scope.
  gwaUpdateAccount: script({
    keys: ['account'],
    argv: ['patchJson'],
    lua: `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local p = cjson.decode(ARGV[1])
if p.name ~= nil then redis.call('HSET', KEYS[1], 'name', p.name) end
if p.status ~= nil then redis.call('HSET', KEYS[1], 'status', p.status) end
if p.maxActiveKeys == cjson.null then redis.call('HDEL', KEYS[1], 'maxActiveKeys')
elseif p.maxActiveKeys ~= nil then redis.call('HSET', KEYS[1], 'maxActiveKeys', p.maxActiveKeys) end
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

  // Applies a JSON patch to a key record; null removes the limits override or the expiry.
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
return redis.call('HGETALL', KEYS[1])`,
    parseReply: parseKeyOrNull,
  }),

  // Revokes a key from the next request on; keeps the first revocation time.
  // A revoked key no longer counts toward the account's cap.
  gwaRevokeKey: script({
    keys: ['keyRecord', 'activeKeys'],
    argv: ['nowIso', 'keyId'],
    lua: `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('ZREM', KEYS[2], ARGV[2])
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
  // A rotation with a grace period counts the account's keys toward its cap
  // (capRefuses: allowed at the cap, not above it); an immediate one never
  // does. The active keys follow: the new key counts, the old one stops
  // counting now or at the end of the grace period.
  gwaRotateKey: script({
    keys: ['oldKeyRecord', 'newKeyRecord', 'accountKeys', 'account', 'activeKeys'],
    argv: ['nowMsOverride', 'graceMs', 'defaultMaxActiveKeys', 'indexedField', 'newKeyId', '...newKeyFields'],
    lua: `${LUA_ISO_8601}${LUA_ACTIVE_KEYS}
local old = redis.call('HMGET', KEYS[1], 'status', 'replacedBy', 'expiresAtMs', 'revokeAtMs', 'id')
if not old[1] then return {'key_not_found'} end
local old_id = old[5]
if old[2] == ARGV[5] and redis.call('EXISTS', KEYS[2]) == 1 then
  return {'rotated', redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
end
local now = now_ms(ARGV[1])
if old[1] == 'revoked' or (old[4] and tonumber(old[4]) <= now) then return {'key_revoked'} end
if old[2] then return {'key_already_rotated', old[2]} end
if old[3] and tonumber(old[3]) <= now then return {'key_expired'} end
local grace = tonumber(ARGV[2])
if grace > 0 then
  local counted = counted_toward_cap(KEYS[4], KEYS[5], ARGV[4], now)
  if counted == nil then return {'${ACTIVE_KEYS_NOT_INDEXED}'} end
  local cap = cap_of(KEYS[4], ARGV[3])
  if not cap then return {'cap_unreadable'} end
  if counted > cap then return {'active_key_cap_reached', tostring(cap), tostring(counted)} end
end
if grace == 0 then
  redis.call('HSET', KEYS[1], 'status', 'revoked', 'revokedAt', iso8601(now))
  redis.call('ZREM', KEYS[5], old_id)
else
  redis.call('HSET', KEYS[1], 'revokeAt', iso8601(now + grace), 'revokeAtMs', string.format('%.0f', now + grace))
  redis.call('ZADD', KEYS[5], string.format('%.0f', now + grace), old_id)
end
redis.call('HSET', KEYS[1], 'replacedBy', ARGV[5])
redis.call('HSET', KEYS[2], unpack(ARGV, 6))
redis.call('SADD', KEYS[3], ARGV[5])
redis.call('ZADD', KEYS[5], '+inf', ARGV[5])
return {'rotated', redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}`,
    parseReply: parseRotateReply,
  }),

  // Adds a batch of an account's key records to its active keys, and with
  // the last batch marks the set complete: done once, for accounts whose
  // keys predate the cap. Until the mark, every write that could make the set
  // wrong keeps it right itself (insertions are refused, rotations and
  // revocations add and remove their keys), so batches need no snapshot.
  gwaIndexActiveKeys: script({
    keys: ['account', 'activeKeys', '...keyRecords'],
    argv: ['indexedField', 'lastBatch'],
    lua: `
if redis.call('EXISTS', KEYS[1]) == 0 then return 'indexed' end
for i = 3, #KEYS do
  local k = redis.call('HMGET', KEYS[i], 'status', 'revokeAtMs', 'id')
  if k[1] == 'active' and k[3] then redis.call('ZADD', KEYS[2], k[2] or '+inf', k[3]) end
end
if ARGV[2] == '1' then redis.call('HSET', KEYS[1], ARGV[1], '1') end
return 'indexed'`,
    parseReply: (reply): 'indexed' => {
      if (reply === 'indexed') return reply;
      throw new StoreUnavailableError(`unexpected index active keys reply from Redis: ${String(reply)}`);
    },
  }),

  // A member (or invitation) joins an account once per principal, within the
  // member limit. The same add repeated (same member id) answers 'added' as
  // the first run did, so a lost reply can be retried.
  gwaAddMember: script({
    keys: ['account', 'members', 'memberPrincipals'],
    argv: ['memberId', 'principalKey', 'memberJson', 'maxMembers'],
    lua: `
if redis.call('EXISTS', KEYS[1]) == 0 then return {'account_not_found'} end
local existing = redis.call('HGET', KEYS[3], ARGV[2])
if existing then
  local kind = 'already_member'
  if existing == ARGV[1] then kind = 'added' end
  return {kind, redis.call('HGET', KEYS[2], existing)}
end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[4]) then return {'member_limit_reached', ARGV[4]} end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[1])
return {'added', ARGV[3]}`,
    parseReply: parseAddMemberReply,
  }),

  // A role change under the last-owner rule, checked in the same step.
  gwaChangeMemberRole: script({
    keys: ['members'],
    argv: ['memberId', 'role'],
    lua: `${LUA_ACTING_OWNERS}
local json = redis.call('HGET', KEYS[1], ARGV[1])
if not json then return {'member_not_found'} end
local m = cjson.decode(json)
if m.role == ARGV[2] then return {'changed', json} end
if leaves_no_owner(KEYS[1], m) then return {'last_owner'} end
m.role = ARGV[2]
local updated = cjson.encode(m)
redis.call('HSET', KEYS[1], ARGV[1], updated)
return {'changed', updated}`,
    parseReply: parseMemberChangeReply,
  }),

  // Removes a member (or invitation) and its principal entry, under the last-owner rule.
  gwaRemoveMember: script({
    keys: ['members', 'memberPrincipals'],
    argv: ['memberId'],
    lua: `${LUA_ACTING_OWNERS}
local json = redis.call('HGET', KEYS[1], ARGV[1])
if not json then return {'member_not_found'} end
if leaves_no_owner(KEYS[1], cjson.decode(json)) then return {'last_owner'} end
redis.call('HDEL', KEYS[1], ARGV[1])
local principals = redis.call('HGETALL', KEYS[2])
for i = 1, #principals, 2 do
  if principals[i + 1] == ARGV[1] then redis.call('HDEL', KEYS[2], principals[i]) end
end
return {'changed', json}`,
    parseReply: parseMemberChangeReply,
  }),

  // First sign-in with a verified email: the account's invitation for it
  // becomes the identity's membership (same member id and role). An identity
  // that is already a member keeps its membership, and the invitation goes.
  gwaBindInvitation: script({
    keys: ['members', 'memberPrincipals'],
    argv: ['invitationKey', 'identityKey', 'issuer', 'subject', 'joinedAtIso'],
    lua: `
local invite_id = redis.call('HGET', KEYS[2], ARGV[1])
if not invite_id then return {'no_invitation'} end
local invite = redis.call('HGET', KEYS[1], invite_id)
local existing_id = redis.call('HGET', KEYS[2], ARGV[2])
if existing_id then
  redis.call('HDEL', KEYS[1], invite_id)
  redis.call('HDEL', KEYS[2], ARGV[1])
  return {'dropped', invite, redis.call('HGET', KEYS[1], existing_id)}
end
local m = cjson.decode(invite)
m.principal = {kind = 'identity', issuer = ARGV[3], subject = ARGV[4]}
m.joinedAt = ARGV[5]
local bound = cjson.encode(m)
redis.call('HSET', KEYS[1], invite_id, bound)
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2], invite_id)
return {'bound', bound}`,
    parseReply: parseBindReply,
  }),

  // The member with a principal, in one round trip (principal → id → record).
  gwaMemberOf: script({
    keys: ['members', 'memberPrincipals'],
    argv: ['principalKey'],
    lua: `
local id = redis.call('HGET', KEYS[2], ARGV[1])
if not id then return false end
return redis.call('HGET', KEYS[1], id)`,
    parseReply: (reply): Member | null => (reply ? parseMember(reply) : null),
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
};

type ScriptName = keyof typeof REDIS_SCRIPTS;

/** `['a', 'b']` → `[string, string]`; `['a', '...rest']` → `[string, ...string[]]`. */
type StringsNamed<Names extends readonly string[]> = Names extends readonly [...infer Fixed extends readonly string[], `...${string}`]
  ? [...{ -readonly [I in keyof Fixed]: string }, ...string[]]
  : { -readonly [I in keyof Names]: string };

/** Whether a script takes any number of keys (its last KEYS name starts with `...`). */
export function takesKeyList(definition: LuaScript<readonly string[], readonly string[], unknown>): boolean {
  return definition.keys.at(-1)?.startsWith('...') ?? false;
}

/**
 * The commands `defineCommand` adds to a client: KEYS then ARGV, all strings;
 * the raw reply goes to the script's parseReply. A script with a key list is
 * called with the number of keys first, then the keys, then ARGV.
 */
export type ScriptCommands = {
  [Name in ScriptName]: (typeof REDIS_SCRIPTS)[Name] extends LuaScript<infer Keys, infer Argv, unknown>
    ? Keys extends readonly [...string[], `...${string}`]
      ? (numberOfKeys: number, ...keysThenArgv: string[]) => Promise<unknown>
      : (...args: [...StringsNamed<Keys>, ...StringsNamed<Argv>]) => Promise<unknown>
    : never;
};

/** The refusals the insert and rotate scripts share. */
function capReply(kind: unknown, cap: unknown, counted: unknown): ActiveKeyCapReached | typeof ACTIVE_KEYS_NOT_INDEXED | undefined {
  if (kind === ACTIVE_KEYS_NOT_INDEXED) return ACTIVE_KEYS_NOT_INDEXED;
  if (kind === 'cap_unreadable') throw new CorruptRecordError('account', 'maxActiveKeys is not a number');
  if (kind === 'active_key_cap_reached') return { kind, maxActiveKeys: Number(cap), activeKeys: Number(counted) };
  return undefined;
}

function parseInsertReply(reply: unknown): 'created' | 'account_not_found' | ActiveKeyCapReached | typeof ACTIVE_KEYS_NOT_INDEXED {
  const [kind, cap, counted] = Array.isArray(reply) ? (reply as unknown[]) : [];
  if (kind === 'created' || kind === 'account_not_found') return kind;
  const refusal = capReply(kind, cap, counted);
  if (refusal) return refusal;
  throw new StoreUnavailableError(`unexpected insert key reply from Redis: ${String(kind)}`);
}

function parseAddMemberReply(reply: unknown): AddMemberResult {
  const [kind, second] = Array.isArray(reply) ? (reply as unknown[]) : [];
  switch (kind) {
    case 'added':
    case 'already_member':
      return { kind, member: parseMember(second) };
    case 'account_not_found':
      return { kind };
    case 'member_limit_reached':
      return { kind, limit: Number(second) };
    default:
      throw new StoreUnavailableError(`unexpected add member reply from Redis: ${String(kind)}`);
  }
}

function parseMemberChangeReply(reply: unknown): MemberChangeResult {
  const [kind, json] = Array.isArray(reply) ? (reply as unknown[]) : [];
  if (kind === 'changed') return { kind, member: parseMember(json) };
  if (kind === 'member_not_found' || kind === 'last_owner') return { kind };
  throw new StoreUnavailableError(`unexpected member change reply from Redis: ${String(kind)}`);
}

export type BindReply =
  { kind: 'no_invitation' } | { kind: 'bound'; member: Member } | { kind: 'dropped'; invitation: Member; existing: Member };

function parseBindReply(reply: unknown): BindReply {
  const [kind, first, second] = Array.isArray(reply) ? (reply as unknown[]) : [];
  if (kind === 'no_invitation') return { kind };
  if (kind === 'bound') return { kind, member: parseMember(first) };
  if (kind === 'dropped') return { kind, invitation: parseMember(first), existing: parseMember(second) };
  throw new StoreUnavailableError(`unexpected bind invitation reply from Redis: ${String(kind)}`);
}

function parseKeyOrNull(reply: unknown): StoredKey | null {
  return reply ? parseKey(fieldsOf(reply)) : null;
}

function parseRotateReply(reply: unknown): RotateKeyResult | typeof ACTIVE_KEYS_NOT_INDEXED {
  if (!Array.isArray(reply)) throw new StoreUnavailableError('unexpected rotate reply from Redis');
  const [kind, second, third] = reply as unknown[];
  if (kind === 'rotated') return { kind, oldKey: parseKey(fieldsOf(second)), newKey: parseKey(fieldsOf(third)) };
  const refusal = capReply(kind, second, third);
  if (refusal) return refusal;
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
