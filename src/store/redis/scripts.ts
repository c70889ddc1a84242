import type { AuthorizeOutcome } from '../../check/ports';
import type { Account, StoredKey } from '../../keys/key-records';
import { createHash } from 'node:crypto';
import type { Member } from '../../accounts/members';
import { limitHit, type LimitScope, type LimitState, type RateLimit, type RatePlan } from '../../accounts/limits/rate-limits';
import { emissionIntervalUs } from '../../accounts/limits/gcra';
import type { KeyEnvironment } from '../../keys/customer-key';
import type { UsageApplyOutcome, UsageBilling } from '../../metering/usage-record';
import { USAGE_STREAM_BILLING_FIELD, USAGE_STREAM_SHORTFALL_FIELD } from '../usage-stream-fields';
import { MAX_BUDGET_TOKENS, type TokenBudget, type TokenBudgetPlan, type TokenBudgetState } from '../../accounts/limits/token-budgets';
import { MAX_WINDOW_SECONDS } from '../../accounts/limits/rate-limit';
import {
  CorruptRecordError,
  StoreUnavailableError,
  type ActiveKeyCapReached,
  type AddMemberResult,
  type CreditOutcome,
  type CreditResult,
  type MemberChangeResult,
  type RotateKeyResult,
} from '../../ports/store';
import {
  PACKED_BUCKET_BYTES as BUCKET_BYTES,
  PACKED_BUCKET_STRUCT as BUCKET_STRUCT,
  PACKED_TOKEN_BUCKET_BYTES as TOKEN_BUCKET_BYTES,
  PACKED_TOKEN_BUCKET_STRUCT as TOKEN_BUCKET_STRUCT,
  exactBalance,
  fieldsOf,
  parseAccount,
  parseKey,
  parseMember,
} from './redis-records';
import { redisKeys } from './redis-keys';

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

/** How often (µs) the usage script deletes spent token buckets and old months' spend of an account. */
const USAGE_SWEEP_INTERVAL_US = 3_600_000_000;

/** A number written into a generated script, or a Lua expression (a name) evaluated when it runs. */
type LuaValue = number | string;

/** A window in µs: a literal from a literal, else the name `window_us`, which the caller's Lua defines. */
function luaWindowUs(windowSeconds: LuaValue): LuaValue {
  return typeof windowSeconds === 'number' ? windowSeconds * 1_000_000 : 'window_us';
}

/**
 * Lua statements: floor division with remainder in place, into q and r
 * (declared by the caller); x and y are names or literals. Exact while x,
 * y and q × y stay below 2^53: the quotient of the division in doubles is
 * off by at most one, which the remainder's sign corrects.
 */
function luaDivmod(q: string, r: string, x: LuaValue, y: LuaValue): string {
  return `${q} = floor(${x} / ${y})
${r} = ${x} - ${q} * ${y}
if ${r} < 0 then ${q} = ${q} - 1; ${r} = ${r} + ${y} elseif ${r} >= ${y} then ${q} = ${q} + 1; ${r} = ${r} - ${y} end`;
}

/**
 * Lua statements: the tokens not yet wholly refilled (a token begun counts)
 * into `u` (declared by the caller), in a bucket `d` µs (+ fraction/tokens)
 * ahead of now, for d under one window: ⌈(d × tokens + fraction) / W µs⌉.
 * The product passes 2^53 for the biggest budgets, so in general it is split
 * (d = d1 s + d0 µs). With a budget's numbers as literals, the split is
 * left out where the product cannot pass 2^53 (the bounds are known when
 * the script is generated), and is only a branch where it can: small debts,
 * the common case, take one division.
 */
function luaUnrefilled(u: string, d: string, fraction: string, tokens: LuaValue, windowSeconds: LuaValue): string {
  const windowUs = luaWindowUs(windowSeconds);
  const split = `local d1, d0, q1, r1, x, m
${luaDivmod('d1', 'd0', d, 1_000_000)}
x = d1 * ${tokens}
${luaDivmod('q1', 'r1', 'x', windowSeconds)}
x = r1 * 1000000 + d0 * ${tokens} + ${fraction}
${luaDivmod(u, 'm', 'x', windowUs)}
${u} = ${u} + q1
if m > 0 then ${u} = ${u} + 1 end`;
  if (typeof tokens !== 'number' || typeof windowUs !== 'number') return split;
  // d < exactBelow keeps d × tokens + fraction + windowUs (the quotient's correction) below 2^53.
  const exactBelow = Math.floor((2 ** 53 - tokens - windowUs) / tokens);
  const whole = `local x, m = ${d} * ${tokens} + ${fraction}, 0
${luaDivmod(u, 'm', 'x', windowUs)}
if m > 0 then ${u} = ${u} + 1 end`;
  if (windowUs <= exactBelow) return whole;
  return `if ${d} < ${exactBelow} then
${indent(whole)}
else
${indent(split)}
end`;
}

/**
 * Lua statements: a token bucket's text of the layout before packing (a
 * name; redisKeys.legacyTokenBucketFieldPrefix) into tat and fraction
 * (declared by the caller); tat nil when absent or unreadable. Only the
 * usage script's sweep reads one, to move it into the packed field.
 */
function luaParseLegacyTokenBucket(text: string): string {
  return `if ${text} then
  tat, fraction = tonumber(${text}), 0
  if not tat then
    tat, fraction = string.match(${text}, '^(%d+) (%d+)$')
    if tat then tat, fraction = tonumber(tat), tonumber(fraction) end
  end
end`;
}

/**
 * Lua: a packed token bucket field (redisKeys.keyTokenBucketField) →
 * {[windowSeconds] = {tat, fraction}}; of a value that is not whole
 * entries, its whole entries.
 */
const LUA_TOKEN_BUCKETS_OF = `
local function token_buckets_of(packed)
  local out = {}
  if packed then
    for at = 1, #packed - ${TOKEN_BUCKET_BYTES - 1}, ${TOKEN_BUCKET_BYTES} do
      local w, t, f = struct.unpack('${TOKEN_BUCKET_STRUCT}', packed, at)
      out[w] = {t, f}
    end
  end
  return out
end`;

/**
 * Lua: token budget buckets, exact in doubles (mirrors
 * src/limits/token-budget.ts, which uses BigInt; a test holds the two
 * equal). A bucket is its TAT in µs and the TAT's fraction of a µs as a
 * numerator over the budget's tokens; a field packs a scope's buckets
 * (redisKeys.keyTokenBucketField). Budgets are at most 10^9 tokens and 10^6
 * tokens per second over a window of at most 31 days, so every product
 * below stays under 2^53.
 * - divmod(x, y): floor division with remainder (luaDivmod), for what the
 *   scripts compute from names;
 * - tb_consume(tat, fraction, now, n, tokens, window_s): the bucket's TAT and
 *   fraction after using n tokens at `now` (µs); tat nil for no bucket;
 * - token_buckets_of(packed) (LUA_TOKEN_BUCKETS_OF), and tb_pack(first,
 *   rest, now): a field's value, the buckets of `first` ({window, tat,
 *   fraction}, in order) then those of `rest` (as token_buckets_of makes
 *   them) still ahead of now, by window.
 * The Check only reads buckets, in generated blocks (luaBudgetCheck): it
 * takes LUA_DIVMOD alone.
 */
const LUA_DIVMOD = `
local floor = math.floor
local function divmod(x, y)
  local q, r
${indent(luaDivmod('q', 'r', 'x', 'y'))}
  return q, r
end`;

/** What the usage script needs to move a token bucket. */
export const LUA_TOKEN_BUDGET = `${LUA_DIVMOD}
${LUA_TOKEN_BUCKETS_OF.trim()}
local function tb_consume(tat, fraction, now, n, tokens, window_s)
  if not tat or tat < now then tat, fraction = now, 0 end
  if fraction >= tokens then fraction = 0 end
  local a, b = divmod(n, tokens)
  local c, r = divmod(b * window_s, tokens)
  local d, e = divmod(r * 1000000, tokens)
  tat = tat + a * window_s * 1000000 + c * 1000000 + d
  fraction = fraction + e
  if fraction >= tokens then tat = tat + 1; fraction = fraction - tokens end
  return tat, fraction
end
local function tb_pack(first, rest, now)
  local parts, windows = {}, {}
  for i, b in ipairs(first) do parts[i] = struct.pack('${TOKEN_BUCKET_STRUCT}', b[1], b[2], b[3]) end
  for w, b in pairs(rest) do if b[1] >= now then windows[#windows + 1] = w end end
  table.sort(windows)
  for _, w in ipairs(windows) do parts[#parts + 1] = struct.pack('${TOKEN_BUCKET_STRUCT}', w, rest[w][1], rest[w][2]) end
  return table.concat(parts)
end`;

