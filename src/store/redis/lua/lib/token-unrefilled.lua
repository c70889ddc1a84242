-- tb_unrefilled(d, fraction, tokens, window_s): the tokens not yet wholly
-- refilled (a token begun counts) in a bucket d us (+ fraction/tokens) ahead
-- of now, for d under one window: ceil((d * tokens + fraction) / W us). The
-- product passes 2^53 for the biggest budgets, so past the bound where it
-- can it is split (d = d1 s + d0 us); small debts, the common case, take one
-- division. After lib/divmod.lua.
local function tb_unrefilled(d, fraction, tokens, window_s)
  local window_us = window_s * 1000000
  local u, m
  -- d below this keeps d * tokens + fraction + window_us (the quotient's correction) below 2^53.
  if d < math.floor((9007199254740992 - tokens - window_us) / tokens) then
    u, m = divmod(d * tokens + fraction, window_us)
  else
    local d1, d0 = divmod(d, 1000000)
    local q1, r1 = divmod(d1 * tokens, window_s)
    u, m = divmod(r1 * 1000000 + d0 * tokens + fraction, window_us)
    u = u + q1
  end
  if m > 0 then u = u + 1 end
  return u
end
