--@include lib/active-keys.lua
--@include lib/outbox.lua
if redis.call('EXISTS', KEYS[1]) == 0 then return {'account_not_found'} end
if redis.call('EXISTS', KEYS[2]) == 1 then return {'created'} end
local counted = counted_toward_cap(KEYS[1], KEYS[4], ARGV[3], now_ms(ARGV[1]))
if counted == nil then return {'active_keys_not_indexed'} end
local cap = cap_of(KEYS[1], ARGV[2])
if not cap then return {'cap_unreadable'} end
if counted >= cap then return {'active_key_cap_reached', tostring(cap), tostring(counted)} end
redis.call('HSET', KEYS[2], unpack(ARGV, 6))
redis.call('SADD', KEYS[3], ARGV[4])
redis.call('ZADD', KEYS[4], '+inf', ARGV[4])
append_events(KEYS[5], KEYS[6], ARGV[5])
return {'created'}
