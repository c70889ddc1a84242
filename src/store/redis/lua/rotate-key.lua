--@include lib/iso8601.lua
--@include lib/active-keys.lua
--@include lib/outbox.lua
-- Rotation in one step under the account's tag (see gwaRotateKey in scripts.ts).
local old = redis.call('HMGET', KEYS[1], 'status', 'replacedBy', 'expiresAtMs', 'revokeAtMs', 'id')
if not old[1] then return {'key_not_found'} end
local old_id = old[5]
if old[2] == ARGV[5] and redis.call('EXISTS', KEYS[2]) == 1 then
  return {'rotated', redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
end
local now = now_ms(ARGV[1])
if old[1] == 'revoked' or (old[4] and tonumber(old[4]) <= now) then return {'key_revoked'} end
if old[2] then return {'key_already_rotated', old[2]} end
if old[3] and tonumber(old[3]) <= now then return {'key_expired'} end
local grace = tonumber(ARGV[2])
if grace > 0 then
  local counted = counted_toward_cap(KEYS[4], KEYS[5], ARGV[4], now)
  if counted == nil then return {'active_keys_not_indexed'} end
  local cap = cap_of(KEYS[4], ARGV[3])
  if not cap then return {'cap_unreadable'} end
  if counted > cap then return {'active_key_cap_reached', tostring(cap), tostring(counted)} end
end
if grace == 0 then
  redis.call('HSET', KEYS[1], 'status', 'revoked', 'revokedAt', iso8601(now))
  redis.call('ZREM', KEYS[5], old_id)
else
  redis.call('HSET', KEYS[1], 'revokeAt', iso8601(now + grace), 'revokeAtMs', string.format('%.0f', now + grace))
  redis.call('ZADD', KEYS[5], string.format('%.0f', now + grace), old_id)
end
redis.call('HSET', KEYS[1], 'replacedBy', ARGV[5])
redis.call('HSET', KEYS[2], unpack(ARGV, 7))
redis.call('SADD', KEYS[3], ARGV[5])
redis.call('ZADD', KEYS[5], '+inf', ARGV[5])
append_events(KEYS[6], KEYS[7], ARGV[6])
return {'rotated', redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
