import { createHash } from 'node:crypto';
import type { LimitScope, RateLimit, RatePlan } from '../../accounts/limits/rate-limits';
import { MAX_BUDGET_TOKENS, type TokenBudget, type TokenBudgetPlan } from '../../accounts/limits/token-budgets';
import { emissionIntervalUs } from '../../accounts/limits/gcra';
import { MAX_WINDOW_SECONDS } from '../../accounts/limits/rate-limit';
import { composeLua } from './lua-source';
import {
  PACKED_BUCKET_BYTES as BUCKET_BYTES,
  PACKED_BUCKET_STRUCT as BUCKET_STRUCT,
  PACKED_TOKEN_BUCKET_BYTES as TOKEN_BUCKET_BYTES,
  PACKED_TOKEN_BUCKET_STRUCT as TOKEN_BUCKET_STRUCT,
} from './redis-records';
import { redisKeys } from './redis-keys';

/*
 * The one Lua script the store generates rather than reads from lua/: the
 * authorize script, written for the default plan. Every other script, and
 * the helpers this one shares (lua/lib/buckets.lua, divmod.lua,
 * token-buckets-of.lua), are static files. Measured under callgrind
 * (test/bench/redis-callgrind.ts; docs/design/redis-path.md), a static
 * authorize script taking the plan in its argument cost Redis 45 % more
 * instructions per decision with the bench's plan, and 72 % more with its
 * four token budgets: decoding the plan's numbers from text on every
 * decision (cjson, or tonumber per number: 1,200 to 2,400 instructions
 * each) and reading them from a table in loops cost more than the whole
 * decision does with them as literals in straight-line code. So the plan's
 * limits and budgets stay literals, and the script is generated once per
 * frozen plan. tools/lint-lua.js runs luacheck over it for a set of plans.
 */

/** The lua/ helpers the generated script includes, for the lint (each helper must be checked somewhere). */
export const AUTHORIZE_SCRIPT_HELPERS = [
  'lib/buckets.lua',
  'lib/divmod.lua',
  'lib/token-buckets-of.lua',
  'authorize/held-sums.lua',
  'authorize/spend-caps.lua',
  'authorize/place-hold.lua',
  'authorize/bucket-sweep.lua',
] as const;

/** A helper's text, without its last newline (it is spliced into generated lines). */
function luaFile(file: (typeof AUTHORIZE_SCRIPT_HELPERS)[number]): string {
  return composeLua(file).text.trimEnd();
}

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
  const whole = `local x, m = ${d} * ${tokens} + ${fraction}
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
 * Lua, for a test only: tb_unrefilled(debt_us, fraction, tokens, window_s),
 * the tokens not yet wholly refilled as the Check computes them for a
 * budget read from a record (luaBudgetCheck with names), after LUA_TOKEN_BUDGET,
 * so the test can hold that arithmetic to the BigInt one at its bounds.
 */
export const LUA_TOKEN_UNREFILLED_FOR_TEST = `
local floor = math.floor
local function tb_unrefilled(debt_us, fraction, tokens, window_s)
  local u, window_us = 0, window_s * 1000000
${indent(luaUnrefilled('u', 'debt_us', 'fraction', 'tokens', 'window_s'))}
  return u
