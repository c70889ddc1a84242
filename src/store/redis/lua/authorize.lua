-- The authorize script: the whole decision for a known key in one round
-- trip. It mirrors authorizeAccountState() in
-- src/accounts/limits/authorize-account-state.ts (the in-memory store runs
-- that), and the shared contract suite keeps them equal.
--
-- KEYS: the account and the key record. ARGV:
--   1. the key id, from which the key's fields are named (its bucket, token
--      buckets and spend);
--   2. the decision time in us on Redis's clock (RedisClock; in tests, their
--      clock), so the script runs no TIME of its own, then the request's hold
--      if it brings one (minor units, tokens, and the slot it is held in,
--      holdSlotAt): struct '<d' or '<dddd', so one struct.unpack reads them,
--      and the hold costs no argument of its own;
--   3. the default plan, packed (src/store/redis/authorize-plan.ts): four
--      bytes, the counts of the key's and the account's rate limits and token
--      budgets; then each limit, key's first, as '<ddd' (window in s, limit,
--      emission interval in us); then each budget as '<dd' (tokens, window in
--      s). Binary, so one struct.unpack reads several numbers: as text each
--      number would cost a strtod;
--   4-6. the key's restrictions as Check saw them (luaRestrictions below).
--
-- Four commands when allowed: EVALSHA, HMGET of the key record, HMGET of the
-- account record with the bucket fields, and one HSET of the buckets; a
-- refused decision skips the HSET. Buckets are fields of the account hash,
-- packed ('<I4d' per window, PACKED_BUCKET_STRUCT): one field per key and
-- one for the account, each holding all of its windows, so a decision reads
-- and writes two bucket fields however many windows. A window whose TAT has
-- passed is as good as an absent one, and at most once an hour a decision
-- deletes the fields with none ahead (authorize/bucket-sweep.lua).
--
-- What Redis spends on it is mostly Lua work and the fields of its commands:
-- every field looked up, every number parsed from a string or formatted into
-- one, every table and closure costs a fraction of a microsecond
-- (test/bench/redis-callgrind.ts, docs/design/redis-path.md). So the common
-- case (no limit override in either record, the stored buckets holding
-- exactly the plan's windows, at most two per scope, the sweep not due) is
-- straight-line code on locals: no table, no closure. The rest (overrides,
-- buckets of other windows, plans with more windows, the sweep) goes through
-- the table-driven general path. Both compute exactly what gcraStep() in
-- src/accounts/limits/gcra.ts does. The reply carries numbers as integers,
-- and only what the answer needs.
local floor, ceil = math.floor, math.ceil
local now, hold_ms, hold_ts, hold_slot
local T = ARGV[2] or ''
if #T == 8 then now = struct.unpack('<d', T)
elseif #T == 32 then now, hold_ms, hold_ts, hold_slot = struct.unpack('<dddd', T) end
if not now then return redis.error_reply('authorize: ARGV[2] must be the decision time in us on the Redis clock, packed') end
local P = ARGV[3] or ''
local nk, na, nbk, nba = string.byte(P, 1, 4)
if not nba or #P ~= 4 + 24 * (nk + na) + 16 * (nbk + nba) then
  return redis.error_reply('authorize: ARGV[3] must be the packed default plan')
end
local k = redis.call('HMGET', KEYS[2], 'status', 'expiresAtMs', 'limits', 'prefix', 'environment', 'revokeAtMs',
  'tokenBudgets', 'monthlySpendCap', 'restrictionsStamp')
if not k[1] then return {'unknown_key'} end
local kf = 'rk:' .. ARGV[1]
-- The account's fields, then its bucket field (a[7]), the key's (a[8]), the restrictions' stamp (a[9]); with token
-- budgets in the plan, the key's and the account's token bucket fields (a[10], a[11]).
local a
if nbk + nba > 0 then
  a = redis.call('HMGET', KEYS[1], 'status', 'creditBalance', 'limits', 'bucketSweepAtUs', 'tokenBudgets', 'monthlySpendCap',
    'ra', kf, 'restrictionsStamp', 'tp:k:' .. ARGV[1], 'tp:a')
else
  a = redis.call('HMGET', KEYS[1], 'status', 'creditBalance', 'limits', 'bucketSweepAtUs', 'tokenBudgets', 'monthlySpendCap',
    'ra', kf, 'restrictionsStamp')
end
if not a[1] then return {'unknown_key'} end
local prefix = k[4]
if k[1] == 'revoked' or (k[6] and k[6] * 1000 <= now) then return {'key_revoked', prefix} end
if k[2] and k[2] * 1000 <= now then return {'key_expired', prefix} end
if a[1] == 'suspended' then return {'account_suspended', prefix} end
-- The key's restrictions (docs/concepts/key-restrictions.md), after the status checks and before anything that
-- consumes or holds. Check decides them from the texts it cached (src/check/restrictions-cache.ts) and, for a key it
-- knows to be restricted, sends the texts' stamps and its verdict as ARGV[4..6] (key's stamp, account's stamp,
-- refused kind; each left out when it and those after it are '').
-- A key it believes unrestricted sends none of them. Stamps other than the records' (k[9], a[9], written with the
-- texts) are answered with the current texts, read then (the only time they are), so Check decides again: a change
-- reaches every replica on its next request, as revocation does. A verdict on current stamps refuses here, where the
-- status is known. An unrestricted key of an account without defaults, the common case, passes on one test.
if k[9] or a[9] or ARGV[4] then
  if (k[9] or '') ~= (ARGV[4] or '') or (a[9] or '') ~= (ARGV[5] or '') then
    return {'restrictions_changed', prefix, redis.call('HGET', KEYS[2], 'restrictions') or '',
      redis.call('HGET', KEYS[1], 'restrictions') or ''}
  end
  if ARGV[6] then return {'restricted', prefix} end