/**
 * Lua for the usage script's sweep (at most once per USAGE_SWEEP_INTERVAL_US
 * per account, and on this version's first record on an account an earlier
 * version swept), given `now` and `gone`: one HGETALL, then
 * - spend of months before the previous is deleted (and marked gone);
 * - token buckets whose TAT has passed are dropped from their packed field,
 *   and a field left empty is deleted;
 * - text token buckets of the layout before packing
 *   (redisKeys.legacyTokenBucketFieldPrefix) still ahead of now are moved
 *   into the packed field of their scope, and deleted with the old sweep
 *   field. Where the packed field has the window too, both versions counted
 *   into it during a rolling deploy, so the debts add up (the text's
 *   fraction of a µs rounded up to one): no token is lost.
 * Written before the record's own reads, which then see the packed fields.
 */
function luaUsageSweep(): string {
  const packedPrefix = luaText(redisKeys.tokenBucketFieldPrefix());
  const legacyPrefix = luaText(redisKeys.legacyTokenBucketFieldPrefix());
  return `local oldest = iso8601(math.floor(now / 1000)):sub(1, 7)
local year, month = tonumber(oldest:sub(1, 4)), tonumber(oldest:sub(6, 7))
if month == 1 then oldest = string.format('%04d-12', year - 1) else oldest = string.format('%04d-%02d', year, month - 1) end
local all, stale, packed, moved = redis.call('HGETALL', KEYS[1]), {}, {}, {}
for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  local prefix = string.sub(f, 1, 3)
  if prefix == ${packedPrefix} then
    packed[f] = v
  elseif prefix == ${legacyPrefix} then
    stale[#stale + 1] = f
    local tat, fraction
${indent(indent(luaParseLegacyTokenBucket('v')))}
    if tat and tat >= now then
      local id, w = string.match(f, '^${redisKeys.legacyKeyTokenBucketFieldPrefix('(.+)')}(%d+)$')
      local to = id and ${keyField(redisKeys.keyTokenBucketField, 'id')}
      if not id then
        w = string.match(f, '^${redisKeys.legacyAccountTokenBucketFieldPrefix()}(%d+)$')
        to = w and ${luaText(redisKeys.accountTokenBucketField())}
      end
      if to then
        if not moved[to] then moved[to] = {} end
        moved[to][tonumber(w)] = {tat, fraction}
      end
    end
  elseif (prefix == ${luaText(redisKeys.spendFieldPrefix())} and string.sub(f, -7) < oldest) or f == ${luaText(redisKeys.legacyUsageSweepField())} then
    stale[#stale + 1] = f; gone[f] = true
  end
end
for f in pairs(moved) do if not packed[f] then packed[f] = false end end
for f, v in pairs(packed) do
  local buckets, changed = token_buckets_of(v or nil), not v
  for w, b in pairs(buckets) do if b[1] < now then buckets[w] = nil; changed = true end end
  for w, b in pairs(moved[f] or {}) do
    local own = buckets[w]
    if own then own[1] = own[1] + (b[1] - now) + (b[2] > 0 and 1 or 0) else buckets[w] = b end
    changed = true
  end
  if changed then
    if next(buckets) == nil then stale[#stale + 1] = f else redis.call('HSET', KEYS[1], f, tb_pack({}, buckets, now)) end
  end
end
if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end`;
}

/**
 * Lua, for a test only: tb_unrefilled(debt_us, fraction, tokens, window_s),
 * the tokens not yet wholly refilled as the Check computes them for a
 * budget read from a record (luaBudgetCheck with names), after LUA_DIVMOD,
 * so the test can hold that arithmetic to the BigInt one at its bounds.
 */
export const LUA_TOKEN_UNREFILLED_FOR_TEST = `
local function tb_unrefilled(debt_us, fraction, tokens, window_s)
  local u, window_us = 0, window_s * 1000000
${indent(luaUnrefilled('u', 'debt_us', 'fraction', 'tokens', 'window_s'))}
  return u
end`;

/** gwaApplyUsage's Lua; with `streams`, gwaApplyAndStreamUsage's. */
function applyUsageLua(streams: boolean): string {
  return `${LUA_ISO_8601}
${LUA_TOKEN_BUDGET}
${LUA_RELEASE_HOLD.trim()}
local plan_from = ${streams ? '17 + tonumber(ARGV[16])' : '15'}${streams ? LUA_STREAM_USAGE : ''}
-- The answer came: its hold gives way to its real cost (or was released with it already, for a repeat).
release_hold(KEYS[1], KEYS[6], ARGV[14])
local first = redis.call('GET', KEYS[3])
if first then${streams ? "\n  stream_once(string.match(first, '^(%a+):(%d+)$'))" : ''}
  return {'duplicate', first}
end
local a = redis.call('HMGET', KEYS[1], 'id', 'creditBalance', '${redisKeys.tokenBudgetsField()}', ARGV[5], ARGV[6],
  '${redisKeys.creditShortfallField()}', '${redisKeys.usageSweepField()}')
if not a[1] then${streams ? "\n  stream_once('account_not_found', '0')" : ''}
  return {'account_not_found'}
end
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
  -- A new account has nothing to sweep; one an earlier version swept may hold text token buckets.
  if sweep_at or redis.call('HEXISTS', KEYS[1], '${redisKeys.legacyUsageSweepField()}') == 1 then
${indent(indent(luaUsageSweep()))}
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
    writes[#writes + 1] = string.format('%.0f', math.min(amount(a[6]) + shortfall, 9007199254740991))
  end
end
for i, field in ipairs({ARGV[5], ARGV[6]}) do
  local spent = 0
  if not gone[field] then spent = amount(a[3 + i]) end
  writes[#writes + 1] = field
  writes[#writes + 1] = string.format('%.0f', math.min(spent + cost, 9007199254740991))
end
local key_count, account_count = tonumber(ARGV[12]), tonumber(ARGV[13])
local aggregates_from = plan_from + 2 * (key_count + account_count)
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
  local key_budgets = (own and cjson.decode(own)) or overrides.key or plan_budgets(plan_from, key_count)
  local account_budgets = overrides.account or plan_budgets(plan_from + 2 * key_count, account_count)
  if #key_budgets + #account_budgets > 0 then
    local stored = redis.call('HMGET', KEYS[1], ARGV[7], ARGV[8])
    for i, scope in ipairs({key_budgets, account_budgets}) do
      if #scope > 0 then
        local buckets, moved = token_buckets_of(stored[i]), {}
        for j, b in ipairs(scope) do
          local w = b.windowSeconds
          local old = buckets[w] or {}
          moved[j] = {w, tb_consume(old[1], old[2], now, tokens, b.tokens, w)}
          buckets[w] = nil
        end
        writes[#writes + 1] = ARGV[6 + i]
        writes[#writes + 1] = tb_pack(moved, buckets, now)
      end
    end
  end
end
redis.call('HSET', KEYS[1], unpack(writes))
local outcome = billing .. ':' .. string.format('%.0f', shortfall)
redis.call('SET', KEYS[3], outcome, 'PX', ARGV[2])${streams ? "\nstream_once(billing, string.format('%.0f', shortfall))" : ''}
-- A TTL from the service's clock, not PEXPIREAT: Redis's own clock may differ
-- from the gateway's, and the bucket must live as long as the service reads it.
local now_ms = math.floor(now / 1000)
for i, expires in ipairs({ARGV[10], ARGV[11]}) do
  if tonumber(expires) > now_ms then
    for j = aggregates_from, #ARGV, 2 do redis.call('HINCRBY', KEYS[3 + i], ARGV[j], ARGV[j + 1]) end
    redis.call('PEXPIRE', KEYS[3 + i], tonumber(expires) - now_ms)
  end
end
return {'applied', outcome}`;
}

/**
 * The stream entry of gwaApplyAndStreamUsage (KEYS[7], its marker KEYS[8]),
 * from ARGV[17…] (ARGV[16] strings: names and values, the values of
 * `billing` and `creditShortfall` replaced by how the script billed the
 * record). The stream key's type is checked first, before any write. Once
 * the marker exists it is written again unchanged (SET KEEPTTL): a write, so
 * that a WAIT or WAITAOF after a repeat covers the first application, made
 * perhaps on a connection since lost.
 */
const LUA_STREAM_USAGE = `
local stream_type = redis.call('TYPE', KEYS[7])['ok']
if stream_type ~= 'stream' and stream_type ~= 'none' then return {'wrong_type', KEYS[7], stream_type} end
local streamed_id = redis.call('GET', KEYS[8])
local function stream_once(billing, shortfall)
  if streamed_id then
    redis.call('SET', KEYS[8], streamed_id, 'KEEPTTL')
    return
  end
  local fields = {}
  for i = 17, 16 + tonumber(ARGV[16]), 2 do
    local name, value = ARGV[i], ARGV[i + 1]
    if name == '${USAGE_STREAM_BILLING_FIELD}' then value = billing
    elseif name == '${USAGE_STREAM_SHORTFALL_FIELD}' then value = shortfall end
    fields[#fields + 1] = name
    fields[#fields + 1] = value
  end
  streamed_id = redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[15], '*', unpack(fields))
  redis.call('SET', KEYS[8], streamed_id, 'PX', ARGV[2])
end`;

