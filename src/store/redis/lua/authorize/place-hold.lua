-- An allowed decision places its hold, into `hw` (account hash fields and
-- values to write, empty when none): the request id joins the holds hash
-- with its deadline and amounts (HSETNX: a repeated Check of the same
-- request id holds once; its first hold was already counted in the sums it
-- was judged against), and the sums it adds to go into the account hash
-- with the decision's other writes.
local hw = {}
-- The first hold makes the holds hash a hashtable (redisKeys.holdsHashtableField).
if holding and not prune_at then
  redis.call('HSET', KEYS[3], '', 'keeps this hash a hashtable: longer than the 64 bytes of hash-max-listpack-value')
end
-- The amounts as ARGV wrote them: a Lua number may print with an exponent.
if holding and redis.call('HSETNX', KEYS[3], ARGV[5], ARGV[6] .. ' ' .. ARGV[1] .. ' ' .. (hold_m > 0 and ARGV[3] or '0') .. ' ' ..
    (hold_t > 0 and ARGV[4] or '0') .. ' ' .. (key_m > 0 and ARGV[3] or '0') .. ' ' .. (key_t > 0 and ARGV[4] or '0')) == 1 then
  local fmt = string.format
  if not prune_at then hw[1] = 'holdPruneAtUs'; hw[2] = ARGV[6] end
  if hold_m > 0 then hw[#hw + 1] = 'hm'; hw[#hw + 1] = fmt('%.0f', held_am + hold_m) end
  if hold_t > 0 then hw[#hw + 1] = 'ht'; hw[#hw + 1] = fmt('%.0f', held_at + hold_t) end
  if key_m > 0 then hw[#hw + 1] = 'hm:' .. ARGV[1]; hw[#hw + 1] = fmt('%.0f', held_km + key_m) end
  if key_t > 0 then hw[#hw + 1] = 'ht:' .. ARGV[1]; hw[#hw + 1] = fmt('%.0f', held_kt + key_t) end
end
