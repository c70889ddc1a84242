-- The token budgets, after the request rate limits and before their writes,
-- given `now`, `k`, `a`, `prefix`, the plan `P` and its counts (nk, na, nbk,
-- nba), and the holds in flight (held_kt, held_at); mirrors
-- tokenBudgetState() in src/accounts/limits/token-budget.ts (to the ms: the
-- property test holds them equal). Refuses with the exhausted budget that
-- keeps the caller waiting longest (token_budget_exhausted), or, with tokens
-- left but none beyond those held by answers in flight, with retry 0;
-- otherwise sets b_* to the budget with the fewest tokens left, for the token
-- rate-limit headers. Reads only: usage consumes the buckets (apply-usage.lua).
-- Without an override in either record (k[7], a[5]), the plan's budgets are
-- read from P (16 bytes each, '<dd': tokens, window in s, after the limits)
-- and their buckets come with the account HMGET (a[10] and a[11], the key's
-- and the account's packed fields), each found at its budget's place when
-- the field holds the plan's windows in order, as the usage script writes
-- them, else by window. An override reads both fields with one more HMGET.
-- A plan without budgets skips all of it unless a record has one.
local x_scope, x_tokens, x_window, x_reset, x_retry
if nbk + nba > 0 or k[7] or a[5] then
  --@include lib/divmod.lua
  local function check(scope, tokens, window_s, tat, fraction, held)
    local window_us = window_s * 1000000
    if tat and tat >= now then
      if fraction >= tokens then fraction = 0 end
      local d, f1 = tat - now, 0
      if fraction > 0 then f1 = 1 end
      local reset, remaining = floor((d + 999 + f1) / 1000), 0
      if d < window_us then
        local u
        --@include authorize/token-unrefilled.lua
        remaining = tokens - u
      end
      if remaining == 0 then
        -- Until one whole token is back: the debt down to tokens - 1 tokens' worth,
        -- (d + fraction/tokens) - (W - W/tokens) us, with W/tokens = q + r/tokens.
        local q, r = divmod(window_us, tokens)
        local us, part = d - window_us + q, fraction + r
        if part > tokens then us = us + 2 elseif part > 0 then us = us + 1 end
        local retry = floor((us + 999) / 1000)
        if not x_retry or retry > x_retry then
          x_scope, x_tokens, x_window, x_reset, x_retry = scope, tokens, window_s, reset, retry
        end
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
  local budgets_at = 5 + 24 * (nk + na)
  if not k[7] and not a[5] then
    for i = 1, nbk + nba do
      local tokens, window_s = struct.unpack('<dd', P, budgets_at + 16 * (i - 1))
      local scope, held, tv, j = 'key', held_kt, a[10], i
      if i > nbk then scope, held, tv, j = 'account', held_at, a[11], i - nbk end
      local w, tat, fraction
      if tv then
        local at = 16 * j - 15
        if #tv >= at + 15 then w, tat, fraction = struct.unpack('<I4dI4', tv, at) end
        if w ~= window_s then
          tat, fraction = nil, nil
          for p = 1, #tv - 15, 16 do
            local pw, pt, pf = struct.unpack('<I4dI4', tv, p)
            if pw == window_s then tat, fraction = pt, pf end
          end
        end
      end
      check(scope, tokens, window_s, tat, fraction, held)
    end
  else
    local function plan_budget_tables(from, n)
      local out = {}
      for i = 1, n do
        local tokens, window_s = struct.unpack('<dd', P, from + 16 * (i - 1))
        out[i] = {tokens = tokens, windowSeconds = window_s}
      end
      return out
    end
    local o = a[5] and cjson.decode(a[5]) or {}
    local key_budgets = (k[7] and cjson.decode(k[7])) or o.key or plan_budget_tables(budgets_at, nbk)
    local account_budgets = o.account or plan_budget_tables(budgets_at + 16 * nbk, nba)
    if #key_budgets + #account_budgets > 0 then
      --@include lib/token-buckets-of.lua
      local stored = redis.call('HMGET', KEYS[1], 'tp:k:' .. ARGV[1], 'tp:a')
      local tk, ta = token_buckets_of(stored[1]), token_buckets_of(stored[2])
      for _, b in ipairs(key_budgets) do
        local s = tk[b.windowSeconds] or {}
        check('key', b.tokens, b.windowSeconds, s[1], s[2], held_kt)
      end
      for _, b in ipairs(account_budgets) do
        local s = ta[b.windowSeconds] or {}
        check('account', b.tokens, b.windowSeconds, s[1], s[2], held_at)
      end
    end
  end
  if x_retry then return {'token_budget_exhausted', prefix, x_scope, x_tokens, x_window, 0, x_reset, x_retry} end
end
