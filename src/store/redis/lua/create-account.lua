-- Create-if-absent in one step so two admins racing on one id cannot overwrite each other.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
