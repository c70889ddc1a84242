-- One usage record appended to the billing stream, exactly once per account and request id.
local first = redis.call('GET', KEYS[2])
if first then return {'duplicate', first} end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3))
redis.call('SET', KEYS[2], id, 'PX', ARGV[1])
return {'appended', id}