end
local plan_budgets = nbk + nba > 0
--@include authorize/held-sums.lua
if a[2] then
  -- One tonumber (a strtod each).
  local balance = tonumber(a[2])
  if balance <= 0 or balance - held_am < hold_m then return {'credit_exhausted', prefix} end
end
--@include authorize/spend-caps.lua
-- The request rate limits: refused here, or the buckets' new values (k_packed, a_packed, written below with the
-- hold) and the window with the fewest requests left (t_*, for the rate-limit headers).
local b_scope, b_tokens, b_window, b_remaining, b_reset = nil, nil, nil, nil, nil
local t_scope, t_limit, t_window, t_remaining, t_reset
local k_packed, a_packed, k_sums, a_sums
local swept = a[4] and tonumber(a[4])
swept = swept and swept > now
local plain = swept and not k[3] and not a[3] and nk <= 2 and na <= 2
if plain then
  -- The plan's limits into locals (kw window s, kl limit, ki interval us; aw, al, ai the account's) and the
  -- stored TATs into tat1, tat2 (the key's) and tat3, tat4 (the account's), now for none.
  local kw1, kl1, ki1, kw2, kl2, ki2, aw1, al1, ai1, aw2, al2, ai2
  if nk == 2 and na == 2 then
    -- The common shape (a short and a long window per scope) in one call.
    kw1, kl1, ki1, kw2, kl2, ki2, aw1, al1, ai1, aw2, al2, ai2 = struct.unpack('<dddddddddddd', P, 5)
  else
    if nk == 2 then kw1, kl1, ki1, kw2, kl2, ki2 = struct.unpack('<dddddd', P, 5)
    elseif nk == 1 then kw1, kl1, ki1 = struct.unpack('<ddd', P, 5) end
    if na == 2 then aw1, al1, ai1, aw2, al2, ai2 = struct.unpack('<dddddd', P, 5 + 24 * nk)
    elseif na == 1 then aw1, al1, ai1 = struct.unpack('<ddd', P, 5 + 24 * nk) end
  end
  -- Written out per scope, not included once per scope as the token buckets' reading is: naming the inputs and
  -- outputs of an included part as locals measured 700 more instructions on every decision (0.6 %; runs of one build
  -- differ by up to 1 %), and this is the path every decision takes.
  local tat1, tat2, tat3, tat4 = now, now, now, now
  local v = a[8]
  if nk > 0 and v then
    local w1, t1, w2, t2
    if pkw1 then w1, t1, w2, t2 = pkw1, pkt1, pkw2, pkt2
    elseif #v == 12 * nk or #v == 12 * nk + 40 then w1, t1, w2, t2 = struct.unpack(nk == 2 and '<I4dI4d' or '<I4d', v) end
    if w1 == kw1 and (nk == 1 or w2 == kw2) then
      if t1 > now then tat1 = t1 end
      if nk == 2 and t2 > now then tat2 = t2 end
    else
      plain = false
    end
  end
  v = a[7]
  if na > 0 and v then
    local w3, t3, w4, t4
    if paw1 then w3, t3, w4, t4 = paw1, pat1, paw2, pat2
    elseif #v == 12 * na or #v == 12 * na + 40 then w3, t3, w4, t4 = struct.unpack(na == 2 and '<I4dI4d' or '<I4d', v) end
    if w3 == aw1 and (na == 1 or w4 == aw2) then
      if t3 > now then tat3 = t3 end
      if na == 2 and t4 > now then tat4 = t4 end
    else
      plain = false
    end
  end
  if plain then
    -- Refused by the window that keeps the caller waiting longest (the first on a tie).
    local r_retry, r_n, wait_us, retry
    if nk > 0 then
      wait_us = tat1 + ki1 - kw1 * 1000000 - now
      if wait_us > 0 then r_retry, r_n = ceil(wait_us / 1000), 1 end
      if nk == 2 then
        wait_us = tat2 + ki2 - kw2 * 1000000 - now
        if wait_us > 0 then
          retry = ceil(wait_us / 1000)
          if not r_retry or retry > r_retry then r_retry, r_n = retry, 2 end
        end
      end
    end
    if na > 0 then
      wait_us = tat3 + ai1 - aw1 * 1000000 - now
      if wait_us > 0 then
        retry = ceil(wait_us / 1000)
        if not r_retry or retry > r_retry then r_retry, r_n = retry, 3 end
      end
      if na == 2 then
        wait_us = tat4 + ai2 - aw2 * 1000000 - now
        if wait_us > 0 then
          retry = ceil(wait_us / 1000)
          if not r_retry or retry > r_retry then r_retry, r_n = retry, 4 end
        end
      end
    end
    if r_retry then
      local scope, limit, window, tat = 'key', kl1, kw1, tat1
      if r_n == 2 then limit, window, tat = kl2, kw2, tat2
      elseif r_n == 3 then scope, limit, window, tat = 'account', al1, aw1, tat3
      elseif r_n == 4 then scope, limit, window, tat = 'account', al2, aw2, tat4 end
      return {'rate_limited', prefix, scope, limit, window, 0, ceil((tat - now) / 1000), r_retry}
    end
    -- Allowed by every window: the new TATs, and the window with the fewest requests left (the first on a tie).
    local pack = struct.pack
    local remaining, t_new
    -- With a hold, the sums in the same call as the windows (a concatenation of a second pack measured 2.5k more
    -- instructions a scope).
    if holding then
      if not key_sums then
        if nk == 2 then k_packed = pack('<I4dI4d', kw1, tat1 + ki1, kw2, tat2 + ki2)
        elseif nk == 1 then k_packed = pack('<I4d', kw1, tat1 + ki1) end
      elseif nk == 2 then k_packed = pack('<I4dI4dddddd', kw1, tat1 + ki1, kw2, tat2 + ki2, hk_s, hk_m0, hk_t0, hk_m1, hk_t1)
      elseif nk == 1 then k_packed = pack('<I4dddddd', kw1, tat1 + ki1, hk_s, hk_m0, hk_t0, hk_m1, hk_t1) end
      if na == 2 then a_packed = pack('<I4dI4dddddd', aw1, tat3 + ai1, aw2, tat4 + ai2, ha_s, ha_m0, ha_t0, ha_m1, ha_t1)
      elseif na == 1 then a_packed = pack('<I4dddddd', aw1, tat3 + ai1, ha_s, ha_m0, ha_t0, ha_m1, ha_t1) end
      k_sums, a_sums = nk > 0, na > 0
    else
      if nk == 2 then k_packed = pack('<I4dI4d', kw1, tat1 + ki1, kw2, tat2 + ki2)
      elseif nk == 1 then k_packed = pack('<I4d', kw1, tat1 + ki1) end
      if na == 2 then a_packed = pack('<I4dI4d', aw1, tat3 + ai1, aw2, tat4 + ai2)
      elseif na == 1 then a_packed = pack('<I4d', aw1, tat3 + ai1) end
    end
    if nk > 0 then
      t_scope, t_limit, t_window = 'key', kl1, kw1
      t_remaining, t_new = floor((now - tat1 + kw1 * 1000000 - ki1) / ki1), tat1 + ki1
      if nk == 2 then
        remaining = floor((now - tat2 + kw2 * 1000000 - ki2) / ki2)
        if remaining < t_remaining then
          t_limit, t_window, t_remaining, t_new = kl2, kw2, remaining, tat2 + ki2
        end
      end
    end
    if na > 0 then
      remaining = floor((now - tat3 + aw1 * 1000000 - ai1) / ai1)
      if not t_remaining or remaining < t_remaining then
        t_scope, t_limit, t_window, t_remaining, t_new = 'account', al1, aw1, remaining, tat3 + ai1
      end
      if na == 2 then
        remaining = floor((now - tat4 + aw2 * 1000000 - ai2) / ai2)
        if remaining < t_remaining then
          t_scope, t_limit, t_window, t_remaining, t_new = 'account', al2, aw2, remaining, tat4 + ai2
        end
      end
    end
    if t_new then t_reset = ceil((t_new - now) / 1000) end
  end
