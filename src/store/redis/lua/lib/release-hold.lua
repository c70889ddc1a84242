-- release_hold(account, key_field, hold, marker, marker_ttl_ms): a metered
-- (or let go) answer's hold taken off the sums it was added to, the
-- account's and its key's (authorize/held-sums.lua: 40 bytes at the end of
-- the bucket fields 'ra' and key_field, 'rk:<keyId>'), in the same step as
-- the debit. `hold` is what its Check placed, `<slot> <minorUnits>
-- <tokens>` (HOLD_HEADER, formatPlacedHold), '' for none. The request's
-- marker makes it happen once whatever repeats the call (a command resent
-- after a lost reply, an answer released and then metered): a second
-- release would take another hold's amounts. A hold whose slot has passed
-- is gone already; a sum never goes below 0.
local function release_hold(account, key_field, hold, marker, marker_ttl_ms)
  local slot, m, t = string.match(hold or '', '^(%d+) (%d+) (%d+)$')
  if not slot then return end
  slot, m, t = tonumber(slot), tonumber(m), tonumber(t)
  if m + t == 0 or not redis.call('SET', marker, '1', 'NX', 'PX', marker_ttl_ms) then return end
  local max = math.max
  local function released(v)
    if not v or #v % 12 ~= 4 or #v < 40 then return end
    local s, m0, t0, m1, t1 = struct.unpack('<ddddd', v, #v - 39)
    local i = s - slot
    if i == 0 then m0, t0 = max(m0 - m, 0), max(t0 - t, 0)
    elseif i == 1 then m1, t1 = max(m1 - m, 0), max(t1 - t, 0)
    else return end
    return string.sub(v, 1, #v - 40) .. struct.pack('<ddddd', s, m0, t0, m1, t1)
  end
  local v = redis.call('HMGET', account, 'ra', key_field)
  local a_new, k_new = released(v[1]), released(v[2])
  if a_new and k_new then redis.call('HSET', account, 'ra', a_new, key_field, k_new)
  elseif a_new then redis.call('HSET', account, 'ra', a_new)
  elseif k_new then redis.call('HSET', account, key_field, k_new) end
end
