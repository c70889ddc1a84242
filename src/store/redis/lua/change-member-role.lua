--@include lib/acting-owners.lua
-- A role change under the last-owner rule, checked in the same step.
local json = redis.call('HGET', KEYS[1], ARGV[1])
if not json then return {'member_not_found'} end
local m = cjson.decode(json)
if m.role == ARGV[2] then return {'changed', json} end
if leaves_no_owner(KEYS[1], m) then return {'last_owner'} end
m.role = ARGV[2]
local updated = cjson.encode(m)
redis.call('HSET', KEYS[1], ARGV[1], updated)
return {'changed', updated}
