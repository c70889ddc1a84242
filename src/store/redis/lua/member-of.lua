-- The member with a principal, in one round trip (principal -> id -> record).
local id = redis.call('HGET', KEYS[2], ARGV[1])
if not id then return false end
return redis.call('HGET', KEYS[1], id)