end`;

/**
 * The authorize script for one default plan. The whole decision for a known
 * key in one round trip; it mirrors authorizeAccountState() in
 * src/accounts/limits/authorize-account-state.ts (the in-memory store runs that), and
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
 * an hour a decision deletes the fields with none
 * ahead (buckets of rotated or revoked keys, of windows no longer in use),
 * so the hash does not grow without bound (lua/authorize/bucket-sweep.lua).
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
 * (lua/authorize/spend-caps.lua, luaTokenBudgetCheck): the default plan's budgets are
 * literals whose buckets come with the account HMGET, so they add no
 * command; a cap, or a budget override in either record, one more HMGET.
 *
 * KEYS: the account, the key record (every field the decision reads is in
 * one of them). ARGV: the key id, of which the script names the key's
 * fields (its bucket, token buckets and spend), then the decision time in
 * µs on Redis's clock (RedisClock; in tests, their clock).
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
 * Lua: the key's restrictions (docs/concepts/key-restrictions.md), after the status checks and before anything
 * that consumes or holds. Check decides them from the texts it cached (src/check/restrictions-cache.ts) and, for a
 * key it knows to be restricted, sends the texts' stamps and its verdict as ARGV[4..6] (key's stamp, account's
 * stamp, refused kind; each left out when it and those after it are '', and ARGV[3], the hold, then '' when there is
 * none). A key it believes unrestricted sends none of them, so the common Check pays for no argument. Stamps other
 * than the records' (k[9], and the account's field at `at`, written with the texts) are answered with the current
 * texts, read then (the only time they are), so Check decides again: a change reaches every replica on its next
 * request, as revocation does. A verdict on current stamps refuses here, where the status is known. Nothing more on
 * the common path: both stamps come with the HMGETs. An unrestricted key of an account without defaults (both
 * fields absent, no stamps sent), the common case, passes on one test rather than the comparison (measured in the
 * same document).
 */
function luaRestrictions(at: number): string {
  return `if k[9] or a[${at}] or ARGV[4] then
  if (k[9] or '') ~= (ARGV[4] or '') or (a[${at}] or '') ~= (ARGV[5] or '') then
    return {'restrictions_changed', prefix, redis.call('HGET', KEYS[2], ${luaText(redisKeys.restrictionsField())}) or '',
      redis.call('HGET', KEYS[1], ${luaText(redisKeys.restrictionsField())}) or ''}
  end
  if ARGV[6] then return {'restricted', prefix} end
end`;
}

/**
 * The generated script. Two paths after the reads and the status and
 * billing checks: a straight-line one for the common case (no limit
 * overrides in either record, the stored buckets holding exactly the plan's
 * windows, the sweep not due: the plan's limits, all literals, no tables or
 * closures), and a table-driven one for the rest (overrides, buckets of
 * other windows, the sweep). Both compute exactly what gcraStep() in
 * src/accounts/limits/gcra.ts does.
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
  const accountFields = `'status', 'creditBalance', 'limits', ${luaText(redisKeys.bucketSweepField())}, ${luaText(redisKeys.tokenBudgetsField())}, ${luaText(redisKeys.monthlySpendCapField())},\n  ${tokenFields.map(({ field }) => `${field}, `).join('')}${luaText(redisKeys.accountBucketField())}, kf, ${luaText(redisKeys.restrictionsStampField())}`;
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
local k = redis.call('HMGET', KEYS[2], 'status', 'expiresAtMs', 'limits', 'prefix', 'environment', 'revokeAtMs',
  ${luaText(redisKeys.tokenBudgetsField())}, ${luaText(redisKeys.monthlySpendCapField())}, ${luaText(redisKeys.restrictionsStampField())})
if not k[1] then return {'unknown_key'} end
local kf = ${keyField(redisKeys.keyBucketField)}
local a = redis.call('HMGET', KEYS[1], ${accountFields})
if not a[1] then return {'unknown_key'} end
local prefix = k[4]
if k[1] == 'revoked' or (k[6] and k[6] * 1000 <= now) then return {'key_revoked', prefix} end
if k[2] and k[2] * 1000 <= now then return {'key_expired', prefix} end
if a[1] == 'suspended' then return {'account_suspended', prefix} end
${luaRestrictions(accountRestrictionsAt)}
local plan_budgets, plan_key_budgets = ${budgets.key.length + budgets.account.length > 0}, ${budgets.key.length > 0}
${luaFile('authorize/held-sums.lua')}
if a[2] then
  -- One tonumber (a strtod each).
  local balance = tonumber(a[2])
  if balance <= 0 or balance - held_am < hold_m then return {'credit_exhausted', prefix} end
end
${luaFile('authorize/spend-caps.lua')}
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
${indent(indent(luaFile('authorize/place-hold.lua')))}
    if #hw > 0 then redis.call('HSET', KEYS[1], unpack(hw)) end
    if b_remaining then return {'allow', prefix, k[5], 'tokens', b_scope, b_tokens, b_window, b_remaining, b_reset} end
    return {'allow', prefix, k[5]}
`
    : `    local r_retry, r_n, wait_us
${numbered(
  (limit, n) => `    wait_us = tat${n}${plus(limit.intervalUs - limit.windowUs)} - now
    if wait_us > 0 then
