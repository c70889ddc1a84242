--@include lib/outbox.lua
-- One attempt's outcome (see gwaWebhookSettle in scripts.ts).
-- KEYS: deliveries, due, endpoints, endpointState, log, outbox.
-- ARGV: deliveryId, endpointId, settlement ('delivered', 'retry', 'given_up'), retryAtMs, nextDeliveryJson, attemptJson,
--       logMaxEntries, disableAfterFailures, disabledReason, disabledEventsJson.
if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 0 then return 0 end
redis.call('LPUSH', KEYS[5], ARGV[6])
redis.call('LTRIM', KEYS[5], 0, tonumber(ARGV[7]) - 1)
if ARGV[3] == 'retry' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[5])
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
else
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
end
if ARGV[3] == 'delivered' then
  redis.call('HDEL', KEYS[4], 'failures:' .. ARGV[2])
  return 0
end
local failures = redis.call('HINCRBY', KEYS[4], 'failures:' .. ARGV[2], 1)
if failures < tonumber(ARGV[8]) or redis.call('HEXISTS', KEYS[4], 'disabled:' .. ARGV[2]) == 1 then return 0 end
redis.call('HSET', KEYS[4], 'disabled:' .. ARGV[2], ARGV[9])
-- Not tried again: enabling the endpoint later starts from the next event, not from this one's schedule.
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
append_events(KEYS[6], KEYS[3], ARGV[10])
return 1
