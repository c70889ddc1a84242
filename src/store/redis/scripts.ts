import type { AuthorizeOutcome } from '../../domain/authorization';
import type { Account, StoredKey } from '../../domain/key-records';
import { createHash } from 'node:crypto';
import type { LimitScope, LimitState, RateLimit, RatePlan } from '../../domain/rate-limits';
import { emissionIntervalUs } from '../../limits/gcra';
import type { KeyEnvironment } from '../../keys/customer-key';
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

  // Last use of a batch of keys (KEYS, with ARGV an atMs, atIso pair per key),
  // keeping the later time; a key that no longer exists is not recreated.
  // One script per batch, two commands per key (HMGET, and HSET when
  // later). On a Cluster every key of one call shares a slot (the store
  // groups them by account).
  gwaRecordLastUsed: script({
    keys: ['...keyRecords'],
    argv: ['...atMsAtIsoPairs'],
    lua: `
local written = 0
for i = 1, #KEYS do
  local at = tonumber(ARGV[2 * i - 1])
  local current = redis.call('HMGET', KEYS[i], 'status', 'lastUsedMs')
  if current[1] and (not current[2] or tonumber(current[2]) < at) then
    redis.call('HSET', KEYS[i], 'lastUsedMs', ARGV[2 * i - 1], 'lastUsedAt', ARGV[2 * i])
    written = written + 1
  end
end
return written`,
    parseReply: (reply): number => (typeof reply === 'number' ? reply : 0),
  }),
};

type ScriptName = keyof typeof REDIS_SCRIPTS;

/** `['a', 'b']` → `[string, string]`; `['a', '...rest']` → `[string, ...string[]]`. */
type StringsNamed<Names extends readonly string[]> = Names extends readonly [...infer Fixed extends readonly string[], `...${string}`]
  ? [...{ -readonly [I in keyof Fixed]: string }, ...string[]]
  : { -readonly [I in keyof Names]: string };

/** A script with a variable number of KEYS (`['...name']`) is called with their count first. */
type ScriptArguments<Keys extends readonly string[], Argv extends readonly string[]> = Keys extends readonly [`...${string}`]
  ? [numberOfKeys: number, ...keysThenArgv: string[]]
  : [...StringsNamed<Keys>, ...StringsNamed<Argv>];

/** The commands `defineCommand` adds to a client: KEYS then ARGV, all strings; the raw reply goes to the script's parseReply. */
export type ScriptCommands = {
  [Name in ScriptName]: (typeof REDIS_SCRIPTS)[Name] extends LuaScript<infer Keys, infer Argv, unknown>
    ? (...args: ScriptArguments<Keys, Argv>) => Promise<unknown>
    : never;
};

/** How many KEYS ioredis is told a script takes; undefined when the caller gives the count (`['...name']`). */
export function numberOfKeys(script: LuaScript<readonly string[], readonly string[], unknown>): number | undefined {
  return script.keys.length === 1 && script.keys[0]!.startsWith('...') ? undefined : script.keys.length;
}

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

/**
 * The authorize script for one default plan. The whole decision for a known
 * key in one round trip; it mirrors authorizeAccountState() in
 * src/limits/authorize-account-state.ts (the in-memory store runs that), and
 * the shared contract suite keeps them equal.
 *
 * Five commands when allowed: EVALSHA, HMGET of the key record, HMGET of
 * the account record with the bucket fields, TIME, and one HSET of the
 * buckets; a refused decision skips the HSET. Buckets are fields of the
 * account hash (no TTL of their own): a field whose TAT has passed is
 * equivalent to an absent one, and at most once per
 * BUCKET_SWEEP_INTERVAL_US an allowed decision deletes those (buckets of
 * rotated or revoked keys, of windows no longer in use), so the hash does
 * not grow without bound. An account limits override costs one more HMGET
 * when its windows differ from the plan's.
 *
 * What Redis spends on it is mostly Lua work, not the commands (measured
 * with test/bench/redis-check-path.ts and redis-benchmark): every
 * number parsed from a string (strtod) or formatted into one, every table
 * and every ARGV costs a fraction of a microsecond. So the default plan is
 * written into the script as numeric literals (window in µs and emission
 * interval precomputed, field names complete) instead of coming as ARGV:
 * the script is generated per plan, and the settings' plan is one frozen
 * object, so each replica has one. Only limit overrides stored in the
 * records are JSON, decoded when present. The reply carries numbers as
 * integers (no formatting in Lua), and only what the answer needs.
 *
 * KEYS: the account, the key record. ARGV: `nowUs` ('' means Redis's own
 * TIME; tests pass an override), the key's bucket field prefix.
 */
