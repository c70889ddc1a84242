--@include lib/acting-owners.lua
--@include lib/outbox.lua
-- Removes a member (or invitation) and its principal entry, under the last-owner rule.
local json = redis.call('HGET', KEYS[1], ARGV[1])
if not json then return {'member_not_found'} end
if leaves_no_owner(KEYS[1], cjson.decode(json)) then return {'last_owner'} end
redis.call('HDEL', KEYS[1], ARGV[1])
append_events(KEYS[3], KEYS[4], ARGV[2])
local principals = redis.call('HGETALL', KEYS[2])
for i = 1, #principals, 2 do
  if principals[i + 1] == ARGV[1] then redis.call('HDEL', KEYS[2], principals[i]) end
end
return {'changed', json}
