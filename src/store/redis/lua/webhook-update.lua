-- An endpoint's new configuration, written only over the one it was made from (the caller reads again on 'conflict').
-- KEYS: endpoints, endpointState. ARGV: endpointId, readJson, newJson, enabled ('', 'enable', 'disable'), disabledReason.
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return 'not_found' end
if current ~= ARGV[2] then return 'conflict' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
if ARGV[4] == 'enable' then redis.call('HDEL', KEYS[2], 'disabled:' .. ARGV[1], 'failures:' .. ARGV[1]) end
if ARGV[4] == 'disable' then redis.call('HSET', KEYS[2], 'disabled:' .. ARGV[1], ARGV[5]) end
return 'changed'