/**
 * Lua for the usage script: release_hold(account, holds, request_id), the
 * hold of the metered answer's request id taken off its account (its sums
 * down by its amounts, zero sums deleted), in the same step as the debit. A
 * hold that lapsed before the answer came is gone already: nothing to take.
 */
const LUA_RELEASE_HOLD = `
local function release_hold(account, holds, request_id)
  local held = redis.call('HGET', holds, request_id)
  if not held then return end
  redis.call('HDEL', holds, request_id)
  local id, m, t, km, kt = string.match(held, '^%d+ (%S+) (%d+) (%d+) (%d+) (%d+)$')
  if not id then return end
  for f, n in pairs({[${luaText(redisKeys.heldMinorUnitsField())}] = m, [${luaText(redisKeys.heldTokensField())}] = t, [${keyField(redisKeys.keyHeldMinorUnitsField, 'id')}] = km, [${keyField(redisKeys.keyHeldTokensField, 'id')}] = kt}) do
    if n ~= '0' and redis.call('HINCRBY', account, f, '-' .. n) <= 0 then redis.call('HDEL', account, f) end
  end
end`;

/** The keys and fixed arguments both usage scripts begin with (applyUsageLua reads them by position). */
const APPLY_USAGE_KEYS = ['account', 'keyRecord', 'appliedMarker', 'hourAggregate', 'dayAggregate', 'holds'] as const;
const APPLY_USAGE_ARGV = [
  'nowUs',
  'markerTtlMs',
  'costMinorUnits',
  'totalTokens',
  'accountSpendField',
  'keySpendField',
  'keyTokenBucketField',
  'accountTokenBucketField',
  'creditLimit',
  'hourExpiresAtMs',
  'dayExpiresAtMs',
  'planKeyBudgetCount',
  'planAccountBudgetCount',
  'holdRequestId',
] as const;

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

  // Applies a JSON patch to the account; null removes creditBalance, a limits or token budget scope, or the spend cap.
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
if p.keyRestrictions == cjson.null then redis.call('HDEL', KEYS[1], '${redisKeys.restrictionsField()}')
elseif p.keyRestrictions ~= nil then redis.call('HSET', KEYS[1], '${redisKeys.restrictionsField()}', p.restrictionsText) end
return redis.call('HGETALL', KEYS[1])`,
    parseReply: (reply): Account | null => (reply ? parseAccount(fieldsOf(reply)) : null),
  }),

  // Adds credit atomically; a post-paid account (no balance) is refused, and so
  // is a result outside ±limit, before anything is written. Balance, amount
  // and limit are at most 2 × 10^15 in size, so the sum is exact in a Lua
  // double; the answer is formatted with %.0f, because tostring() keeps only
  // 14 significant digits.
  //
  // With an idempotency key the marker (KEYS[2]) is written in the same step
  // as the outcome, refusals included, so that a key has one answer: a
  // repeat with the same amount answers 'replayed' with it and another
  // amount 'idempotency_key_reused', writing nothing. The marker holds its
  // own expiry on the store's clock (the tests' override, else Redis TIME)
  // besides its TTL, so the tests' clock expires it as it does the in-memory
  // store's; and the id of the store call that wrote it, so that the store
  // repeating its own call after a lost reply (callUntilAnswered) is told
  // 'ok' (and audits it once), not 'replayed'. An unreadable balance and an
  // unknown account write no marker: nothing was decided.
  gwaAdjustCredit: script({
    keys: ['account', '...idempotencyMarker'],
    argv: ['amount', 'limit', 'nowMsOverride', 'markerTtlMs', 'attemptId'],
    lua: `
local marker = KEYS[2]
local now
if marker then
  if ARGV[3] ~= '' then now = tonumber(ARGV[3])
  else local t = redis.call('TIME'); now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end
  local stored = redis.call('GET', marker)
  if stored then
    local expires, amount, attempt, kind, balance = string.match(stored, '^(%d+) (%S+) (%S+) (%S+) ?(%S*)$')
    if not expires then return {'marker_unreadable', stored} end
    if tonumber(expires) > now then
      if amount ~= ARGV[1] then return {'idempotency_key_reused', amount} end
      if attempt == ARGV[5] then return {kind, balance} end
      return {'replayed', kind, balance}
    end
  end
end
local function decided(kind, balance)
  if marker then
    local text = string.format('%.0f', now + tonumber(ARGV[4])) .. ' ' .. ARGV[1] .. ' ' .. ARGV[5] .. ' ' .. kind
    if balance then text = text .. ' ' .. balance end
    redis.call('SET', marker, text, 'PX', ARGV[4])
  end
  return {kind, balance}
end
if redis.call('EXISTS', KEYS[1]) == 0 then return {'account_not_found'} end
local stored = redis.call('HGET', KEYS[1], 'creditBalance')
if not stored then return decided('not_prepaid') end
if not string.match(stored, '^-?%d+$') or string.len(stored) > 17 then return {'balance_unreadable', stored} end
local balance = tonumber(stored)
local limit = tonumber(ARGV[2])
if math.abs(balance) > 9007199254740991 then return {'balance_unreadable', stored} end
local result = balance + tonumber(ARGV[1])
if math.abs(result) > limit then return decided('balance_out_of_range', stored) end
local text = string.format('%.0f', result)
redis.call('HSET', KEYS[1], 'creditBalance', text)
return decided('ok', text)`,
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
if p.restrictions == cjson.null then redis.call('HDEL', KEYS[1], '${redisKeys.restrictionsField()}')
elseif p.restrictions ~= nil then redis.call('HSET', KEYS[1], '${redisKeys.restrictionsField()}', p.restrictionsText) end
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
  // is Redis's TIME, the clock every Check is decided on (carried by RedisClock;
  // '' = TIME; tests pass an override). The answer carries both records, so nothing is read after
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

  // Last use of a batch of keys, keeping the later time; a key that no
  // longer exists is not recreated. One script per batch: per key HMGET, HSET
  // when later, and HINCRBY per count hash; per distinct count hash one
  // PEXPIRE. On a Cluster every key of one call shares a slot (the store
  // groups them by account).
  /**
   * Last-use times and request counts of a batch of keys. KEYS: the batch's
   * marker, then per use its key record, hourly and daily count hashes. ARGV:
   * the marker's and the hashes' lifetimes (ms from now; a bucket whose
   * lifetime is over is not written), then per use its time (ms, ISO),
   * requests and key id. The counts are added only when the marker was not
   * set yet (a batch sent again is counted once); a requests of 0 writes
   * nothing, so a batch without counts needs no marker (ARGV[1] is then 0).
   */
  gwaRecordLastUsed: script({
    keys: ['countedBatch', '...keyRecordsThenHourlyThenDailyCounts'],
    argv: ['markerTtlMs', 'hourlyTtlMs', 'dailyTtlMs', '...atMsAtIsoRequestsKeyId'],
    lua: `
local n = (#KEYS - 1) / 3
local hourly_ttl = tonumber(ARGV[2])
local daily_ttl = tonumber(ARGV[3])
local counting = false
if tonumber(ARGV[1]) > 0 then
  counting = redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) ~= false
end
local written = 0
-- A batch's keys mostly share their account's two count hashes: each hash gets its lifetime once per call.
local given_lifetime = {}
local function count(hash, key_id, requests, ttl)
  redis.call('HINCRBY', hash, key_id, requests)
  if not given_lifetime[hash] then
    redis.call('PEXPIRE', hash, ttl)
    given_lifetime[hash] = true
  end
end
for i = 1, n do
  local base = 3 + 4 * (i - 1)
  local at = tonumber(ARGV[base + 1])
  local current = redis.call('HMGET', KEYS[1 + i], 'status', 'lastUsedMs')
  if current[1] then
    if not current[2] or tonumber(current[2]) < at then
      redis.call('HSET', KEYS[1 + i], 'lastUsedMs', ARGV[base + 1], 'lastUsedAt', ARGV[base + 2])
      written = written + 1
    end
    local requests = tonumber(ARGV[base + 3])
    if counting and requests > 0 then
      if hourly_ttl > 0 then count(KEYS[1 + n + i], ARGV[base + 4], requests, ARGV[2]) end
      if daily_ttl > 0 then count(KEYS[1 + 2 * n + i], ARGV[base + 4], requests, ARGV[3]) end
    end
  end
