-- An allowed decision places its hold: `hw`, the writes of the account hash
-- the script's HSET takes, gets the sums with it (held-sums.lua), and the
-- holds hash the hold itself: its Check time, what of it counts (for the
-- account only, A, for the key too, K, or nothing, -: money, then tokens),
-- the key's id and the hold argument as it came (`<minorUnits> <tokens>
-- <requestId>`), joined by spaces. One concatenation of strings the script
-- has (packing the numbers measured 1.5k more instructions a decision). A
-- request id in flight already is a repeated Check: HSETNX leaves its first
-- hold, which was counted in the sums it was judged against, and the sums
-- stay. The first hold in flight starts the holds hash as a hashtable
-- (redisKeys.hashtableMarkerField) and the prune time at its own lapse
-- (HOLD_LIFETIME_US); no other hold is there to repeat. The writes are a
-- table constructor, sized at once (assignments grew the table step by step:
-- 0.9k more instructions).
local hw = {}
if holding then
  local hold = ARGV[2] .. ' ' .. (hold_m > 0 and (key_m > 0 and 'K' or 'A') or '-') ..
    (hold_t > 0 and (key_t > 0 and 'K' or 'A') or '-') .. ' ' .. ARGV[1] .. ' ' .. hold_arg
  local placed
  if prune_at then
    placed = redis.call('HSETNX', KEYS[3], hold_id, hold) == 1
  else
    held_count, prune_at, placed = 0, now + 720000000, true
    redis.call('HSET', KEYS[3], hold_id, hold, '', 'keeps this hash a hashtable: longer than the 64 bytes of hash-max-listpack-value')
  end
  if placed then
    local sums = struct.pack('<dddd', prune_at, held_count + 1, held_am + hold_m, held_at + hold_t)
    if key_m > 0 or key_t > 0 then hw = {'hs', sums, key_holds, struct.pack('<dd', held_km + key_m, held_kt + key_t)}
    else hw = {'hs', sums} end
  end
end
