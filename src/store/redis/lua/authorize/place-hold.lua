-- An allowed decision places its hold (`hw`, the account hash's writes the
-- script's HSET takes, stays empty: nothing of a hold is there). Unless the
-- request id is in flight already (a repeated Check holds once; its first
-- hold was already counted in the sums it was judged against), one HSET of
-- the holds hash writes it with its Check time and amounts as ARGV wrote
-- them (a Lua number may print with an exponent), and the sums it adds
-- (held-sums.lua). The first hold in flight starts the holds hash as a
-- hashtable (redisKeys.holdsHashtableField) and the prune time at its own
-- lapse (HOLD_LIFETIME_US).
local hw = {}
if holding and not held_before then
  if not prune_at then
    held_count = 0
    prune_at = now + 660000000
    redis.call('HSET', KEYS[3], '', 'keeps this hash a hashtable: longer than the 64 bytes of hash-max-listpack-value')
  end
  local value = ARGV[2] .. ':' .. (hold_m > 0 and hold_ms or '0') .. ':' .. (hold_t > 0 and hold_ts or '0') .. ':' ..
    (key_m > 0 and hold_ms or '0') .. ':' .. (key_t > 0 and hold_ts or '0') .. ':' .. ARGV[1]
  local sums = struct.pack('<dddd', prune_at, held_count + 1, held_am + hold_m, held_at + hold_t)
  if key_m > 0 or key_t > 0 then
    redis.call('HSET', KEYS[3], hold_id, value, '\001sums', sums,
      '\001key:' .. ARGV[1], struct.pack('<dd', held_km + key_m, held_kt + key_t))
  else
    redis.call('HSET', KEYS[3], hold_id, value, '\001sums', sums)
  end
end
