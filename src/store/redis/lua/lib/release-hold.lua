--@include lib/hold-record.lua
-- release_hold(account, holds, request_id): the hold of the metered answer's
-- request id taken off its account (the account's sums down by its amounts,
-- and its key's where it counted for the key; a key's zero sums deleted), in
-- the same step as the debit. A hold that lapsed before the answer came is
-- gone already: nothing to take. The last hold in flight takes the holds
-- hash and the sums with it, so the next hold starts them again
-- (authorize/place-hold.lua). The sums are the account hash's 'hs' ('<dddd',
-- PACKED_HOLD_SUMS_STRUCT: prune time, count, minor units, tokens) and
-- 'hk:<keyId>' ('<dd', PACKED_KEY_HOLD_SUMS_STRUCT). A hold of another layout
-- counted for nothing: it is only deleted.
local function release_hold(account, holds, request_id)
  local held = redis.call('HGET', holds, request_id)
  if not held then return end
  local at, m, t, km, kt, id = hold_record(held)
  if at then
    local key_field
    if km > 0 or kt > 0 then key_field = 'hk:' .. id end
    -- Without a key's field, 'hs' stands in for it: one command either way.
    local s = redis.call('HMGET', account, 'hs', key_field or 'hs')
    local sums = s[1]
    if sums and #sums == 32 then
      local prune_at, count, held_m, held_t = struct.unpack('<dddd', sums)
      if count <= 1 then
        redis.call('DEL', holds)
        redis.call('HDEL', account, 'hs', key_field or 'hs')
        return
      end
      local writes = {'hs', struct.pack('<dddd', prune_at, count - 1, math.max(held_m - m, 0), math.max(held_t - t, 0))}
      local key_sums = key_field and s[2]
      if key_sums and #key_sums == 16 then
        local key_m, key_t = struct.unpack('<dd', key_sums)
        key_m, key_t = math.max(key_m - km, 0), math.max(key_t - kt, 0)
        if key_m > 0 or key_t > 0 then writes[3], writes[4] = key_field, struct.pack('<dd', key_m, key_t)
        else redis.call('HDEL', account, key_field) end
      end
      redis.call('HSET', account, unpack(writes))
    end
  end
  redis.call('HDEL', holds, request_id)
end
