-- A change's webhook events (a JSON array of {id, type, payload[, endpointId]}, src/webhooks/webhook-events.ts) go to
-- the account's outbox in the same step as the change: a crash after the step loses neither, one before it keeps neither.
-- An account with no endpoint (its endpoints hash, in the same slot, absent) gets none: nothing would receive them, and
-- an endpoint added later starts from the events after it (docs/concepts/webhooks.md).
local function append_events(outbox, endpoints, events_json)
  if events_json == '' or events_json == '[]' or redis.call('EXISTS', endpoints) == 0 then return end
  for _, event in ipairs(cjson.decode(events_json)) do
    local target = event.endpointId
    if type(target) ~= 'string' then target = '' end
    redis.call('XADD', outbox, '*', 'id', event.id, 'type', event.type, 'payload', event.payload, 'endpoint', target)
  end
end
