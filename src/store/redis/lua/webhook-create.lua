-- A new endpoint, within the account's limit counted in the same step; the same creation repeated changes nothing.
-- KEYS: account, endpoints. ARGV: endpointId, configJson, maxEndpoints.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'account_not_found'} end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return {'created'} end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[3]) then return {'endpoint_limit_reached', ARGV[3]} end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return {'created'}
