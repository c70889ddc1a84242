-- Revokes a key from the next request on; keeps the first revocation time. A revoked key no longer counts toward the cap.
--@include lib/outbox.lua
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if redis.call('HGET', KEYS[1], 'status') ~= 'revoked' then append_events(KEYS[3], KEYS[4], ARGV[3]) end
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('HSET', KEYS[1], 'status', 'revoked')
redis.call('HSETNX', KEYS[1], 'revokedAt', ARGV[1])
return redis.call('HGETALL', KEYS[1])