${
  n === 1
    ? '      r_retry, r_n = ceil(wait_us / 1000), 1'
    : `      local retry = ceil(wait_us / 1000)
      if not r_retry or retry > r_retry then r_retry, r_n = retry, ${n} end`
}
    end
`,
)}    if r_retry then
      local r = ({${limits.map((limit, i) => `{'${limit.scope}', ${limit.limit}, ${limit.windowSeconds}, tat${i + 1}}`).join(', ')}})[r_n]
      return {'rate_limited', prefix, r[1], r[2], r[3], 0, ceil((r[4] - now) / 1000), r_retry}
    end
${indent(indent(tokenBudgetCheck))}
${indent(indent(luaFile('authorize/place-hold.lua')))}
    local pack = struct.pack
    redis.call('HSET', KEYS[1]${scopes
      .map(
        (scope) =>
          `,\n      ${scope.field}, pack('${packedStruct(scope.numbered.length)}', ${scope.numbered.map(({ limit, n }) => `${limit.windowSeconds}, tat${n} + ${limit.intervalUs}`).join(', ')})`,
      )
      .join('')},\n      unpack(hw))
    local t_scope, t_limit, t_window = '${limits[0]!.scope}', ${limits[0]!.limit}, ${limits[0]!.windowSeconds}
    local t_remaining, t_new = floor((now - tat1${plus(limits[0]!.windowUs - limits[0]!.intervalUs)}) / ${limits[0]!.intervalUs}), tat1 + ${limits[0]!.intervalUs}
    local remaining
${limits
  .slice(1)
  .map(
    (limit, i) => `    remaining = floor((now - tat${i + 2}${plus(limit.windowUs - limit.intervalUs)}) / ${limit.intervalUs})
    if remaining < t_remaining then
      t_scope, t_limit, t_window, t_remaining, t_new = '${limit.scope}', ${limit.limit}, ${limit.windowSeconds}, remaining, tat${i + 2} + ${limit.intervalUs}
    end
`,
  )
  .join('')}    if b_remaining then
      return {'allow', prefix, k[5], t_scope, t_limit, t_window, t_remaining, ceil((t_new - now) / 1000),
        'tokens', b_scope, b_tokens, b_window, b_remaining, b_reset}
    end
    return {'allow', prefix, k[5], t_scope, t_limit, t_window, t_remaining, ceil((t_new - now) / 1000)}
`
}  end
end
${luaFile('lib/buckets.lua')}
local kb, ab
if swept then
  kb, ab = parse_buckets(a[${keyBucketsAt}], {}), parse_buckets(a[${accountBucketsAt}], {})