export interface AuthorizeScript {
  readonly lua: string;
  /** SHA-1 of lua, for EVALSHA. */
  readonly sha: string;
}

const generatedScripts = new WeakMap<RatePlan, AuthorizeScript>();

export function authorizeScript(plan: RatePlan): AuthorizeScript {
  let generated = generatedScripts.get(plan);
  if (generated === undefined) {
    const lua = authorizeLua(plan);
    generated = { lua, sha: createHash('sha1').update(lua).digest('hex') };
    // A plan that may still change is generated again on every call (tests build plans on the fly).
    if (Object.isFrozen(plan) && Object.isFrozen(plan.key) && Object.isFrozen(plan.account)) generatedScripts.set(plan, generated);
  }
  return generated;
}

/** A field name or other constant as a Lua literal; only names that need no escaping. */
function luaText(text: string): string {
  if (!/^[\w:{}.-]*$/.test(text)) throw new Error(`not a plain Redis name: ${text}`);
  return `'${text}'`;
}

/** ` + n` or ` - n`, for generated arithmetic. */
function plus(n: number): string {
  return n >= 0 ? ` + ${n}` : ` - ${-n}`;
}

/** The default plan's limits in decision order (key scope first), each with its bucket field as a Lua expression. */
interface PlanLimit {
  scope: LimitScope;
  limit: number;
  windowSeconds: number;
  windowUs: number;
  intervalUs: number;
  /** Lua expression naming the bucket field. */
  field: string;
  /** Lua expression reading the stored TAT (an element of the account HMGET). */
  stored: string;
}

/**
 * Lua, shared by both paths: the allowed decision's bucket writes (`writes`,
 * `w` entries) together with the hourly sweep of stale bucket fields, given
 * `now` and `a` (the account HMGET, whose 4th field is the sweep time).
 */
function luaWriteWithSweep(): string {
  const prefix = luaText(redisKeys.bucketFieldPrefix());
  return `local sweep_at = a[4] and tonumber(a[4])
  if not sweep_at or sweep_at <= now then
    if sweep_at then
      local written, stale = {}, {}
      for i = 1, w, 2 do written[writes[i]] = true end
      local all = redis.call('HGETALL', KEYS[1])
      for i = 1, #all, 2 do
        local f = all[i]
        if string.sub(f, 1, ${redisKeys.bucketFieldPrefix().length}) == ${prefix} and not written[f] and (tonumber(all[i + 1]) or 0) <= now then stale[#stale + 1] = f end
      end
      if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
    end
    writes[w + 1] = ${luaText(redisKeys.bucketSweepField())}
    writes[w + 2] = string.format('%d', now + ${BUCKET_SWEEP_INTERVAL_US})
  end
  redis.call('HSET', KEYS[1], unpack(writes))`;
}

/**
 * The generated script. Two paths after the reads and the status and
 * billing checks: a straight-line one for the common case (no limit
 * overrides in either record: the plan's limits, all literals, no tables
 * or closures), and a table-driven one for overrides, which may need one
 * more HMGET for buckets the first one did not read. Both compute exactly
 * what gcraStep() in src/limits/gcra.ts does.
 */