end
if not plain then
  --@include lib/buckets.lua
  local kb, ab
  if swept then
    kb, ab = parse_buckets(a[8], {}), parse_buckets(a[7], {})
  else
    --@include authorize/bucket-sweep.lua
  end
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
  -- The plan's limits as tables, read from P only when no override replaces them.
  --@include authorize/plan-records.lua
  local overrides = a[3] and cjson.decode(a[3]) or {}
  local kl = (k[3] and cjson.decode(k[3])) or overrides.key or plan_records(5, nk, 24, 'windowSeconds', 'limit')
  local al = overrides.account or plan_records(5 + 24 * nk, na, 24, 'windowSeconds', 'limit')
  local k_new, a_new = {}, {}
  for i, l in ipairs(kl) do k_new[i] = {l.windowSeconds, step('key', kb[l.windowSeconds], l)}; kb[l.windowSeconds] = nil end
  for i, l in ipairs(al) do a_new[i] = {l.windowSeconds, step('account', ab[l.windowSeconds], l)}; ab[l.windowSeconds] = nil end
  if r_retry then return {'rate_limited', prefix, r_scope, r_limit, r_window, 0, r_reset, r_retry} end
  -- The windows in force first, then those of other windows still ahead of now (a stale one is as good as absent).
  for _, m in ipairs({kb, ab}) do
    for w, t in pairs(m) do if t <= now then m[w] = nil end end
  end
  if #k_new > 0 then k_packed = format_buckets(k_new, kb) end
  if #a_new > 0 then a_packed = format_buckets(a_new, ab) end
end
--@include authorize/token-budgets.lua
--@include authorize/place-hold.lua
if k_packed and a_packed then redis.call('HSET', KEYS[1], kf, k_packed, 'ra', a_packed)
elseif k_packed then redis.call('HSET', KEYS[1], kf, k_packed)
elseif a_packed then redis.call('HSET', KEYS[1], 'ra', a_packed) end
-- What was held, in the kind: 'allow' nothing, else money ('m'), tokens ('t') or both.
local allow = 'allow'
if holding then allow = hold_m > 0 and (hold_t > 0 and 'allow:mt' or 'allow:m') or (hold_t > 0 and 'allow:t' or 'allow') end
if t_remaining then
  if b_remaining then
    return {allow, prefix, k[5], t_scope, t_limit, t_window, t_remaining, t_reset,
      'tokens', b_scope, b_tokens, b_window, b_remaining, b_reset}
  end
  return {allow, prefix, k[5], t_scope, t_limit, t_window, t_remaining, t_reset}
end
if b_remaining then return {allow, prefix, k[5], 'tokens', b_scope, b_tokens, b_window, b_remaining, b_reset} end
return {allow, prefix, k[5]}
