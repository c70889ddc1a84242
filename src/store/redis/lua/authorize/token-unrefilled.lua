-- The tokens of a budget not yet wholly refilled (a token begun counts), into
-- `u`, in a bucket `d` us (+ fraction/tokens) ahead of now, for d under one
-- window: ceil((d * tokens + fraction) / window_us), given `tokens`,
-- `window_s`, `window_us` (declared by the caller). Exact in doubles: when
-- d * tokens + fraction + window_us (the quotient's correction) stays below
-- 2^53, one division; past it (the biggest budgets, debts of days) the
-- product is split (d = d1 s + d0 us). The bound is a division in doubles,
-- within half a unit of the exact one, so 1 below it is always safe.
local x, m
if d < (9007199254740992 - tokens - window_us) / tokens - 1 then
  x = d * tokens + fraction
  u = floor(x / window_us)
  m = x - u * window_us
  if m < 0 then u = u - 1; m = m + window_us elseif m >= window_us then u = u + 1; m = m - window_us end
  if m > 0 then u = u + 1 end
else
  local d1, d0, q1, r1
  d1 = floor(d / 1000000)
  d0 = d - d1 * 1000000
  if d0 < 0 then d1 = d1 - 1; d0 = d0 + 1000000 elseif d0 >= 1000000 then d1 = d1 + 1; d0 = d0 - 1000000 end
  x = d1 * tokens
  q1 = floor(x / window_s)
  r1 = x - q1 * window_s
  if r1 < 0 then q1 = q1 - 1; r1 = r1 + window_s elseif r1 >= window_s then q1 = q1 + 1; r1 = r1 - window_s end
  x = r1 * 1000000 + d0 * tokens + fraction
  u = floor(x / window_us)
  m = x - u * window_us
  if m < 0 then u = u - 1; m = m + window_us elseif m >= window_us then u = u + 1; m = m - window_us end
  u = u + q1
  if m > 0 then u = u + 1 end
end
