-- A JSON patch to a key record; null removes the limits or token budget override, the expiry or the spend cap.
-- KEYS: the key record, its account, the account's holds; ARGV: the patch, the key's id.
--@include lib/hold-record.lua
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
-- A cap or budgets given to the key: its holds in flight count for it from now on, as if it had had them when they
-- were placed (authorize/held-sums.lua keeps a key's sums only for a key with a cap or budgets, and marks each hold
-- K that counts for its key). Each of this key's holds that held money or tokens is marked K, and the key's sums are
-- made afresh from them; the next prune drops the lapsed ones with the rest.
if (p.monthlySpendCap ~= nil and p.monthlySpendCap ~= cjson.null) or (p.tokenBudgets ~= nil and p.tokenBudgets ~= cjson.null) then
  local all, writes, key_m, key_t = redis.call('HGETALL', KEYS[3]), {}, 0, 0
  for i = 1, #all, 2 do
    local v = all[i + 1]
    if all[i] ~= '' then
      local at, m, t, _, _, id = hold_record(v)
      if at and id == ARGV[2] and (m > 0 or t > 0) then
        key_m, key_t = key_m + m, key_t + t
        local money, tokens, rest = string.match(v, '^%d+ ([-AK])([-AK]) (.*)$')
        local marked = string.match(v, '^%d+') .. ' ' .. (money == '-' and '-' or 'K') .. (tokens == '-' and '-' or 'K') .. ' ' .. rest
        if marked ~= v then
          writes[#writes + 1] = all[i]
          writes[#writes + 1] = marked
        end
      end
    end
  end
  if #writes > 0 then redis.call('HSET', KEYS[3], unpack(writes)) end
  if key_m > 0 or key_t > 0 then redis.call('HSET', KEYS[2], 'hk:' .. ARGV[2], struct.pack('<dd', key_m, key_t)) end
end
return redis.call('HGETALL', KEYS[1])
