-- A JSON patch to a key record; null removes the limits or token budget override, the expiry or the spend cap.
-- KEYS: the key record, its account; ARGV: the patch, the key's bucket field.
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local p = cjson.decode(ARGV[1])
if p.name ~= nil then redis.call('HSET', KEYS[1], 'name', p.name) end
if p.limits == cjson.null then redis.call('HDEL', KEYS[1], 'limits')
elseif p.limits ~= nil then redis.call('HSET', KEYS[1], 'limits', p.limitsJson) end
if p.expiresAt == cjson.null then redis.call('HDEL', KEYS[1], 'expiresAt', 'expiresAtMs')
elseif p.expiresAt ~= nil then redis.call('HSET', KEYS[1], 'expiresAt', p.expiresAt, 'expiresAtMs', p.expiresAtMs) end
if p.tokenBudgets == cjson.null then redis.call('HDEL', KEYS[1], 'tokenBudgets')
elseif p.tokenBudgets ~= nil then redis.call('HSET', KEYS[1], 'tokenBudgets', p.tokenBudgetsJson) end
if p.monthlySpendCap == cjson.null then redis.call('HDEL', KEYS[1], 'monthlySpendCap')
elseif p.monthlySpendCap ~= nil then redis.call('HSET', KEYS[1], 'monthlySpendCap', p.monthlySpendCap) end
-- The text and its stamp together: the authorize script reads only the stamp (redisKeys.restrictionsStampField).
if p.restrictions == cjson.null then redis.call('HDEL', KEYS[1], 'restrictions', 'restrictionsStamp')
elseif p.restrictions ~= nil then redis.call('HSET', KEYS[1], unpack(p.restrictionsFields)) end
-- A cap or budgets given to a key whose holds did not count for it: from now on they do (authorize/held-sums.lua
-- keeps a key's sums only for a key they count for). Which holds in flight are the key's is kept nowhere, so its sums
-- start as the account's: every hold in flight counts against the new cap or budgets until its slot passes, the
-- key's own until its answer releases it. Never fewer than the key's own, so the cap is never overrun by them.
if (p.monthlySpendCap ~= nil and p.monthlySpendCap ~= cjson.null) or (p.tokenBudgets ~= nil and p.tokenBudgets ~= cjson.null) then
  local v = redis.call('HMGET', KEYS[2], 'ra', ARGV[2])
  local av, kv = v[1], v[2]
  if av and #av % 12 == 4 and #av >= 40 and not (kv and #kv % 12 == 4) then
    redis.call('HSET', KEYS[2], ARGV[2], (kv or '') .. string.sub(av, -40))
  end
end
return redis.call('HGETALL', KEYS[1])
