-- release_hold(account, holds, request_id): the hold of the metered answer's
-- request id taken off its account (the sums beside it down by its amounts,
-- a key's zero sums deleted), in the same step as the debit. A hold that
-- lapsed before the answer came is gone already: nothing to take. The last
-- hold in flight takes the holds hash with it, so the next hold starts it
-- again (authorize/held-sums.lua). `account` is not written: nothing of a
-- hold is in the account hash. Holds are laid out as redisKeys.holds says:
-- '<checkUs>:<m>:<t>:<km>:<kt>:<keyId>'; the sums are the holds hash's
-- '\001sums' (struct '<dddd', PACKED_HOLD_SUMS_STRUCT: prune time, count,
-- minor units, tokens; 32 bytes) and '\001key:<keyId>' ('<dd',
-- PACKED_KEY_HOLD_SUMS_STRUCT; 16 bytes).
local function release_hold(account, holds, request_id) -- luacheck: no unused args
  local held = redis.call('HGET', holds, request_id)
  if not held then return end
  local m, t, km, kt, id = string.match(held, '^%d+:(%d+):(%d+):(%d+):(%d+):(.+)$')
  local sums = redis.call('HGET', holds, '\001sums')
  if not m or not sums or #sums ~= 32 then
    redis.call('HDEL', holds, request_id)
    return
  end
  local prune_at, count, held_m, held_t = struct.unpack('<dddd', sums)
  if count <= 1 then
    redis.call('DEL', holds)
    return
  end
  redis.call('HDEL', holds, request_id)
  redis.call('HSET', holds, '\001sums', struct.pack('<dddd', prune_at, count - 1, math.max(held_m - m, 0), math.max(held_t - t, 0)))
  if km ~= '0' or kt ~= '0' then
    local f = '\001key:' .. id
    local key_sums = redis.call('HGET', holds, f)
    if key_sums and #key_sums == 16 then
      local key_m, key_t = struct.unpack('<dd', key_sums)
      key_m, key_t = math.max(key_m - km, 0), math.max(key_t - kt, 0)
      if key_m > 0 or key_t > 0 then redis.call('HSET', holds, f, struct.pack('<dd', key_m, key_t))
      else redis.call('HDEL', holds, f) end
    end
  end
end
