-- The whole decision for a known key in one round trip (see authorizeScript
-- in scripts.ts): mirrors authorizeAccountState() in
-- src/limits/authorize-account-state.ts, and the shared contract suite keeps
-- them equal.
--
-- KEYS: the account, the key record, and with a hold the holds hash.
-- ARGV[1]: the key id, of which the script names the key's fields.
-- ARGV[2]: a JSON array, the decision time then the default plan
--   (authorizeArgument in scripts.ts): [now_us, nk, na, (window_s, limit,
--   interval_us) for each of the nk key limits then the na account limits,
--   nbk, nba, (tokens, window_s) for each of the nbk key budgets then the nba
--   account budgets]. One argument, decoded by one cjson call: each EVALSHA
--   argument and each number parsed in Lua costs Redis more than cjson's
--   parse of them together.
-- ARGV[3..6], with a hold: its minor units, tokens, request id and deadline.
local floor, ceil = math.floor, math.ceil
local P = cjson.decode(ARGV[2])
local now = P[1]
if type(now) ~= 'number' then return redis.error_reply('authorize: ARGV[2] must start with the decision time in µs on the Redis clock') end
local nk, na = P[2], P[3]
local nl = nk + na
-- P[3 * i + 1], P[3 * i + 2], P[3 * i + 3]: the window, limit and emission interval of limit i.
local budgets_at = 3 * nl + 4
local nbk, nba = P[budgets_at], P[budgets_at + 1]

local k = redis.call('HMGET', KEYS[2], 'status', 'expiresAtMs', 'limits', 'prefix', 'environment', 'revokeAtMs', 'tokenBudgets',
  'monthlySpendCap')
if not k[1] then return {'unknown_key'} end
local kf = 'rk:' .. ARGV[1]
-- The account hash with the request buckets (a[7], a[8]) and the token bucket field of each scope the plan has budgets in (kt_at, at_at).
local a, kt_at, at_at
if nbk > 0 and nba > 0 then
  a = redis.call('HMGET', KEYS[1], 'status', 'creditBalance', 'limits', 'bucketSweepAtUs', 'tokenBudgets', 'monthlySpendCap', 'ra', kf,
    'tp:k:' .. ARGV[1], 'tp:a')
  kt_at, at_at = 9, 10
elseif nbk > 0 then
  a = redis.call('HMGET', KEYS[1], 'status', 'creditBalance', 'limits', 'bucketSweepAtUs', 'tokenBudgets', 'monthlySpendCap', 'ra', kf,
    'tp:k:' .. ARGV[1])
  kt_at = 9
elseif nba > 0 then
  a = redis.call('HMGET', KEYS[1], 'status', 'creditBalance', 'limits', 'bucketSweepAtUs', 'tokenBudgets', 'monthlySpendCap', 'ra', kf,
    'tp:a')
  at_at = 9
else
  a = redis.call('HMGET', KEYS[1], 'status', 'creditBalance', 'limits', 'bucketSweepAtUs', 'tokenBudgets', 'monthlySpendCap', 'ra', kf)
end
if not a[1] then return {'unknown_key'} end
local prefix = k[4]
if k[1] == 'revoked' or (k[6] and k[6] * 1000 <= now) then return {'key_revoked', prefix} end
if k[2] and k[2] * 1000 <= now then return {'key_expired', prefix} end
if a[1] == 'suspended' then return {'account_suspended', prefix} end