end
return written`,
    parseReply: (reply): number => (typeof reply === 'number' ? reply : 0),
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
   * The account's shortfall stops at 2^53 − 1, as spend does: past it the sum
   * is no longer exact and, once 17 digits long, unreadable, which would hold
   * every later record of the account; each record's own shortfall is exact
   * in its marker and its stream entry, which is what billing reads.
   *
   * The marker holds how the record was billed (`prepaid:<shortfall>`), for
   * the stream entry of a record whose first reply was lost. Token buckets use
   * Redis's clock (the Check's); spend and aggregates the record's own time,
   * so a record applied late still counts in the hour, day and month it
   * happened. A record moves the packed bucket field of each scope with
   * budgets (redisKeys.keyTokenBucketField): the budgets in force first, in
   * their order, then the field's other windows still ahead of now. At most
   * once an hour (usageSweepDueUs) the script sweeps the account before
   * reading what it needs (luaUsageSweep): spent token buckets, spend of
   * months before the previous one, and the text token buckets of the layout
   * before packing, which it moves into the packed fields; this version's
   * first record on an account an earlier version swept sweeps at once.
   * `nowUs` '' means Redis's own TIME.
   */
  gwaApplyUsage: script({
    keys: [...APPLY_USAGE_KEYS],
    argv: [...APPLY_USAGE_ARGV, '...planBudgetsThenAggregateIncrements'],
    lua: applyUsageLua(false),
    parseReply: parseApplyUsageReply,
  }),

  /**
   * gwaApplyUsage and the record's usage stream entry in the same script, so
   * the debit, the ledger's record and the stream entry are kept or lost
   * together (one MULTI/EXEC in the AOF and to replicas): standalone and
   * Sentinel, where the stream may share a script with any account. The
   * stream key's type is checked before anything is written; the entry goes
   * in right after the marker, before the aggregates, and takes how the
   * record was billed from the script (LUA_STREAM_USAGE).
   */
  gwaApplyAndStreamUsage: script({
    keys: [...APPLY_USAGE_KEYS, 'stream', 'streamedMarker'],
    argv: [...APPLY_USAGE_ARGV, 'streamMaxLength', 'streamFieldCount', '...streamFieldsThenPlanBudgetsThenAggregateIncrements'],
    lua: applyUsageLua(true),
    parseReply: parseApplyUsageReply,
  }),

  // The hold of an answer that costs nothing (no usage record comes to release it).
  gwaReleaseHold: script({
    keys: ['account', 'holds'],
    argv: ['requestId'],
    lua: `${LUA_RELEASE_HOLD}
release_hold(KEYS[1], KEYS[2], ARGV[1])
return 1`,
    parseReply: (): undefined => undefined,
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
      if (kind === 'appended' || kind === 'duplicate') return kind;
      throw new StoreUnavailableError(`unexpected usage stream reply from Redis: ${String(kind)}`);
    },
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
  const [kind, second, third] = reply as unknown[];
  switch (kind) {
    case 'account_not_found':
      return { kind };
    case 'replayed':
      return { kind, first: parseCreditOutcome(second, third) };
    case 'idempotency_key_reused':
      return { kind, amount: exactBalance(second) };
    case 'marker_unreadable':
      // Never guessed: read as absent it could apply the adjustment a second time.
      throw new StoreUnavailableError(`unreadable credit idempotency marker in Redis: '${String(second)}'`);
    default:
      return parseCreditOutcome(kind, second);
  }
}

function parseCreditOutcome(kind: unknown, balance: unknown): CreditOutcome {
  switch (kind) {
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
 * Four commands when allowed: EVALSHA, HMGET of the key record, HMGET of
 * the account record with the bucket fields, and one HSET of the buckets; a
 * refused decision skips the HSET. The time comes with the call (Redis's
 * clock as the replica carries it between samples, RedisClock: within half
 * a round trip of TIME), so the script runs no TIME of its own: 3.9 % fewer
 * instructions per decision, the argument's parse paid. Buckets are
 * fields of the account hash (no TTL of their own), packed: one field per
 * key and one for the account, each holding all of its windows
 * (redisKeys.keyBucketField), so a decision reads and writes two bucket fields however many windows,
 * and the hash, which every HMGET and HSET field lookup scans while it is a
 * listpack, has one entry per key instead of one per key and window. A
 * window whose TAT has passed is equivalent to an absent one, and at most
 * once per BUCKET_SWEEP_INTERVAL_US a decision deletes the fields with none
 * ahead (buckets of rotated or revoked keys, of windows no longer in use),
 * so the hash does not grow without bound (luaSweep).
 *
 * What Redis spends on it is mostly Lua work and the fields of its
 * commands, not the commands (measured with test/bench/redis-check-path.ts
 * and, instruction by instruction, redis-server under callgrind): every
 * field looked up, every number parsed from a string (strtod) or formatted
 * into one, every table and every ARGV costs a fraction of a microsecond.
 * So the default plan is written into the script as numeric literals
 * (window in µs and emission interval precomputed, field names complete)
 * instead of coming as ARGV: the script is generated per plan, and the
 * settings' plan is one frozen object, so each replica has one. The buckets
 * are binary (BUCKET_STRUCT: struct.unpack and struct.pack, no strtod or
 * sprintf). Only limit overrides stored in the records are JSON, decoded
 * when present. The reply carries numbers as integers (no formatting in
 * Lua), and only what the answer needs.
 *
 * The same round trip also reads the spend caps and the token budgets
 * (luaSpendCaps, luaTokenBudgetCheck): the default plan's budgets are
 * literals whose buckets come with the account HMGET, so they add no
 * command; a cap, or a budget override in either record, one more HMGET.
 *
 * KEYS: the account, the key record (every field the decision reads is in
 * one of them). ARGV: the key id, of which the script names the key's
 * fields (its bucket, token buckets and spend), then the decision time in
 * µs on Redis's clock (RedisClock; in tests, their clock); with a hold, its
 * four (luaHeldSums); last, always, the three of LUA_RESTRICTIONS.
 *
 * A rolling deploy from the version that kept one field per window
 * (`rl:k:<keyId>:<w>`, `rl:a:<w>`, swept by `rlSweepAtUs`): this version's
 * sweep field is a new one, so its first decision on an account sweeps,
 * and the sweep moves every live old bucket into the packed fields (the
 * later TAT where both have one) and deletes the old fields, before the
 * decision reads them: no bucket is reset. While old replicas still run,
 * each version counts in its own fields; an old replica's requests after
 * the move are seen by this version at its next sweep (the later TAT
 * again), so during the rollout a key can get up to its limit through each
 * version. The old version never deletes the packed fields (its sweep
 * deletes only `rl:` fields). A rollback to it starts its buckets afresh
 * once (it does not read the packed fields), and leaves them in the hash
 * until a later version sweeps.
 */
export interface AuthorizeScript {
  readonly lua: string;
  /** SHA-1 of lua, for EVALSHA. */
  readonly sha: string;
}

const generatedScripts = new WeakMap<RatePlan, WeakMap<TokenBudgetPlan, AuthorizeScript>>();

const frozenPlan = (plan: RatePlan | TokenBudgetPlan) =>
  Object.isFrozen(plan) && Object.isFrozen(plan.key) && Object.isFrozen(plan.account);

export function authorizeScript(plan: RatePlan, budgets: TokenBudgetPlan): AuthorizeScript {
  let generated = generatedScripts.get(plan)?.get(budgets);
  if (generated === undefined) {
    const lua = authorizeLua(plan, budgets);
    generated = { lua, sha: createHash('sha1').update(lua).digest('hex') };
    // A plan that may still change is generated again on every call (tests build plans on the fly).
    if (frozenPlan(plan) && frozenPlan(budgets)) {
      let byBudgets = generatedScripts.get(plan);
      if (byBudgets === undefined) generatedScripts.set(plan, (byBudgets = new WeakMap()));
      byBudgets.set(budgets, generated);
    }
  }
  return generated;
}

/** A field name or other constant as a Lua literal; only names that need no escaping. */
function luaText(text: string): string {
  if (!/^[\w:{}.-]*$/.test(text)) throw new Error(`not a plain Redis name: ${text}`);
  return `'${text}'`;
}

/**
 * A field named after the key, as a Lua expression of the key id (ARGV[1] unless named):
 * keyField(redisKeys.keyBucketField) is `'rk:' .. ARGV[1]`.
 */
function keyField(name: (keyId: string) => string, keyId = 'ARGV[1]'): string {
  const [before = '', after = ''] = name('\u0000').split('\u0000');
  return [before === '' ? [] : [luaText(before)], [keyId], after === '' ? [] : [luaText(after)]].flat().join(' .. ');
}

/** ` + n` or ` - n`, for generated arithmetic. */
function plus(n: number): string {
  return n >= 0 ? ` + ${n}` : ` - ${-n}`;
}

/** The default plan's limits in decision order (key scope first). */
interface PlanLimit {
  scope: LimitScope;
  limit: number;
  windowSeconds: number;
  windowUs: number;
  intervalUs: number;
}

/**
 * Lua: a packed bucket field (see redisKeys.keyBucketField: per window 12
 * bytes, struct '<I4d') → {[windowSeconds] = tatUs}, into `into`; a value of
 * another length adds nothing. format_buckets packs `first` ({window, tat}
 * pairs, in order) then the windows of `rest` in ascending order.
 */
const LUA_BUCKETS = `
local function parse_buckets(packed, into)
  if packed and #packed % ${BUCKET_BYTES} == 0 then
    for i = 1, #packed, ${BUCKET_BYTES} do
      local w, t = struct.unpack('${BUCKET_STRUCT}', packed, i)
      into[w] = t
    end
  end
  return into