else
${indent(luaFile('authorize/bucket-sweep.lua'))}
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
${luaFile('authorize/place-hold.lua')}
local writes = hw
if #k_new > 0 then writes[#writes + 1] = kf; writes[#writes + 1] = format_buckets(k_new, kb) end
if #a_new > 0 then
  writes[#writes + 1] = ${luaText(redisKeys.accountBucketField())}
  writes[#writes + 1] = format_buckets(a_new, ab)
end
if #writes > 0 then redis.call('HSET', KEYS[1], unpack(writes)) end
if t_remaining then
  if b_remaining then
    return {'allow', prefix, k[5], t_scope, t_limit, t_window, t_remaining, t_reset,
      'tokens', b_scope, b_tokens, b_window, b_remaining, b_reset}
  end
  return {'allow', prefix, k[5], t_scope, t_limit, t_window, t_remaining, t_reset}
end
if b_remaining then return {'allow', prefix, k[5], 'tokens', b_scope, b_tokens, b_window, b_remaining, b_reset} end
return {'allow', prefix, k[5]}`;
}

function indent(lua: string): string {
  return lua.replace(/^(?=.)/gm, '  ');
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
  first = false,
): string {
  const windowUs = luaWindowUs(windowSeconds);
  // The first of the plan's blocks knows no budget came before it: nothing refused, no fewest tokens yet.
  const refuse = (condition: string, assignment: string) => (first ? assignment : `if ${condition} then\n  ${assignment}\nend`);
  const fewer = (remaining: string) => (first ? 'else' : `elseif not b_remaining or ${remaining} < b_remaining then`);
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
${indent(indent(refuse('not x_retry or retry > x_retry', `x_scope, x_tokens, x_window, x_reset, x_retry = ${scope}, ${tokens}, ${windowSeconds}, reset, retry`)))}
  elseif remaining <= ${held} then
${indent(indent(refuse('not x_retry', `x_scope, x_tokens, x_window, x_reset, x_retry = ${scope}, ${tokens}, ${windowSeconds}, reset, 0`)))}
  ${fewer('remaining')}
    b_scope, b_tokens, b_window, b_remaining, b_reset = ${scope}, ${tokens}, ${windowSeconds}, remaining, reset
  end
elseif ${tokens} <= ${held} then
${indent(refuse('not x_retry', `x_scope, x_tokens, x_window, x_reset, x_retry = ${scope}, ${tokens}, ${windowSeconds}, 0, 0`))}
${fewer(String(tokens))}
  b_scope, b_tokens, b_window, b_remaining, b_reset = ${scope}, ${tokens}, ${windowSeconds}, ${tokens}, 0
end`;
}

/**
 * Lua: the token budgets, after the request rate limits and before their
 * writes, given `now`, `k`, `a` and `prefix`; mirrors tokenBudgetState()
 * in src/accounts/limits/token-budget.ts (to the ms: the property test holds them
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
    // The arithmetic is exact in doubles within these bounds only (lua/lib/token-consume.lua).
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
  const overrides = `${luaFile('lib/divmod.lua')}
local x_scope, x_tokens, x_window, x_reset, x_retry
local function check(scope, tokens, window_s, bucket)
  local window_us = window_s * 1000000
${indent(luaBudgetCheck('scope', 'tokens', 'window_s', 'bucket[1]', 'bucket[2]', "(scope == 'key' and held_kt or held_at)"))}
end
local o = a[5] and cjson.decode(a[5]) or {}
local key_budgets = (k[7] and cjson.decode(k[7])) or o.key
  or ${planTable(budgets.key)}
local account_budgets = o.account or ${planTable(budgets.account)}
if #key_budgets + #account_budgets > 0 then
${indent(luaFile('lib/token-buckets-of.lua'))}
  local stored = redis.call('HMGET', KEYS[1], ${keyField(redisKeys.keyTokenBucketField)}, ${luaText(redisKeys.accountTokenBucketField())})
  local tk, ta = token_buckets_of(stored[1]), token_buckets_of(stored[2])
  for _, b in ipairs(key_budgets) do check('key', b.tokens, b.windowSeconds, tk[b.windowSeconds] or {}) end
  for _, b in ipairs(account_budgets) do check('account', b.tokens, b.windowSeconds, ta[b.windowSeconds] or {}) end
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
    const unpack = `local tv = a[${fieldAt[scope]}]
if tv then
  local ${own.map(({ n }) => `w${n}`).join(', ')}
  if #tv == ${TOKEN_BUCKET_BYTES * own.length} then
    ${own.map(({ n }) => `w${n}, bt${n}, bf${n}`).join(', ')} = struct.unpack('${struct}', tv)
  end
  if ${own.map(({ n, windowSeconds }) => `w${n} ~= ${windowSeconds}`).join(' or ')} then
    ${names} = ${own.map(() => 'nil, nil').join(', ')}
    for at = 1, #tv - ${TOKEN_BUCKET_BYTES - 1}, ${TOKEN_BUCKET_BYTES} do
      local w, t, f = struct.unpack('${TOKEN_BUCKET_STRUCT}', tv, at)
      ${own.map(({ n, windowSeconds }) => `if w == ${windowSeconds} then bt${n}, bf${n} = t, f`).join(' else')} end
    end
  end
end`;
    return [`do\n${indent(unpack)}\nend`];
  });
  const plan = numbered.map(
    (budget) => `do
${indent(luaBudgetCheck(`'${budget.scope}'`, budget.tokens, budget.windowSeconds, `bt${budget.n}`, `bf${budget.n}`, budget.scope === 'key' ? 'held_kt' : 'held_at', budget.n === 1))}
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
