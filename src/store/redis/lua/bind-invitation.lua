-- First sign-in with a verified email: the account's invitation for it becomes the identity's membership.
local invite_id = redis.call('HGET', KEYS[2], ARGV[1])
if not invite_id then return {'no_invitation'} end
local invite = redis.call('HGET', KEYS[1], invite_id)
local existing_id = redis.call('HGET', KEYS[2], ARGV[2])
if existing_id then
  redis.call('HDEL', KEYS[1], invite_id)
  redis.call('HDEL', KEYS[2], ARGV[1])
  return {'dropped', invite, redis.call('HGET', KEYS[1], existing_id)}
end
local m = cjson.decode(invite)
m.principal = {kind = 'identity', issuer = ARGV[3], subject = ARGV[4]}
m.joinedAt = ARGV[5]
local bound = cjson.encode(m)
redis.call('HSET', KEYS[1], invite_id, bound)
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2], invite_id)
return {'bound', bound}
