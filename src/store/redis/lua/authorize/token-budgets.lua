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
-- and the account's packed fields, '<I4dI4' per window), each read with one
-- struct.unpack when it holds the plan's windows in order, as the usage
-- script writes them, else found by window. Up to two budgets per scope, the
-- checks are straight-line blocks (budget-check.lua), no closure or call: as
-- a function, called per budget, they cost Redis 25 % more per decision with
-- four budgets. More budgets, and an override in either record, go through
-- the function; an override reads both fields with one more HMGET. A plan
-- without budgets skips all of it unless a record has one.
-- Explicitly nil: none refused yet (each check reads x_retry and b_remaining first).
local x_scope, x_tokens, x_window, x_reset, x_retry = nil, nil, nil, nil, nil
if nbk + nba > 0 or k[7] or a[5] then
  local budgets_at = 5 + 24 * (nk + na)
  if not k[7] and not a[5] and nbk <= 2 and nba <= 2 then
    -- kt, kw: the key's budgets (tokens, window); at, aw the account's. bt, bf: their buckets' TAT and fraction.
    local kt1, kw1, kt2, kw2, at1, aw1, at2, aw2
    local bt1, bf1, bt2, bf2, bt3, bf3, bt4, bf4
    if nbk == 2 then kt1, kw1, kt2, kw2 = struct.unpack('<dddd', P, budgets_at)
    elseif nbk == 1 then kt1, kw1 = struct.unpack('<dd', P, budgets_at) end
    if nba == 2 then at1, aw1, at2, aw2 = struct.unpack('<dddd', P, budgets_at + 16 * nbk)
    elseif nba == 1 then at1, aw1 = struct.unpack('<dd', P, budgets_at + 16 * nbk) end
    do
      local n, tv, pw1, pw2, t1, f1, t2, f2 = nbk, a[10], kw1, kw2, nil, nil, nil, nil
      --@include authorize/stored-token-buckets.lua
      bt1, bf1, bt2, bf2 = t1, f1, t2, f2
    end
    do
      local n, tv, pw1, pw2, t1, f1, t2, f2 = nba, a[11], aw1, aw2, nil, nil, nil, nil
      --@include authorize/stored-token-buckets.lua
      bt3, bf3, bt4, bf4 = t1, f1, t2, f2
    end
    if nbk > 0 then
      do
        local scope, tokens, window_s, tat, fraction, held = 'key', kt1, kw1, bt1, bf1, held_kt
        --@include authorize/budget-check.lua
      end
      if nbk == 2 then
        local scope, tokens, window_s, tat, fraction, held = 'key', kt2, kw2, bt2, bf2, held_kt
        --@include authorize/budget-check.lua
      end
    end
    if nba > 0 then
      do
        local scope, tokens, window_s, tat, fraction, held = 'account', at1, aw1, bt3, bf3, held_at
        --@include authorize/budget-check.lua
      end
      if nba == 2 then
        local scope, tokens, window_s, tat, fraction, held = 'account', at2, aw2, bt4, bf4, held_at
        --@include authorize/budget-check.lua
      end
    end
  else
    local function check(scope, tokens, window_s, tat, fraction, held)
      --@include authorize/budget-check.lua
    end
    --@include authorize/plan-records.lua
    local key_budgets, account_budgets, tk, ta
    if not k[7] and not a[5] then
      -- More than two budgets in a scope: their buckets came with the account HMGET.
      key_budgets = plan_records(budgets_at, nbk, 16, 'tokens', 'windowSeconds')
      account_budgets = plan_records(budgets_at + 16 * nbk, nba, 16, 'tokens', 'windowSeconds')
      --@include lib/token-buckets-of.lua
      tk, ta = token_buckets_of(a[10]), token_buckets_of(a[11])
    else
      local o = a[5] and cjson.decode(a[5]) or {}
      key_budgets = (k[7] and cjson.decode(k[7])) or o.key or plan_records(budgets_at, nbk, 16, 'tokens', 'windowSeconds')
      account_budgets = o.account or plan_records(budgets_at + 16 * nbk, nba, 16, 'tokens', 'windowSeconds')
      if #key_budgets + #account_budgets > 0 then
        --@include lib/token-buckets-of.lua
        local stored = redis.call('HMGET', KEYS[1], 'tp:k:' .. ARGV[1], 'tp:a')
        tk, ta = token_buckets_of(stored[1]), token_buckets_of(stored[2])
      end
    end
    for _, b in ipairs(key_budgets) do
      local s = tk[b.windowSeconds] or {}
      check('key', b.tokens, b.windowSeconds, s[1], s[2], held_kt)
    end
    for _, b in ipairs(account_budgets) do
      local s = ta[b.windowSeconds] or {}
      check('account', b.tokens, b.windowSeconds, s[1], s[2], held_at)
    end
  end
  if x_retry then return {'token_budget_exhausted', prefix, x_scope, x_tokens, x_window, 0, x_reset, x_retry} end
end
