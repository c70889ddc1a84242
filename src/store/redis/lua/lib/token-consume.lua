-- Token budget buckets, exact in doubles (mirrors src/accounts/limits/token-budget.ts,
-- which uses BigInt; a test holds the two equal). A bucket is its TAT in us
-- and the TAT's fraction of a us as a numerator over the budget's tokens.
-- Budgets are at most 10^9 tokens and 10^6 tokens per second over a window
-- of at most 31 days, so every product below stays under 2^53. After
-- lib/divmod.lua.
-- - tb_consume(tat, fraction, now, n, tokens, window_s): the bucket's TAT and
--   fraction after using n tokens at `now` (us); tat nil for no bucket;
-- - tb_exhausted(tat, fraction, now, tokens, window_s): whether not one whole
--   token is left (tokenBudgetState's remaining 0, what the Check refuses on);
-- - tb_pack(first, rest, now): a field's value, the buckets of `first`
--   ({window, tat, fraction}, in order) then those of `rest` (as
--   token_buckets_of makes them) still ahead of now, by window.
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
-- Exhausted when the debt, (tat − now)·tokens + fraction in 1/tokens µs, passes
-- (tokens − 1) windows' worth: with e = window µs − (tat − now), when e·tokens <
-- window µs + fraction, i.e. e ≤ ⌊(window µs + fraction − 1) / tokens⌋, a
-- division instead of a product that may pass 2^53.
local function tb_exhausted(tat, fraction, now, tokens, window_s)
  if not tat or tat < now then return false end
  if fraction >= tokens then fraction = 0 end
  local window_us = window_s * 1000000
  local e = window_us - (tat - now)
  if e <= 0 then return true end
  local q = divmod(window_us + fraction - 1, tokens)
  return e <= q
end
local function tb_pack(first, rest, now)
  local parts, windows = {}, {}
  for i, b in ipairs(first) do parts[i] = struct.pack('<I4dI4', b[1], b[2], b[3]) end
  for w, b in pairs(rest) do if b[1] >= now then windows[#windows + 1] = w end end
  table.sort(windows)
  for _, w in ipairs(windows) do parts[#parts + 1] = struct.pack('<I4dI4', w, rest[w][1], rest[w][2]) end
  return table.concat(parts)
end
