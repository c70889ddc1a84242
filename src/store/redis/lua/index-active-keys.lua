-- A batch of an account's key records added to its active keys; with the last batch, the set marked complete.
if redis.call('EXISTS', KEYS[1]) == 0 then return 'indexed' end
for i = 3, #KEYS do
  local k = redis.call('HMGET', KEYS[i], 'status', 'revokeAtMs', 'id')
  if k[1] == 'active' and k[3] then redis.call('ZADD', KEYS[2], k[2] or '+inf', k[3]) end
end
if ARGV[2] == '1' then redis.call('HSET', KEYS[1], ARGV[1], '1') end
return 'indexed'