-- The sums of holds in flight (src/domain/credit-holds.ts, layout in
-- redisKeys.holds): held_am, held_at (the account's money and tokens),
-- held_km, held_kt (this key's), and hold_m, hold_t (what this request holds
-- if allowed: money only on an account with a balance or a cap, tokens only
-- with a token budget), key_m, key_t (what of it counts for the key: only
-- where the key has a cap or the plan or an override may give it budgets),
-- all 0 when the request brings no hold or the account holds nothing. Only
-- such an account pays anything: one HMGET of the sums, the key's only where
-- they count. Once the earliest hold's deadline has passed (prune_at), lapsed
-- holds are released first (their answers never came) with one HGETALL of the
-- holds, which also finds the next earliest deadline: at most once per hold
-- lifetime while holds are in flight, as metering releases the others without
-- moving prune_at.
local hold_m, hold_t, key_m, key_t, held_am, held_at, held_km, held_kt, holding, prune_at = 0, 0, 0, 0, 0, 0, 0, 0, false, nil
if ARGV[3] then
  local money, tokens = a[2] or k[8] or a[6], nbk + nba > 0 or k[7] or a[5]
  if money or tokens then
    holding = true
    if money then hold_m = tonumber(ARGV[3]) end
    if tokens then hold_t = tonumber(ARGV[4]) end
    if k[8] then key_m = hold_m end
    if nbk > 0 or k[7] or a[5] then key_t = hold_t end
    local function read_sums()
      if key_m > 0 or key_t > 0 then
        return redis.call('HMGET', KEYS[1], 'hm', 'ht', 'holdPruneAtUs', 'hm:' .. ARGV[1], 'ht:' .. ARGV[1])
      end
      return redis.call('HMGET', KEYS[1], 'hm', 'ht', 'holdPruneAtUs')
    end
    local h = read_sums()
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
            for f, n in pairs({hm = m, ht = t, ['hm:' .. id] = km, ['ht:' .. id] = kt}) do
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
      if prune_at then redis.call('HSET', KEYS[1], 'holdPruneAtUs', string.format('%.0f', prune_at))
      else redis.call('HDEL', KEYS[1], 'holdPruneAtUs') end
      h = read_sums()
    end
    held_am, held_at, held_km, held_kt = tonumber(h[1]) or 0, tonumber(h[2]) or 0, tonumber(h[4]) or 0, tonumber(h[5]) or 0
  end
end
if a[2] and (tonumber(a[2]) <= 0 or tonumber(a[2]) - held_am < hold_m) then return {'credit_exhausted', prefix} end

-- The monthly spend caps (k[8], a[6]). The month's spend fields are named by
-- the month (redisKeys.accountSpendField, keySpendField), so the script names
-- it from its own clock, the one every decision of every replica uses: a
-- decision at 00:00:00.001 on the 1st (UTC) reads the new month everywhere at
-- once. gwaApplyUsage counts a record in the month the answer ended, the same
-- UTC calendar. Only an account or key with a cap pays for it: the civil date
-- (as lib/iso8601.lua) and one more HMGET. The holds in flight and this
-- request's count as spent: the cap must cover them all.
if k[8] or a[6] then
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
  local spent = redis.call('HMGET', KEYS[1], 'sp:a:' .. month, 'sp:k:' .. ARGV[1] .. ':' .. month)
  local key_spent, account_spent = tonumber(spent[2]) or 0, tonumber(spent[1]) or 0
  if k[8] and (key_spent >= tonumber(k[8]) or key_spent + held_km + hold_m > tonumber(k[8])) then
    return {'budget_exceeded', prefix, 'key', k[8]}
  end
  if a[6] and (account_spent >= tonumber(a[6]) or account_spent + held_am + hold_m > tonumber(a[6])) then
    return {'budget_exceeded', prefix, 'account', a[6]}
  end
end

-- The token budgets, after the request rate limits and before their writes;
-- mirrors tokenBudgetState() in src/limits/token-budget.ts (to the ms: the
-- property test holds them equal). The refusal (a reply) with the exhausted
-- budget that keeps the caller waiting longest, else nil with b_* the budget
-- with the fewest tokens left, for the token rate-limit headers. Reads only:
-- usage consumes the buckets (gwaApplyUsage). The plan's budgets read the
-- packed field of each scope that came with the account HMGET, by position
-- when it holds exactly the plan's windows in order (as the usage script
-- writes them), else by window; an override in either record (k[7], a[5])
-- reads both fields with one more HMGET.
-- Only a decision with budgets makes these functions (each one made costs Redis a few hundred instructions).
local b_scope, b_tokens, b_window, b_remaining, b_reset
local token_budgets
if nbk + nba > 0 or k[7] or a[5] then
  token_budgets = function()
    --@include lib/divmod.lua
    --@include lib/token-buckets-of.lua
    --@include lib/token-unrefilled.lua
    local x_scope, x_tokens, x_window, x_reset, x_retry
    -- One budget against its bucket (tat nil for none): refused (x_*) when not
    -- one whole token is available, or none is left after the tokens `held` by
    -- answers in flight (no time to wait for then but theirs: retry 0).
    local function check(scope, tokens, window_s, tat, fraction, held)
      local window_us = window_s * 1000000
      if tat and tat >= now then
        if fraction >= tokens then fraction = 0 end
        local d, f1 = tat - now, 0
        if fraction > 0 then f1 = 1 end
        local reset, remaining = floor((d + 999 + f1) / 1000), 0
        if d < window_us then remaining = tokens - tb_unrefilled(d, fraction, tokens, window_s) end
        if remaining == 0 then
          -- Until one whole token is back: the debt down to tokens - 1 tokens' worth, (d + fraction/tokens) - (W - W/tokens) us.
          local q, r = divmod(window_us, tokens)
          local us, part = d - window_us + q, fraction + r
          if part > tokens then us = us + 2 elseif part > 0 then us = us + 1 end
          local retry = floor((us + 999) / 1000)
          if not x_retry or retry > x_retry then x_scope, x_tokens, x_window, x_reset, x_retry = scope, tokens, window_s, reset, retry end
        elseif remaining <= held then
          if not x_retry then x_scope, x_tokens, x_window, x_reset, x_retry = scope, tokens, window_s, reset, 0 end
        elseif not b_remaining or remaining < b_remaining then
          b_scope, b_tokens, b_window, b_remaining, b_reset = scope, tokens, window_s, remaining, reset
        end
      elseif tokens <= held then
        if not x_retry then x_scope, x_tokens, x_window, x_reset, x_retry = scope, tokens, window_s, 0, 0 end
      elseif not b_remaining or tokens < b_remaining then
        b_scope, b_tokens, b_window, b_remaining, b_reset = scope, tokens, window_s, tokens, 0
      end
    end
    if not k[7] and not a[5] then
      -- The plan's budgets of one scope, P[from], P[from + 1] on, against its packed field.
      local function plan_scope(scope, v, from, count, held)
        local positional = v and #v == 16 * count
        if positional then
          for i = 0, count - 1 do
            local w, t, f = struct.unpack('<I4dI4', v, 16 * i + 1)
            if w ~= P[from + 2 * i + 1] then positional = false; break end
            check(scope, P[from + 2 * i], w, t, f, held)
          end
          if positional then return end
          -- Budgets checked so far are checked again from the same buckets: the same answer.
        end
        local buckets = token_buckets_of(v)
        for i = 0, count - 1 do
          local w = P[from + 2 * i + 1]
          local b = buckets[w] or {}
          check(scope, P[from + 2 * i], w, b[1], b[2], held)
        end
      end
      if nbk > 0 then plan_scope('key', a[kt_at], budgets_at + 2, nbk, held_kt) end
      if nba > 0 then plan_scope('account', a[at_at], budgets_at + 2 + 2 * nbk, nba, held_at) end
    else
      local function plan_budgets(from, count)
        local out = {}
        for i = 0, count - 1 do out[i + 1] = {tokens = P[from + 2 * i], windowSeconds = P[from + 2 * i + 1]} end
        return out
      end
      local o = a[5] and cjson.decode(a[5]) or {}
      local kl = (k[7] and cjson.decode(k[7])) or o.key or plan_budgets(budgets_at + 2, nbk)
      local al = o.account or plan_budgets(budgets_at + 2 + 2 * nbk, nba)
      if #kl + #al > 0 then
        local stored = redis.call('HMGET', KEYS[1], 'tp:k:' .. ARGV[1], 'tp:a')
        local tk, ta = token_buckets_of(stored[1]), token_buckets_of(stored[2])
        for _, b in ipairs(kl) do local t = tk[b.windowSeconds] or {}; check('key', b.tokens, b.windowSeconds, t[1], t[2], held_kt) end
        for _, b in ipairs(al) do local t = ta[b.windowSeconds] or {}; check('account', b.tokens, b.windowSeconds, t[1], t[2], held_at) end
      end
    end
    if x_retry then return {'token_budget_exhausted', prefix, x_scope, x_tokens, x_window, 0, x_reset, x_retry} end
  end
