--@include lib/outbox.lua
-- A member (or invitation) joins an account once per principal, within the member limit.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'account_not_found'} end
local existing = redis.call('HGET', KEYS[3], ARGV[2])
if existing then
  local kind = 'already_member'
  if existing == ARGV[1] then kind = 'added' end
  return {kind, redis.call('HGET', KEYS[2], existing)}
end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[4]) then return {'member_limit_reached', ARGV[4]} end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[1])
append_events(KEYS[4], KEYS[5], ARGV[5])
return {'added', ARGV[3]}
