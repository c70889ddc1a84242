-- A JSON patch to the account; null removes creditBalance, a limits or token budget scope, or the spend cap.
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local p = cjson.decode(ARGV[1])
if p.name ~= nil then redis.call('HSET', KEYS[1], 'name', p.name) end
if p.status ~= nil then redis.call('HSET', KEYS[1], 'status', p.status) end
if p.maxActiveKeys == cjson.null then redis.call('HDEL', KEYS[1], 'maxActiveKeys')
elseif p.maxActiveKeys ~= nil then redis.call('HSET', KEYS[1], 'maxActiveKeys', p.maxActiveKeys) end
if p.creditBalance == cjson.null then redis.call('HDEL', KEYS[1], 'creditBalance')
elseif p.creditBalance ~= nil then redis.call('HSET', KEYS[1], 'creditBalance', p.creditBalance) end
-- Each scope of a JSON field replaced, or removed by null; the field deleted once no scope is left.
local function patch_scopes(field, patch)
  local current = redis.call('HGET', KEYS[1], field)
  local scopes = {}
  if current then scopes = cjson.decode(current) end
  for _, scope in ipairs({'key', 'account'}) do
    if patch[scope] == cjson.null then scopes[scope] = nil
    elseif patch[scope] ~= nil then scopes[scope] = patch[scope] end
  end
  if next(scopes) == nil then redis.call('HDEL', KEYS[1], field)
  else redis.call('HSET', KEYS[1], field, cjson.encode(scopes)) end
end
if p.limits ~= nil then patch_scopes('limits', p.limits) end
if p.tokenBudgets ~= nil then patch_scopes('tokenBudgets', p.tokenBudgets) end
if p.monthlySpendCap == cjson.null then redis.call('HDEL', KEYS[1], 'monthlySpendCap')
elseif p.monthlySpendCap ~= nil then redis.call('HSET', KEYS[1], 'monthlySpendCap', p.monthlySpendCap) end
-- The text and its stamp together: the authorize script reads only the stamp (redisKeys.restrictionsStampField).
if p.keyRestrictions == cjson.null then redis.call('HDEL', KEYS[1], 'restrictions', 'restrictionsStamp')
elseif p.keyRestrictions ~= nil then redis.call('HSET', KEYS[1], unpack(p.restrictionsFields)) end
if p.exposedKeyAction == cjson.null then redis.call('HDEL', KEYS[1], 'exposedKeyAction')
elseif p.exposedKeyAction ~= nil then redis.call('HSET', KEYS[1], 'exposedKeyAction', p.exposedKeyAction) end
return redis.call('HGETALL', KEYS[1])