function authorizeLua(plan: RatePlan): string {
  const accountFieldPrefix = redisKeys.accountBucketFieldPrefix();
  const accountCount = plan.account.length;
  const limits: PlanLimit[] = [
    ...plan.key.map((limit, i) => ({ limit, scope: 'key' as const, field: `kf${i + 1}`, stored: `a[${5 + accountCount + i}]` })),
    ...plan.account.map((limit, i) => ({
      limit,
      scope: 'account' as const,
      field: luaText(`${accountFieldPrefix}${limit.windowSeconds}`),
      stored: `a[${5 + i}]`,
    })),
  ].map(({ limit, scope, field, stored }) => {
    if (!Number.isSafeInteger(limit.limit) || !Number.isSafeInteger(limit.windowSeconds)) throw new Error('limits are whole numbers');
    return {
      scope,
      limit: limit.limit,
      windowSeconds: limit.windowSeconds,
      windowUs: limit.windowSeconds * 1_000_000,
      intervalUs: emissionIntervalUs(limit),
      field,
      stored,
    };
  });
  const accountFields = plan.account.map((limit) => `, ${luaText(`${accountFieldPrefix}${limit.windowSeconds}`)}`).join('');
  const keyFieldLocals = plan.key.map((_, i) => `kf${i + 1}`);
  const planTable = (of: readonly RateLimit[]) =>
    `{${of.map((limit) => `{limit = ${limit.limit}, windowSeconds = ${limit.windowSeconds}}`).join(', ')}}`;
  const numbered = (template: (limit: PlanLimit, n: number) => string) => limits.map((limit, i) => template(limit, i + 1)).join('');
  return `
local floor, ceil = math.floor, math.ceil
local k = redis.call('HMGET', KEYS[2], 'status', 'expiresAtMs', 'limits', 'prefix', 'environment', 'revokeAtMs')
if not k[1] then return {'unknown_key'} end
local kp = ARGV[2]
local own = k[3] and cjson.decode(k[3])
local a, fields, n${keyFieldLocals.map((name) => `, ${name}`).join('')}
if own then
  fields = {'status', 'creditBalance', 'limits', ${luaText(redisKeys.bucketSweepField())}${accountFields}}
  n = ${4 + accountCount}
  for i = 1, #own do n = n + 1; fields[n] = kp .. own[i].windowSeconds end
  a = redis.call('HMGET', KEYS[1], unpack(fields))
else
${
  keyFieldLocals.length > 0
    ? `  ${keyFieldLocals.join(', ')} = ${plan.key.map((limit) => `kp .. ${luaText(String(limit.windowSeconds))}`).join(', ')}
`
    : ''
}  a = redis.call('HMGET', KEYS[1], 'status', 'creditBalance', 'limits', ${luaText(redisKeys.bucketSweepField())}${accountFields}${keyFieldLocals.map((name) => `, ${name}`).join('')})
end
if not a[1] then return {'unknown_key'} end
local now
if ARGV[1] ~= '' then now = tonumber(ARGV[1])
else local t = redis.call('TIME'); now = t[1] * 1000000 + t[2] end
local prefix = k[4]
if k[1] == 'revoked' or (k[6] and k[6] * 1000 <= now) then return {'key_revoked', prefix} end
if k[2] and k[2] * 1000 <= now then return {'key_expired', prefix} end
if a[1] == 'suspended' then return {'account_suspended', prefix} end
if a[2] and tonumber(a[2]) <= 0 then return {'credit_exhausted', prefix} end
if not own and not a[3] then
${
  limits.length === 0
    ? `  return {'allow', prefix, k[5]}
`
    : `  local v
${numbered(
  (limit, n) => `  local tat${n} = now
  v = ${limit.stored}
  if v then
    v = tonumber(v)
    if v > now then tat${n} = v end
  end
`,
)}  local r_retry, r_n, retry
${numbered(
  (limit, n) => `  retry = tat${n}${plus(limit.intervalUs - limit.windowUs)} - now
  if retry > 0 then
    retry = ceil(retry / 1000)
    if not r_retry or retry > r_retry then r_retry, r_n = retry, ${n} end
  end
`,
)}  if r_retry then
    local r = ({${limits.map((limit, i) => `{'${limit.scope}', ${limit.limit}, ${limit.windowSeconds}, tat${i + 1}}`).join(', ')}})[r_n]
    return {'rate_limited', prefix, r[1], r[2], r[3], 0, ceil((r[4] - now) / 1000), r_retry}
  end
  local fmt = string.format
  if a[4] and tonumber(a[4]) > now then
    redis.call('HSET', KEYS[1], ${limits.map((limit, i) => `${limit.field}, fmt('%d', tat${i + 1} + ${limit.intervalUs})`).join(', ')})
  else
    local writes, w = {${limits.map((limit, i) => `${limit.field}, fmt('%d', tat${i + 1} + ${limit.intervalUs})`).join(', ')}}, ${2 * limits.length}
    ${luaWriteWithSweep().replace(/\n/g, '\n  ')}
  end
  local t_scope, t_limit, t_window, t_remaining, t_new = '${limits[0]!.scope}', ${limits[0]!.limit}, ${limits[0]!.windowSeconds}, floor((now - tat1${plus(limits[0]!.windowUs - limits[0]!.intervalUs)}) / ${limits[0]!.intervalUs}), tat1 + ${limits[0]!.intervalUs}
  local remaining
${limits
  .slice(1)
  .map(
    (limit, i) => `  remaining = floor((now - tat${i + 2}${plus(limit.windowUs - limit.intervalUs)}) / ${limit.intervalUs})
  if remaining < t_remaining then t_scope, t_limit, t_window, t_remaining, t_new = '${limit.scope}', ${limit.limit}, ${limit.windowSeconds}, remaining, tat${i + 2} + ${limit.intervalUs} end
`,
  )
  .join('')}  return {'allow', prefix, k[5], t_scope, t_limit, t_window, t_remaining, ceil((t_new - now) / 1000)}
`
}end
local writes, w = {}, 0
local t_scope, t_limit, t_window, t_remaining, t_reset
local r_scope, r_limit, r_window, r_reset, r_retry
local function step(scope, field, stored, l)
  local window_us = l.windowSeconds * 1000000
  local interval = floor(window_us / l.limit)
  if interval < 1 then interval = 1 end
  local tat = now
  if stored then
    stored = tonumber(stored)
    if stored > now then tat = stored end
  end
  local new_tat = tat + interval
  local allow_at = new_tat - window_us
  if now < allow_at then
    local retry = ceil((allow_at - now) / 1000)
    if not r_retry or retry > r_retry then
      r_scope, r_limit, r_window, r_reset, r_retry = scope, l.limit, l.windowSeconds, ceil((tat - now) / 1000), retry
    end
  elseif not r_retry then
    w = w + 2
    writes[w - 1] = field
    writes[w] = string.format('%d', new_tat)
    local remaining = floor((window_us - (new_tat - now)) / interval)
    if not t_remaining or remaining < t_remaining then
      t_scope, t_limit, t_window, t_remaining, t_reset = scope, l.limit, l.windowSeconds, remaining, ceil((new_tat - now) / 1000)
    end
  end
end
local stored = {}
if own then
  for i = ${5 + accountCount}, n do stored[fields[i]] = a[i] end
else
${keyFieldLocals
  .map(
    (name, i) => `  stored[${name}] = a[${5 + accountCount + i}]
`,
  )
  .join('')}end
${plan.account
  .map(
    (limit, i) => `stored[${luaText(`${accountFieldPrefix}${limit.windowSeconds}`)}] = a[${5 + i}]
`,
  )
  .join('')}local overrides = a[3] and cjson.decode(a[3]) or {}
local steps, missing = {}, {}
local function add(scope, p, of)
  for _, l in ipairs(of) do
    local field = p .. l.windowSeconds
    steps[#steps + 1] = {scope, field, l}
    if stored[field] == nil then missing[#missing + 1] = field end
  end
end
add('key', kp, own or overrides.key or ${planTable(plan.key)})
add('account', ${luaText(accountFieldPrefix)}, overrides.account or ${planTable(plan.account)})
if #missing > 0 then
  local more = redis.call('HMGET', KEYS[1], unpack(missing))
  for i, field in ipairs(missing) do stored[field] = more[i] end
end
for _, s in ipairs(steps) do step(s[1], s[2], stored[s[2]], s[3]) end
if r_retry then return {'rate_limited', prefix, r_scope, r_limit, r_window, 0, r_reset, r_retry} end
if w > 0 then
  ${luaWriteWithSweep()}
end
if t_remaining then return {'allow', prefix, k[5], t_scope, t_limit, t_window, t_remaining, t_reset} end
return {'allow', prefix, k[5]}`;
}

