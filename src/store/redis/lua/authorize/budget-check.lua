-- One token budget checked against its bucket, given `scope`, `tokens`,
-- `window_s`, the bucket's `tat` and `fraction` (nil for no bucket), the
-- tokens `held` by answers in flight, and `now`: refused (x_*) when not one
-- whole token is available, or none is left beyond those held (no time to
-- wait for then but theirs: retry 0), keeping the budget that keeps the
-- caller waiting longest; otherwise b_* becomes this budget if it has the
-- fewest tokens left so far (the first on a tie). Straight-line code on
-- locals: the authorize script includes it once per budget of the plan's
-- common shapes, and once in a function for the rest.
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
    local q = floor(window_us / tokens)
    local r = window_us - q * tokens
    if r < 0 then q = q - 1; r = r + tokens elseif r >= tokens then q = q + 1; r = r - tokens end
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
