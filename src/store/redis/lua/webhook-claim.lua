-- Fans the account's webhook outbox out into deliveries, then leases the due ones (see gwaWebhookClaim in scripts.ts).
-- KEYS: outbox, endpoints, endpointState, deliveries, due. ARGV: nowMs, leaseMs, max, fanOutBatch.
local now = tonumber(ARGV[1])
local entries = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', tonumber(ARGV[4]))
if #entries > 0 then
  local endpoints = {}
  local all = redis.call('HGETALL', KEYS[2])
  for i = 1, #all, 2 do
    local config = cjson.decode(all[i + 1])
    local receives = {}
    for _, event_type in ipairs(config.events) do receives[event_type] = true end
    endpoints[all[i]] = { enabled = redis.call('HEXISTS', KEYS[3], 'disabled:' .. all[i]) == 0, receives = receives }
  end
  for _, entry in ipairs(entries) do
    local f = {}
    for i = 1, #entry[2], 2 do f[entry[2][i]] = entry[2][i + 1] end
    for id, endpoint in pairs(endpoints) do
      local receives = f.endpoint == id or (f.endpoint == '' and endpoint.enabled and endpoint.receives[f.type])
      if receives then
        local delivery = f.id .. ':' .. id
        local json = cjson.encode({ eventId = f.id, type = f.type, payload = f.payload, endpointId = id, attempts = 0 })
        redis.call('HSET', KEYS[4], delivery, json)
        redis.call('ZADD', KEYS[5], now, delivery)
      end
    end
    redis.call('XDEL', KEYS[1], entry[1])
  end
end
local claimed = {}
for _, delivery in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))) do
  local json = redis.call('HGET', KEYS[4], delivery)
  local endpoint_id = json and cjson.decode(json).endpointId
  local config = endpoint_id and redis.call('HGET', KEYS[2], endpoint_id)
  if config and redis.call('HEXISTS', KEYS[3], 'disabled:' .. endpoint_id) == 0 then
    redis.call('ZADD', KEYS[5], now + tonumber(ARGV[2]), delivery)
    local failures = redis.call('HGET', KEYS[3], 'failures:' .. endpoint_id) or '0'
    claimed[#claimed + 1] = { delivery, json, config, failures }
  else
    -- Its endpoint was deleted or disabled since: nothing is sent to it.
    redis.call('HDEL', KEYS[4], delivery)
    redis.call('ZREM', KEYS[5], delivery)
  end
end
if #claimed == 0 and redis.call('ZCARD', KEYS[5]) == 0 and redis.call('XLEN', KEYS[1]) == 0 then return 'idle' end
return claimed
