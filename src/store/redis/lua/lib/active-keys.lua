-- The store's "now" in ms (an override from the tests, else Redis TIME), and
-- the count of an account's keys toward its active-key cap
-- (src/keys/active-key-cap.ts countsTowardCap). The account's activeKeys
-- sorted set holds every key that is not revoked, scored by when it stops
-- counting (the end of a rotation grace period, else +inf), so the count is
-- one ZCOUNT however many keys the account ever had. A field of the account
-- hash (redisKeys.activeKeysIndexedField, passed in ARGV) says the set is
-- complete; nil means it has not been built yet for this account (keys
-- created before the cap existed): the store builds it (gwaIndexActiveKeys)
-- and retries.
local function now_ms(override)
  if override ~= '' then return tonumber(override) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function counted_toward_cap(account, active_keys, indexed_field, now)
  if redis.call('HEXISTS', account, indexed_field) == 0 then return nil end
  local now_text = string.format('%.0f', now)
  redis.call('ZREMRANGEBYSCORE', active_keys, '-inf', now_text)
  return redis.call('ZCOUNT', active_keys, '(' .. now_text, '+inf')
end
local function cap_of(account, default)
  local own = redis.call('HGET', account, 'maxActiveKeys')
  if own then return tonumber(own) end
  return tonumber(default)
end