/** A number the script answers: an integer reply, or a numeric string. */
function replyNumber(value: unknown): number {
  const number = typeof value === 'number' ? value : typeof value === 'string' && value !== '' ? Number(value) : Number.NaN;
  if (!Number.isFinite(number)) throw new StoreUnavailableError(`unexpected number in authorize reply from Redis: ${String(value)}`);
  return number;
}

function limitState(reply: readonly unknown[], at: number): LimitState {
  const scope = reply[at];
  if (scope !== 'key' && scope !== 'account') throw new StoreUnavailableError(`unexpected limit scope from Redis: ${String(scope)}`);
  return {
    scope,
    limit: replyNumber(reply[at + 1]),
    windowSeconds: replyNumber(reply[at + 2]),
    remaining: replyNumber(reply[at + 3]),
    resetMs: replyNumber(reply[at + 4]),
  };
}

export function parseAuthorizeReply(reply: unknown): AuthorizeOutcome {
  if (!Array.isArray(reply)) throw new StoreUnavailableError('unexpected authorize reply from Redis');
  const kind: unknown = reply[0];
  const prefix = typeof reply[1] === 'string' ? reply[1] : '';
  switch (kind) {
    case 'unknown_key':
      return { kind };
    case 'key_revoked':
    case 'key_expired':
    case 'account_suspended':
    case 'credit_exhausted':
      return { kind, prefix };
    case 'rate_limited':
      return { kind, prefix, hit: { ...limitState(reply, 2), retryAfterMs: replyNumber(reply[7]) } };
    case 'allow': {
      const environment = reply[2] as KeyEnvironment;
      return reply.length > 3 ? { kind, prefix, environment, tightest: limitState(reply, 3) } : { kind, prefix, environment };
    }
    default:
      throw new StoreUnavailableError(`unexpected authorize reply from Redis: ${String(kind)}`);
  }
}