end

-- An allowed decision places its hold: the request id joins the holds hash
-- with its deadline and amounts (HSETNX: a repeated Check of the same request
-- id holds once; its first hold was already counted in the sums it was judged
-- against), and the account hash fields and values of the sums it adds to
-- are returned, for the decision's one HSET (empty when none). Made only for a decision that holds.
local place_hold = holding and function()
  local hw = {}
  -- The amounts as ARGV wrote them: a Lua number may print with an exponent.
  if redis.call('HSETNX', KEYS[3], ARGV[5], ARGV[6] .. ' ' .. ARGV[1] .. ' ' .. (hold_m > 0 and ARGV[3] or '0') .. ' ' ..
      (hold_t > 0 and ARGV[4] or '0') .. ' ' .. (key_m > 0 and ARGV[3] or '0') .. ' ' .. (key_t > 0 and ARGV[4] or '0')) == 1 then
    local fmt = string.format
    if not prune_at then hw[1] = 'holdPruneAtUs'; hw[2] = ARGV[6] end
    if hold_m > 0 then hw[#hw + 1] = 'hm'; hw[#hw + 1] = fmt('%.0f', held_am + hold_m) end
    if hold_t > 0 then hw[#hw + 1] = 'ht'; hw[#hw + 1] = fmt('%.0f', held_at + hold_t) end
    if key_m > 0 then hw[#hw + 1] = 'hm:' .. ARGV[1]; hw[#hw + 1] = fmt('%.0f', held_km + key_m) end
    if key_t > 0 then hw[#hw + 1] = 'ht:' .. ARGV[1]; hw[#hw + 1] = fmt('%.0f', held_kt + key_t) end
  end
  return hw
end

-- Two paths from here. The common case (no limit overrides in either record,
-- the stored buckets holding exactly the plan's windows in order, the sweep
-- not due) takes the plan's limits by position, with no table per limit and
-- no closure; the rest (overrides, buckets of other windows, the sweep) is
-- table-driven. Both compute exactly what gcraStep() in src/limits/gcra.ts
-- does.
local swept = a[4] and tonumber(a[4])
swept = swept and swept > now
if swept and not k[3] and not a[3] then
  -- tats[i]: limit i's TAT, now where its bucket is absent or passed.
  local tats, plain = {}, true
  for s = 1, 2 do
    local v, from, count = a[8], 1, nk
    if s == 2 then v, from, count = a[7], nk + 1, na end
    if count > 0 then
      if not v then
        for i = from, from + count - 1 do tats[i] = now end
      elseif #v == 12 * count then
        for i = from, from + count - 1 do
          local w, t = struct.unpack('<I4d', v, 12 * (i - from) + 1)
          if w ~= P[3 * i + 1] then plain = false; break end
          if t > now then tats[i] = t else tats[i] = now end
        end
      else
        plain = false
      end
    end
  end
  if plain then
    local r_retry, r_n
    for i = 1, nl do
      local retry = tats[i] + P[3 * i + 3] - P[3 * i + 1] * 1000000 - now
      if retry > 0 then
        retry = ceil(retry / 1000)
        if not r_retry or retry > r_retry then r_retry, r_n = retry, i end
      end
    end
    if r_retry then
      local r_scope = r_n <= nk and 'key' or 'account'
      return {'rate_limited', prefix, r_scope, P[3 * r_n + 2], P[3 * r_n + 1], 0, ceil((tats[r_n] - now) / 1000), r_retry}
    end
    if token_budgets then
      local refusal = token_budgets()
      if refusal then return refusal end
    end
    local hw = place_hold and place_hold() or {}
    if nl == 0 then
      if #hw > 0 then redis.call('HSET', KEYS[1], unpack(hw)) end
      if b_remaining then return {'allow', prefix, k[5], 'tokens', b_scope, b_tokens, b_window, b_remaining, b_reset} end
      return {'allow', prefix, k[5]}
    end
    -- Each scope's new buckets, the plan's windows in order; and the tightest limit (the first on a tie).
    local pack = struct.pack
    local t_n, t_remaining
    for s = 1, 2 do
      local from, count, field = 1, nk, kf
      if s == 2 then from, count, field = nk + 1, na, 'ra' end
      if count > 0 then
        local packed = ''
        for i = from, from + count - 1 do
          local window_us, interval = P[3 * i + 1] * 1000000, P[3 * i + 3]
          packed = packed .. pack('<I4d', P[3 * i + 1], tats[i] + interval)
          local remaining = floor((now - tats[i] + window_us - interval) / interval)
          if not t_remaining or remaining < t_remaining then t_n, t_remaining = i, remaining end
        end
        hw[#hw + 1] = field
        hw[#hw + 1] = packed
      end
    end
    redis.call('HSET', KEYS[1], unpack(hw))
    local t_scope, t_reset = t_n <= nk and 'key' or 'account', ceil((tats[t_n] + P[3 * t_n + 3] - now) / 1000)
    if b_remaining then
      return {'allow', prefix, k[5], t_scope, P[3 * t_n + 2], P[3 * t_n + 1], t_remaining, t_reset,
        'tokens', b_scope, b_tokens, b_window, b_remaining, b_reset}
    end
    return {'allow', prefix, k[5], t_scope, P[3 * t_n + 2], P[3 * t_n + 1], t_remaining, t_reset}
  end
end

-- A packed bucket field (redisKeys.keyBucketField: per window 12 bytes,
-- struct '<I4d', PACKED_BUCKET_STRUCT) -> {[windowSeconds] = tatUs}, into
-- `into`; a value of another length adds nothing. format_buckets packs
-- `first` ({window, tat} pairs, in order) then the windows of `rest` in
-- ascending order.
local function parse_buckets(packed, into)
  if packed and #packed % 12 == 0 then
    for i = 1, #packed, 12 do
      local w, t = struct.unpack('<I4d', packed, i)
      into[w] = t
    end
  end
  return into
end
local function format_buckets(first, rest)
  local parts, windows = {}, {}
  for i, b in ipairs(first) do parts[i] = struct.pack('<I4d', b[1], b[2]) end
  for w in pairs(rest) do windows[#windows + 1] = w end
  table.sort(windows)
  for _, w in ipairs(windows) do parts[#parts + 1] = struct.pack('<I4d', w, rest[w]) end
  return table.concat(parts)
end
local kb, ab
if swept then
  kb, ab = parse_buckets(a[8], {}), parse_buckets(a[7], {})
else
  -- The sweep (at most once per BUCKET_SWEEP_INTERVAL_US per account, and on
  -- an account's first decision): one HGETALL of the account hash; packed
  -- bucket fields whose windows have all passed are deleted (a rotated or
  -- revoked key's, windows no longer in use), and the sweep time is written.
  -- Its writes happen whatever the decision, so a refused decision does not
  -- scan again.
  local BUCKET_SWEEP_INTERVAL_US = 3600000000
  local all = redis.call('HGETALL', KEYS[1])
  local live, stale = {}, {}
  for i = 1, #all, 2 do
    local f = all[i]
    if string.sub(f, 1, 3) == 'rk:' or f == 'ra' then
      local m = {}
      for w, t in pairs(parse_buckets(all[i + 1], {})) do if t > now then m[w] = t end end
      if next(m) == nil then stale[#stale + 1] = f else live[f] = m end
    end
  end
  if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
  redis.call('HSET', KEYS[1], 'bucketSweepAtUs', string.format('%d', now + BUCKET_SWEEP_INTERVAL_US))
  kb, ab = live[kf] or {}, live['ra'] or {}
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
local function plan_limits(from, count)
  local out = {}
  for i = from, from + count - 1 do out[#out + 1] = {limit = P[3 * i + 2], windowSeconds = P[3 * i + 1]} end
  return out
end
local overrides = a[3] and cjson.decode(a[3]) or {}
local kl = (k[3] and cjson.decode(k[3])) or overrides.key or plan_limits(1, nk)
local al = overrides.account or plan_limits(nk + 1, na)
local k_new, a_new = {}, {}
for i, l in ipairs(kl) do k_new[i] = {l.windowSeconds, step('key', kb[l.windowSeconds], l)}; kb[l.windowSeconds] = nil end
for i, l in ipairs(al) do a_new[i] = {l.windowSeconds, step('account', ab[l.windowSeconds], l)}; ab[l.windowSeconds] = nil end
if r_retry then return {'rate_limited', prefix, r_scope, r_limit, r_window, 0, r_reset, r_retry} end
if token_budgets then
  local refusal = token_budgets()
  if refusal then return refusal end
end
-- The windows in force first, then those of other windows still ahead of now (a stale one is as good as absent).
for _, m in ipairs({kb, ab}) do
  for w, t in pairs(m) do if t <= now then m[w] = nil end end
end
local writes = place_hold and place_hold() or {}
if #k_new > 0 then writes[#writes + 1] = kf; writes[#writes + 1] = format_buckets(k_new, kb) end
if #a_new > 0 then
  writes[#writes + 1] = 'ra'
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
return {'allow', prefix, k[5]}
