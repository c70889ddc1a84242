import type { AuthorizeOutcome } from '../../domain/authorization';
import type { Account, StoredKey } from '../../domain/key-records';
import type { LimitState } from '../../domain/rate-limits';
import type { KeyEnvironment } from '../../keys/customer-key';
import { StoreUnavailableError, type CreditResult, type RotateKeyResult } from '../store';
import { fieldsOf, parseAccount, parseKey } from './redis-records';

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

  // The key record and the account's key set change together, and only for an account that exists.
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

  // Applies a JSON patch to the account; null removes creditBalance or a limits scope.
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
return redis.call('HGETALL', KEYS[1])`,
    parseReply: (reply): Account | null => (reply ? parseAccount(fieldsOf(reply)) : null),
  }),

  // Adds credit atomically; a post-paid account (no balance) is refused.
  gwaAdjustCredit: script({
    keys: ['account'],
    argv: ['amount'],
    lua: `
if redis.call('EXISTS', KEYS[1]) == 0 then return 'account_not_found' end
if redis.call('HEXISTS', KEYS[1], 'creditBalance') == 0 then return 'not_prepaid' end
return tostring(redis.call('HINCRBY', KEYS[1], 'creditBalance', ARGV[1]))`,
    parseReply: (reply): CreditResult =>
      reply === 'account_not_found' || reply === 'not_prepaid' ? { kind: reply } : { kind: 'ok', creditBalance: Number(reply) },
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
  // (or at the end of the grace period) in the same instant the new key exists.
  gwaRotateKey: script({
    keys: ['oldKeyRecord', 'newKeyRecord', 'accountKeys'],
    argv: ['nowMs', 'nowIso', 'graceMs', 'revokeAtIso', 'newKeyId', '...newKeyFields'],
    lua: `
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
return {'rotated'}`,
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
   * Which limits apply is only known after reading the records, so bucket
   * names come as two prefixes (redisKeys.keyBucketPrefix and
   * accountBucketPrefix) to which the script appends each limit's window in
   * seconds; they carry the account's hash tag, so they live in KEYS[1]'s
   * cluster slot. `nowUs` '' means Redis's own TIME.
   */
  gwaAuthorize: script({
    keys: ['account', 'keyRecord'],
    argv: ['defaultPlanJson', 'nowUs', 'keyBucketPrefix', 'accountBucketPrefix'],
    lua: `
local k = redis.call('HMGET', KEYS[2], 'status', 'expiresAtMs', 'limits', 'prefix', 'environment', 'revokeAtMs')
local a = redis.call('HMGET', KEYS[1], 'status', 'creditBalance', 'limits')
if not k[1] or not a[1] then return {'unknown_key'} end
local now
if ARGV[2] ~= '' then now = tonumber(ARGV[2])
else local t = redis.call('TIME'); now = tonumber(t[1]) * 1000000 + tonumber(t[2]) end
local prefix = k[4]
if k[1] == 'revoked' or (k[6] and tonumber(k[6]) * 1000 <= now) then return {'key_revoked', prefix} end
if k[2] and tonumber(k[2]) * 1000 <= now then return {'key_expired', prefix} end
if a[1] == 'suspended' then return {'account_suspended', prefix} end
if a[2] and tonumber(a[2]) <= 0 then return {'credit_exhausted', prefix} end
local plan = cjson.decode(ARGV[1])
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
for _, w in ipairs(writes) do redis.call('SET', w[1], string.format('%.0f', w[2]), 'PX', string.format('%.0f', w[3])) end
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

/** The rotate script's verdict; on success the store reads both keys back. */
export type RotateScriptResult = Exclude<RotateKeyResult, { kind: 'rotated' }> | { kind: 'rotated' };

function parseRotateReply(reply: unknown): RotateScriptResult {
  if (!Array.isArray(reply)) throw new StoreUnavailableError('unexpected rotate reply from Redis');
  const [kind, replacedBy] = reply.map(String);
  if (kind === 'key_already_rotated') return { kind, replacedBy: replacedBy ?? '' };
  if (kind === 'key_not_found' || kind === 'key_revoked' || kind === 'key_expired' || kind === 'rotated') return { kind };
  throw new StoreUnavailableError(`unexpected rotate reply from Redis: ${kind}`);
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
