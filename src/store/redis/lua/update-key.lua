-- A JSON patch to a key record; null removes the limits or token budget override, the expiry or the spend cap.
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
return redis.call('HGETALL', KEYS[1])
