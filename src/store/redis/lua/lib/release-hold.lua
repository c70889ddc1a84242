-- release_hold(account, holds, request_id): the hold of the metered answer's
-- request id taken off its account (its sums down by its amounts, zero sums
-- deleted), in the same step as the debit. A hold that lapsed before the
-- answer came is gone already: nothing to take. Holds are laid out as
-- redisKeys.holds says: '<deadlineUs> <keyId> <m> <t> <km> <kt>'; the sums
-- are the account hash's hm, ht, hm:<keyId> and ht:<keyId>.
local function release_hold(account, holds, request_id)
  local held = redis.call('HGET', holds, request_id)
  if not held then return end
  redis.call('HDEL', holds, request_id)
  -- Only the hashtable marker left: the hash goes with the prune time, and the next hold starts both again.
  if redis.call('HLEN', holds) == 1 and redis.call('HEXISTS', holds, '') == 1 then
    redis.call('DEL', holds)
    redis.call('HDEL', account, 'holdPruneAtUs')
  end
  local id, m, t, km, kt = string.match(held, '^%d+ (%S+) (%d+) (%d+) (%d+) (%d+)$')
  if not id then return end
  for f, n in pairs({hm = m, ht = t, ['hm:' .. id] = km, ['ht:' .. id] = kt}) do
    if n ~= '0' and redis.call('HINCRBY', account, f, '-' .. n) <= 0 then redis.call('HDEL', account, f) end
  end
end