end
local function format_buckets(first, rest)
  local parts, windows = {}, {}
  for i, b in ipairs(first) do parts[i] = struct.pack('${BUCKET_STRUCT}', b[1], b[2]) end
  for w in pairs(rest) do windows[#windows + 1] = w end
  table.sort(windows)
  for _, w in ipairs(windows) do parts[#parts + 1] = struct.pack('${BUCKET_STRUCT}', w, rest[w]) end
  return table.concat(parts)
end`;

/**
 * Lua for the general path when the sweep is due (at most once per
 * BUCKET_SWEEP_INTERVAL_US per account, and on an account's first decision):
 * one HGETALL of the account hash, then
 * - packed bucket fields whose windows have all passed are deleted (a
 *   rotated or revoked key's, windows no longer in use);
 * - bucket fields of the layout before packing (one per window, written by
 *   an earlier version of this script, see redisKeys.legacyBucketFieldPrefix)
 *   are moved into the packed fields, keeping the later TAT of a window that
 *   both have, and deleted with the old sweep field;
 * - the sweep time is written.
 * Its writes happen whatever the decision, so a refused decision does not
 * scan again. Sets kb and ab, this key's and the account's buckets, for the
 * decision that follows: nothing of an old bucket is lost.
 */
function luaSweep(): string {
  const legacy = luaText(redisKeys.legacyBucketFieldPrefix());
  const packedKey = luaText(redisKeys.keyBucketFieldPrefix());
  return `local all = redis.call('HGETALL', KEYS[1])
  local live, present, moved, stale = {}, {}, {}, {}
  local function keep(field, w, t)
    local m = live[field]
    if not m then m = {}; live[field] = m end
    if t > now and (not m[w] or m[w] < t) then m[w] = t end
  end
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    local p = string.sub(f, 1, 3)
    if p == ${packedKey} or f == ${luaText(redisKeys.accountBucketField())} then
      present[f] = true
      if not live[f] then live[f] = {} end
      for w, t in pairs(parse_buckets(v, {})) do keep(f, w, t) end
    elseif p == ${legacy} then
      stale[#stale + 1] = f
      local id, w = string.match(f, '^${redisKeys.legacyKeyBucketFieldPrefix('(.+)')}(%d+)$')
      local to = id and ${packedKey} .. id
      if not id then
        w = string.match(f, '^${redisKeys.legacyAccountBucketFieldPrefix()}(%d+)$')
        to = w and ${luaText(redisKeys.accountBucketField())}
      end
      local t = tonumber(v)
      if to and t and t > now then keep(to, tonumber(w), t); moved[to] = true end
    elseif f == ${luaText(redisKeys.legacyBucketSweepField())} then
      stale[#stale + 1] = f
    end
  end
  local sweep_writes = {${luaText(redisKeys.bucketSweepField())}, string.format('%d', now + ${BUCKET_SWEEP_INTERVAL_US})}
  for f, m in pairs(live) do
    if next(m) == nil then
      if present[f] then stale[#stale + 1] = f end
    elseif moved[f] then
      sweep_writes[#sweep_writes + 1] = f
      sweep_writes[#sweep_writes + 1] = format_buckets({}, m)
    end
  end
  if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
  redis.call('HSET', KEYS[1], unpack(sweep_writes))
  kb, ab = live[kf] or {}, live[${luaText(redisKeys.accountBucketField())}] or {}`;
}

/**
 * Lua: the key's restrictions (issue 38), after the status checks and before anything that consumes or holds. Check
 * decides them from the texts it cached (src/check/restrictions-cache.ts) and sends those texts and its verdict as the
 * last three ARGV (key text, account text, refused kind; '' for none): texts other than the records' (k[9], and the
 * account's field at \`at\`) are answered with the current ones, so Check decides again; a verdict on current texts
 * refuses here, where the status is known. No command of its own: both fields come with the HMGETs.
 */
const LUA_RESTRICTIONS = (at: number): string => `local rk, ra = k[9] or '', a[${at}] or ''
if rk ~= ARGV[#ARGV - 2] or ra ~= ARGV[#ARGV - 1] then return {'restrictions_changed', prefix, rk, ra} end
if ARGV[#ARGV] ~= '' then return {'restricted', prefix} end`;

/**
 * The generated script. Two paths after the reads and the status and
 * billing checks: a straight-line one for the common case (no limit
 * overrides in either record, the stored buckets holding exactly the plan's
 * windows, the sweep not due: the plan's limits, all literals, no tables or
 * closures), and a table-driven one for the rest (overrides, buckets of
 * other windows, the sweep). Both compute exactly what gcraStep() in
 * src/limits/gcra.ts does.
 */
function authorizeLua(plan: RatePlan, budgets: TokenBudgetPlan): string {
  // The account HMGET: 6 fixed fields, the token bucket field of each scope the plan has budgets in, then the
  // account's and the key's rate-limit buckets.
  const tokenFields = [
    ...(budgets.key.length > 0 ? [{ scope: 'key' as const, field: keyField(redisKeys.keyTokenBucketField) }] : []),
    ...(budgets.account.length > 0 ? [{ scope: 'account' as const, field: luaText(redisKeys.accountTokenBucketField()) }] : []),
  ].map((entry, i) => ({ at: 7 + i, ...entry }));
  const accountBucketsAt = 7 + tokenFields.length;
  const keyBucketsAt = accountBucketsAt + 1;
  const accountFields = `'status', 'creditBalance', 'limits', ${luaText(redisKeys.bucketSweepField())}, ${luaText(redisKeys.tokenBudgetsField())}, ${luaText(redisKeys.monthlySpendCapField())}${tokenFields.map(({ field }) => `, ${field}`).join('')}, ${luaText(redisKeys.accountBucketField())}, kf, ${luaText(redisKeys.restrictionsField())}`;
  const accountRestrictionsAt = keyBucketsAt + 1;
  const tokenBudgetCheck = luaTokenBudgetCheck(budgets, {
    key: tokenFields.find(({ scope }) => scope === 'key')?.at ?? 0,
    account: tokenFields.find(({ scope }) => scope === 'account')?.at ?? 0,
  });
  const limits: PlanLimit[] = [
    ...plan.key.map((limit) => ({ limit, scope: 'key' as const })),
    ...plan.account.map((limit) => ({ limit, scope: 'account' as const })),
  ].map(({ limit, scope }) => {
    if (!Number.isSafeInteger(limit.limit) || !Number.isSafeInteger(limit.windowSeconds)) throw new Error('limits are whole numbers');
    return {
      scope,
      limit: limit.limit,
      windowSeconds: limit.windowSeconds,
      windowUs: limit.windowSeconds * 1_000_000,
      intervalUs: emissionIntervalUs(limit),
    };
  });
  // Each scope's limits with their numbers in `limits` (tat<n>), and its bucket field as a Lua expression.
  const scopes = [
    {
      field: 'kf',
      at: keyBucketsAt,
      numbered: limits.map((limit, i) => ({ limit, n: i + 1 })).filter(({ limit }) => limit.scope === 'key'),
    },
    {
      field: luaText(redisKeys.accountBucketField()),
      at: accountBucketsAt,
      numbered: limits.map((limit, i) => ({ limit, n: i + 1 })).filter(({ limit }) => limit.scope === 'account'),
    },
  ].filter((scope) => scope.numbered.length > 0);
  // `<I4dI4d`: the struct format of n packed entries.
  const packedStruct = (n: number) => `${BUCKET_STRUCT}${BUCKET_STRUCT.slice(1).repeat(n - 1)}`;
  const planTable = (of: readonly RateLimit[]) =>
    `{${of.map((limit) => `{limit = ${limit.limit}, windowSeconds = ${limit.windowSeconds}}`).join(', ')}}`;
  const numbered = (template: (limit: PlanLimit, n: number) => string) => limits.map((limit, i) => template(limit, i + 1)).join('');
  return `
local floor, ceil = math.floor, math.ceil
local now = tonumber(ARGV[2])
if not now then return redis.error_reply('authorize: ARGV[2] must be the decision time in µs on the Redis clock') end
local k = redis.call('HMGET', KEYS[2], 'status', 'expiresAtMs', 'limits', 'prefix', 'environment', 'revokeAtMs', ${luaText(redisKeys.tokenBudgetsField())}, ${luaText(redisKeys.monthlySpendCapField())}, ${luaText(redisKeys.restrictionsField())})
if not k[1] then return {'unknown_key'} end
local kf = ${keyField(redisKeys.keyBucketField)}
local a = redis.call('HMGET', KEYS[1], ${accountFields})
if not a[1] then return {'unknown_key'} end
local prefix = k[4]
if k[1] == 'revoked' or (k[6] and k[6] * 1000 <= now) then return {'key_revoked', prefix} end
if k[2] and k[2] * 1000 <= now then return {'key_expired', prefix} end
if a[1] == 'suspended' then return {'account_suspended', prefix} end
${LUA_RESTRICTIONS(accountRestrictionsAt)}
${luaHeldSums(budgets)}
if a[2] and (tonumber(a[2]) <= 0 or tonumber(a[2]) - held_am < hold_m) then return {'credit_exhausted', prefix} end
${luaSpendCaps()}
local b_scope, b_tokens, b_window, b_remaining, b_reset
local swept = a[4] and tonumber(a[4])
swept = swept and swept > now
if swept and not k[3] and not a[3] then
  local plain = true
${
  limits.length > 0 ? `  local ${limits.map((_, i) => `tat${i + 1}`).join(', ')} = ${limits.map(() => 'now').join(', ')}\n  local v\n` : ''
}${scopes
    .map(
      (scope) => `  v = a[${scope.at}]
  if v then
    local ${scope.numbered.map(({ n }) => `w${n}, t${n}`).join(', ')}
    if #v == ${BUCKET_BYTES * scope.numbered.length} then ${scope.numbered.map(({ n }) => `w${n}, t${n}`).join(', ')} = struct.unpack('${packedStruct(scope.numbered.length)}', v) end
    if ${scope.numbered.map(({ limit, n }) => `w${n} == ${limit.windowSeconds}`).join(' and ')} then
${scope.numbered
  .map(
    ({ n }) => `      if t${n} > now then tat${n} = t${n} end
`,
  )
  .join('')}    else
      plain = false
    end
  end
`,
    )
    .join('')}  if plain then
${
  limits.length === 0
    ? `${indent(indent(tokenBudgetCheck))}
${indent(indent(LUA_PLACE_HOLD))}
    if #hw > 0 then redis.call('HSET', KEYS[1], unpack(hw)) end
    if b_remaining then return {'allow', prefix, k[5], 'tokens', b_scope, b_tokens, b_window, b_remaining, b_reset} end
    return {'allow', prefix, k[5]}
`
    : `    local r_retry, r_n, retry
${numbered(
  (limit, n) => `    retry = tat${n}${plus(limit.intervalUs - limit.windowUs)} - now
    if retry > 0 then
      retry = ceil(retry / 1000)
      if not r_retry or retry > r_retry then r_retry, r_n = retry, ${n} end
    end
`,
)}    if r_retry then
      local r = ({${limits.map((limit, i) => `{'${limit.scope}', ${limit.limit}, ${limit.windowSeconds}, tat${i + 1}}`).join(', ')}})[r_n]
      return {'rate_limited', prefix, r[1], r[2], r[3], 0, ceil((r[4] - now) / 1000), r_retry}
    end
${indent(indent(tokenBudgetCheck))}
${indent(indent(LUA_PLACE_HOLD))}
    local pack = struct.pack
    redis.call('HSET', KEYS[1]${scopes
      .map(
        (scope) =>
          `, ${scope.field}, pack('${packedStruct(scope.numbered.length)}', ${scope.numbered.map(({ limit, n }) => `${limit.windowSeconds}, tat${n} + ${limit.intervalUs}`).join(', ')})`,
      )
      .join('')}, unpack(hw))
    local t_scope, t_limit, t_window, t_remaining, t_new = '${limits[0]!.scope}', ${limits[0]!.limit}, ${limits[0]!.windowSeconds}, floor((now - tat1${plus(limits[0]!.windowUs - limits[0]!.intervalUs)}) / ${limits[0]!.intervalUs}), tat1 + ${limits[0]!.intervalUs}
    local remaining
${limits
  .slice(1)
  .map(
    (limit, i) => `    remaining = floor((now - tat${i + 2}${plus(limit.windowUs - limit.intervalUs)}) / ${limit.intervalUs})
    if remaining < t_remaining then t_scope, t_limit, t_window, t_remaining, t_new = '${limit.scope}', ${limit.limit}, ${limit.windowSeconds}, remaining, tat${i + 2} + ${limit.intervalUs} end
`,
  )
  .join(
    '',
  )}    if b_remaining then return {'allow', prefix, k[5], t_scope, t_limit, t_window, t_remaining, ceil((t_new - now) / 1000), 'tokens', b_scope, b_tokens, b_window, b_remaining, b_reset} end
    return {'allow', prefix, k[5], t_scope, t_limit, t_window, t_remaining, ceil((t_new - now) / 1000)}
`
}  end
end
${LUA_BUCKETS.trim()}
local kb, ab
if swept then
  kb, ab = parse_buckets(a[${keyBucketsAt}], {}), parse_buckets(a[${accountBucketsAt}], {})
else
  ${luaSweep()}
end
local t_scope, t_limit, t_window, t_remaining, t_reset
local r_scope, r_limit, r_window, r_reset, r_retry
local function step(scope, stored, l)
  local window_us = l.windowSeconds * 1000000
  local interval = floor(window_us / l.limit)
  if interval < 1 then interval = 1 end
  local tat = now
  if stored and stored > now then tat = stored end
  local new_tat = tat + interval
  local allow_at = new_tat - window_us
  if now < allow_at then
    local retry = ceil((allow_at - now) / 1000)
    if not r_retry or retry > r_retry then
      r_scope, r_limit, r_window, r_reset, r_retry = scope, l.limit, l.windowSeconds, ceil((tat - now) / 1000), retry
    end
  elseif not r_retry then
    local remaining = floor((window_us - (new_tat - now)) / interval)
    if not t_remaining or remaining < t_remaining then
      t_scope, t_limit, t_window, t_remaining, t_reset = scope, l.limit, l.windowSeconds, remaining, ceil((new_tat - now) / 1000)
    end
  end
  return new_tat
end
local overrides = a[3] and cjson.decode(a[3]) or {}
local kl = (k[3] and cjson.decode(k[3])) or overrides.key or ${planTable(plan.key)}
local al = overrides.account or ${planTable(plan.account)}
local k_new, a_new = {}, {}
for i, l in ipairs(kl) do k_new[i] = {l.windowSeconds, step('key', kb[l.windowSeconds], l)}; kb[l.windowSeconds] = nil end
for i, l in ipairs(al) do a_new[i] = {l.windowSeconds, step('account', ab[l.windowSeconds], l)}; ab[l.windowSeconds] = nil end
if r_retry then return {'rate_limited', prefix, r_scope, r_limit, r_window, 0, r_reset, r_retry} end
${tokenBudgetCheck}
-- The windows in force first, then those of other windows still ahead of now (a stale one is as good as absent).
for _, m in ipairs({kb, ab}) do
  for w, t in pairs(m) do if t <= now then m[w] = nil end end
end
${LUA_PLACE_HOLD}
local writes = hw
if #k_new > 0 then writes[#writes + 1] = kf; writes[#writes + 1] = format_buckets(k_new, kb) end
if #a_new > 0 then
  writes[#writes + 1] = ${luaText(redisKeys.accountBucketField())}
  writes[#writes + 1] = format_buckets(a_new, ab)
end
if #writes > 0 then redis.call('HSET', KEYS[1], unpack(writes)) end
if t_remaining then
  if b_remaining then return {'allow', prefix, k[5], t_scope, t_limit, t_window, t_remaining, t_reset, 'tokens', b_scope, b_tokens, b_window, b_remaining, b_reset} end
  return {'allow', prefix, k[5], t_scope, t_limit, t_window, t_remaining, t_reset}
end
if b_remaining then return {'allow', prefix, k[5], 'tokens', b_scope, b_tokens, b_window, b_remaining, b_reset} end
return {'allow', prefix, k[5]}`;
}

/**
 * Lua: the sums of holds in flight (src/domain/credit-holds.ts, layout in
 * redisKeys.holds), after the status checks, given `now`, `k`, `a`: into
 * held_am, held_at (the account's money and tokens), held_km, held_kt (this
 * key's), and hold_m, hold_t (what this request holds if allowed: money only
 * on an account with a balance or a cap, tokens only with a token budget),
 * key_m, key_t (what of it counts for the key: only where the key has a cap
 * or the plan or an override may give it budgets), all 0 when the request
 * brings no hold (ARGV[3..6]: minor units, tokens, request id, deadline;
 * KEYS[3] the holds hash) or the account holds nothing. Only such an account
 * pays anything: one HMGET of the sums, the key's only where they count.
 * Once the earliest hold's deadline has passed (prune_at), lapsed holds are
 * released first (their answers never came) with one HGETALL of the holds,
 * which also finds the next earliest deadline: at most once per hold
 * lifetime while holds are in flight, as metering releases the others
 * without moving prune_at.
 */
function luaHeldSums(budgets: TokenBudgetPlan): string {
  const pruneAt = luaText(redisKeys.holdPruneAtField());
  const accountSums = `${luaText(redisKeys.heldMinorUnitsField())}, ${luaText(redisKeys.heldTokensField())}, ${pruneAt}`;
  const keySums = `${keyField(redisKeys.keyHeldMinorUnitsField)}, ${keyField(redisKeys.keyHeldTokensField)}`;
  const readSums = `if key_m > 0 or key_t > 0 then h = redis.call('HMGET', KEYS[1], ${accountSums}, ${keySums})
else h = redis.call('HMGET', KEYS[1], ${accountSums}) end`;
  const anyBudgets = budgets.key.length + budgets.account.length > 0 ? 'true' : 'k[7] or a[5]';
  const keyBudgets = budgets.key.length > 0 ? 'true' : 'k[7] or a[5]';
  return `local hold_m, hold_t, key_m, key_t, held_am, held_at, held_km, held_kt, holding, prune_at = 0, 0, 0, 0, 0, 0, 0, 0, false, nil
if ARGV[6] then
  local money, tokens = a[2] or k[8] or a[6], ${anyBudgets}
  if money or tokens then
    holding = true
    if money then hold_m = tonumber(ARGV[3]) end
    if tokens then hold_t = tonumber(ARGV[4]) end
    if k[8] then key_m = hold_m end
    if ${keyBudgets} then key_t = hold_t end
    local h
${indent(indent(readSums))}
    prune_at = tonumber(h[3])
    if prune_at and prune_at <= now then
      local all, lapsed, taken = redis.call('HGETALL', KEYS[3]), {}, {}
      prune_at = nil
      for i = 1, #all, 2 do
        local deadline, id, m, t, km, kt = string.match(all[i + 1], '^(%d+) (%S+) (%d+) (%d+) (%d+) (%d+)$')
        deadline = tonumber(deadline)
        if not deadline or deadline <= now then
          lapsed[#lapsed + 1] = all[i]
          if id then
            for f, n in pairs({[${luaText(redisKeys.heldMinorUnitsField())}] = m, [${luaText(redisKeys.heldTokensField())}] = t, [${keyField(redisKeys.keyHeldMinorUnitsField, 'id')}] = km, [${keyField(redisKeys.keyHeldTokensField, 'id')}] = kt}) do
              taken[f] = (taken[f] or 0) + tonumber(n)
            end
          end
        elseif not prune_at or deadline < prune_at then
          prune_at = deadline
        end
      end
      if #lapsed > 0 then redis.call('HDEL', KEYS[3], unpack(lapsed)) end
      local emptied = {}
      for f, n in pairs(taken) do
        if n > 0 and redis.call('HINCRBY', KEYS[1], f, string.format('%.0f', -n)) <= 0 then emptied[#emptied + 1] = f end
      end
      if #emptied > 0 then redis.call('HDEL', KEYS[1], unpack(emptied)) end
      if prune_at then redis.call('HSET', KEYS[1], ${pruneAt}, string.format('%.0f', prune_at))
      else redis.call('HDEL', KEYS[1], ${pruneAt}) end
${indent(indent(indent(readSums)))}
    end
    held_am, held_at, held_km, held_kt = tonumber(h[1]) or 0, tonumber(h[2]) or 0, tonumber(h[4]) or 0, tonumber(h[5]) or 0
  end
end`;
}

/**
 * Lua: an allowed decision places its hold, into `hw` (account hash fields
 * and values to write, empty when none): the request id joins the holds
 * hash with its deadline and amounts (HSETNX: a repeated Check of the same
 * request id holds once; its first hold was already counted in the sums it
 * was judged against), and the sums it adds to go into the account hash
 * with the decision's other writes.
 */
const LUA_PLACE_HOLD = `local hw = {}
-- The amounts as ARGV wrote them: a Lua number may print with an exponent.
if holding and redis.call('HSETNX', KEYS[3], ARGV[5], ARGV[6] .. ' ' .. ARGV[1] .. ' ' .. (hold_m > 0 and ARGV[3] or '0') .. ' ' ..
    (hold_t > 0 and ARGV[4] or '0') .. ' ' .. (key_m > 0 and ARGV[3] or '0') .. ' ' .. (key_t > 0 and ARGV[4] or '0')) == 1 then
  local fmt = string.format
  if not prune_at then hw[1] = ${luaText(redisKeys.holdPruneAtField())}; hw[2] = ARGV[6] end
  if hold_m > 0 then hw[#hw + 1] = ${luaText(redisKeys.heldMinorUnitsField())}; hw[#hw + 1] = fmt('%.0f', held_am + hold_m) end
  if hold_t > 0 then hw[#hw + 1] = ${luaText(redisKeys.heldTokensField())}; hw[#hw + 1] = fmt('%.0f', held_at + hold_t) end
  if key_m > 0 then hw[#hw + 1] = ${keyField(redisKeys.keyHeldMinorUnitsField)}; hw[#hw + 1] = fmt('%.0f', held_km + key_m) end
  if key_t > 0 then hw[#hw + 1] = ${keyField(redisKeys.keyHeldTokensField)}; hw[#hw + 1] = fmt('%.0f', held_kt + key_t) end
end`;

function indent(lua: string): string {
  return lua.replace(/^(?=.)/gm, '  ');
}

/**
 * Lua: the monthly spend caps, after billing, given `now`, `k` and `a`
 * (caps in k[8] and a[6]). The month's spend fields are named by the month
 * (redisKeys.accountSpendField, keySpendField), so the script names it from
 * its own clock, the one every decision of every replica uses (Redis's
 * clock as RedisClock carries it, or the tests' override): a decision at 00:00:00.001 on the 1st (UTC)
 * reads the new month everywhere at once. gwaApplyUsage counts a record in
 * the month the answer ended (usageMonthOf(record.atMs)), the same UTC
 * calendar. Only an account or key with a cap pays for it: the civil date
 * (as LUA_ISO_8601) and one more HMGET. The key's spend field is named
 * from its id, ARGV[1]. The holds in flight (luaHeldSums) and this
 * request's count as spent: the cap must cover them all.
 */
function luaSpendCaps(): string {
  return `if k[8] or a[6] then
  local z = floor(now / 86400000000) + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400
  if month <= 2 then year = year + 1 end
  month = string.format('%04d-%02d', year, month)
  local spent = redis.call('HMGET', KEYS[1], ${luaText(redisKeys.accountSpendField(''))} .. month, ${keyField((keyId) => redisKeys.keySpendField(keyId, ''))} .. month)
  local key_spent, account_spent = tonumber(spent[2]) or 0, tonumber(spent[1]) or 0
  if k[8] and (key_spent >= tonumber(k[8]) or key_spent + held_km + hold_m > tonumber(k[8])) then return {'budget_exceeded', prefix, 'key', k[8]} end
  if a[6] and (account_spent >= tonumber(a[6]) or account_spent + held_am + hold_m > tonumber(a[6])) then return {'budget_exceeded', prefix, 'account', a[6]} end
end`;
}

/**
 * Lua statements: one budget checked against its bucket, a TAT and a
 * fraction (Lua expressions, the TAT nil for no bucket), given `now`:
 * refused (x_*) when not one whole token is available, or none is left
 * after the tokens `held` by answers in flight (a Lua expression; no time
 * to wait for then but theirs: retry 0), keeping the budget that keeps the
 * caller waiting longest; otherwise b_* becomes
 * this budget if it has the fewest tokens left so far (the first on a tie).
 * Scope, tokens and window are literals (the plan's budgets, with what
 * follows from them computed when the script is generated) or names (the
 * overrides, read when it runs).
 */
function luaBudgetCheck(
  scope: string,
  tokens: LuaValue,
  windowSeconds: LuaValue,
  bucketTat: string,
  bucketFraction: string,
  held: string,
): string {
  const windowUs = luaWindowUs(windowSeconds);
  const literal = typeof tokens === 'number' && typeof windowUs === 'number';
  // Until one whole token is back: the debt down to tokens - 1 tokens' worth, (d + fraction/tokens) - (W - W/tokens) µs,
  // with W/tokens = q + r/tokens.
  const [q, r] = literal ? [Math.floor(windowUs / tokens), windowUs % tokens] : ['q', 'r'];
  return `local tat, fraction = ${bucketTat}, ${bucketFraction}
if tat and tat >= now then
  if fraction >= ${tokens} then fraction = 0 end
  local d, f1 = tat - now, 0
  if fraction > 0 then f1 = 1 end
  local reset, remaining = floor((d + 999 + f1) / 1000), 0
  if d < ${windowUs} then
    local u
${indent(indent(luaUnrefilled('u', 'd', 'fraction', tokens, windowSeconds)))}
    remaining = ${tokens} - u
  end
  if remaining == 0 then
${
  literal
    ? ''
    : `    local q, r = divmod(${windowUs}, ${tokens})
`
}    local us, part = d - ${windowUs} + ${q}, fraction + ${r}
    if part > ${tokens} then us = us + 2 elseif part > 0 then us = us + 1 end
    local retry = floor((us + 999) / 1000)
    if not x_retry or retry > x_retry then x_scope, x_tokens, x_window, x_reset, x_retry = ${scope}, ${tokens}, ${windowSeconds}, reset, retry end
  elseif remaining <= ${held} then
    if not x_retry then x_scope, x_tokens, x_window, x_reset, x_retry = ${scope}, ${tokens}, ${windowSeconds}, reset, 0 end
  elseif not b_remaining or remaining < b_remaining then
    b_scope, b_tokens, b_window, b_remaining, b_reset = ${scope}, ${tokens}, ${windowSeconds}, remaining, reset
  end
elseif ${tokens} <= ${held} then
  if not x_retry then x_scope, x_tokens, x_window, x_reset, x_retry = ${scope}, ${tokens}, ${windowSeconds}, 0, 0 end
elseif not b_remaining or ${tokens} < b_remaining then
  b_scope, b_tokens, b_window, b_remaining, b_reset = ${scope}, ${tokens}, ${windowSeconds}, ${tokens}, 0
end`;
}

/**
 * Lua: the token budgets, after the request rate limits and before their
 * writes, given `now`, `k`, `a` and `prefix`; mirrors tokenBudgetState()
 * in src/limits/token-budget.ts (to the ms: the property test holds them
 * equal). Refuses with the exhausted budget that keeps the caller waiting
 * longest; otherwise sets b_* to the budget with the fewest tokens left, for
 * the token rate-limit headers. Reads only: usage consumes the buckets
 * (gwaApplyUsage). The packed bucket field of each scope the plan has
 * budgets in comes with the account HMGET (a[fieldAt.key],
 * a[fieldAt.account]), unpacked with one struct.unpack when it holds exactly
 * the plan's windows in order (as the usage script writes them); an override
 * in either record (k[7], a[5]) reads both fields with one more HMGET. A plan
 * without budgets skips all of it unless a record has one. The plan's
 * budgets are checked in straight-line code, one block each with its numbers
 * as literals: no function or table is made (the helpers' closures, calls
 * and arithmetic on names were 14 % of what Redis ran per decision with four
 * budgets and none spent, and a third of what the budgets cost with all four
 * spent: test/bench/redis-callgrind.ts). Overrides go through the helpers.
 * The key's token bucket field is named from its id, ARGV[1].
 */
function luaTokenBudgetCheck(budgets: TokenBudgetPlan, fieldAt: Record<LimitScope, number>): string {
  const all = [
    ...budgets.key.map((budget) => ({ scope: 'key', ...budget })),
    ...budgets.account.map((budget) => ({ scope: 'account', ...budget })),
  ];
  for (const budget of all) {
    // The arithmetic is exact in doubles within these bounds only (see LUA_TOKEN_BUDGET).
    if (
      !Number.isSafeInteger(budget.tokens) ||
      !Number.isSafeInteger(budget.windowSeconds) ||
      budget.tokens < 1 ||
      budget.tokens > MAX_BUDGET_TOKENS ||
      budget.windowSeconds < 1 ||
      budget.windowSeconds > MAX_WINDOW_SECONDS
    ) {
      throw new Error(`token budgets are 1 to ${MAX_BUDGET_TOKENS} tokens over 1 s to ${MAX_WINDOW_SECONDS} s`);
    }
  }
  const planTable = (of: readonly TokenBudget[]) =>
    `{${of.map((budget) => `{tokens = ${budget.tokens}, windowSeconds = ${budget.windowSeconds}}`).join(', ')}}`;
  const refusal = `if x_retry then return {'token_budget_exhausted', prefix, x_scope, x_tokens, x_window, 0, x_reset, x_retry} end`;
  const overrides = `${LUA_DIVMOD.trim()}
local x_scope, x_tokens, x_window, x_reset, x_retry
local function check(scope, tokens, window_s, bucket)
  local window_us = window_s * 1000000
${indent(luaBudgetCheck('scope', 'tokens', 'window_s', 'bucket[1]', 'bucket[2]', "(scope == 'key' and held_kt or held_at)"))}
end
local o = a[5] and cjson.decode(a[5]) or {}
local kl = (k[7] and cjson.decode(k[7])) or o.key or ${planTable(budgets.key)}
local al = o.account or ${planTable(budgets.account)}
if #kl + #al > 0 then
${indent(LUA_TOKEN_BUCKETS_OF.trim())}
  local stored = redis.call('HMGET', KEYS[1], ${keyField(redisKeys.keyTokenBucketField)}, ${luaText(redisKeys.accountTokenBucketField())})
  local tk, ta = token_buckets_of(stored[1]), token_buckets_of(stored[2])
  for _, b in ipairs(kl) do check('key', b.tokens, b.windowSeconds, tk[b.windowSeconds] or {}) end
  for _, b in ipairs(al) do check('account', b.tokens, b.windowSeconds, ta[b.windowSeconds] or {}) end
end
${refusal}`;
  if (all.length === 0)
    return `if k[7] or a[5] then
${indent(overrides)}
end`;
  const numbered = all.map((budget, i) => ({ n: i + 1, ...budget }));
  // Each scope's packed field into bt<n>, bf<n> (TAT, fraction; nil for no bucket): one struct.unpack when the field
  // holds exactly the plan's windows in order, as the usage script writes them; else each entry looked up.
  const unpacked = (['key', 'account'] as const).flatMap((scope) => {
    const own = numbered.filter((budget) => budget.scope === scope);
    if (own.length === 0) return [];
    const names = own.map(({ n }) => `bt${n}, bf${n}`).join(', ');
    const struct = `${TOKEN_BUCKET_STRUCT}${TOKEN_BUCKET_STRUCT.slice(1).repeat(own.length - 1)}`;
    const unpack = `local v = a[${fieldAt[scope]}]
if v then
  local ${own.map(({ n }) => `w${n}`).join(', ')}
  if #v == ${TOKEN_BUCKET_BYTES * own.length} then ${own.map(({ n }) => `w${n}, bt${n}, bf${n}`).join(', ')} = struct.unpack('${struct}', v) end
  if not (${own.map(({ n, windowSeconds }) => `w${n} == ${windowSeconds}`).join(' and ')}) then
    ${names} = ${own.map(() => 'nil, nil').join(', ')}
    for at = 1, #v - ${TOKEN_BUCKET_BYTES - 1}, ${TOKEN_BUCKET_BYTES} do
      local w, t, f = struct.unpack('${TOKEN_BUCKET_STRUCT}', v, at)
      ${own.map(({ n, windowSeconds }) => `if w == ${windowSeconds} then bt${n}, bf${n} = t, f`).join(' else')} end
    end
  end
end`;
    return [`do\n${indent(unpack)}\nend`];
  });
  const plan = numbered.map(
    (budget) => `do
${indent(luaBudgetCheck(`'${budget.scope}'`, budget.tokens, budget.windowSeconds, `bt${budget.n}`, `bf${budget.n}`, budget.scope === 'key' ? 'held_kt' : 'held_at'))}
end`,
  );
  return `if not k[7] and not a[5] then
  local x_scope, x_tokens, x_window, x_reset, x_retry
  local ${numbered.map(({ n }) => `bt${n}, bf${n}`).join(', ')}
${indent(unpacked.join('\n'))}
${indent(plan.join('\n'))}
  ${refusal}
else
${indent(overrides)}
end`;
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

/** A token budget's state: the fields of limitState, the limit named `tokens`. */
function budgetState(reply: readonly unknown[], at: number, retryAfterMs: number): TokenBudgetState {
  const { scope, limit, windowSeconds, remaining, resetMs } = limitState(reply, at);
  return { scope, tokens: limit, windowSeconds, remaining, resetMs, retryAfterMs };
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
    case 'restricted':
      return { kind, prefix };
    case 'restrictions_changed':
      return { kind, prefix, keyText: String(reply[2] ?? ''), accountText: String(reply[3] ?? '') };
    case 'rate_limited':
      return { kind, prefix, hit: limitHit(limitState(reply, 2), replyNumber(reply[7])) };
    case 'budget_exceeded': {
      const scope: unknown = reply[2];
      if (scope !== 'key' && scope !== 'account') throw new StoreUnavailableError(`unexpected cap scope from Redis: ${String(scope)}`);
      return { kind, prefix, scope, cap: replyNumber(reply[3]) };
    }
    case 'token_budget_exhausted':
      return { kind, prefix, budget: budgetState(reply, 2, replyNumber(reply[7])) };
    case 'allow': {
      const environment = reply[2] as KeyEnvironment;
      // After the environment: the tightest limit (starting with its scope), then 'tokens' and the tightest budget; each optional.
      const tokensAt = reply.indexOf('tokens', 3);
      const tightest = reply.length > 3 && tokensAt !== 3 ? { tightest: limitState(reply, 3) } : {};
      const tightestBudget = tokensAt > 0 ? { tightestBudget: budgetState(reply, tokensAt + 1, 0) } : {};
      return { kind, prefix, environment, ...tightest, ...tightestBudget };
    }
    default:
      throw new StoreUnavailableError(`unexpected authorize reply from Redis: ${String(kind)}`);
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
    case 'wrong_type':
      // Nothing was written: the stream key holds something else, and the record waits until it is repaired.
      throw new CorruptRecordError('usage stream', `${String(second)} is a ${String(third)}, not a stream`);
    default:
      throw new StoreUnavailableError(`unexpected usage reply from Redis: ${String(kind)}`);
  }
}
