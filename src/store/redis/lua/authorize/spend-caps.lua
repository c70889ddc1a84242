-- The monthly spend caps, after billing, given `now`, `k` and `a` (caps in
-- k[8] and a[6]). The month's spend fields are named by the month
-- (redisKeys.accountSpendField, keySpendField), so the script names it from
-- its own clock, the one every decision of every replica uses (Redis's clock
-- as RedisClock carries it, or the tests' override): a decision at
-- 00:00:00.001 on the 1st (UTC) reads the new month everywhere at once.
-- gwaApplyUsage counts a record in the month the answer ended
-- (usageMonthOf(record.atMs)), the same UTC calendar. Only an account or key
-- with a cap pays for it: the civil date (as lib/iso8601.lua) and one more
-- HMGET. The key's spend field is named from its id, ARGV[1]. The holds in
-- flight (held-sums.lua) and this request's count as spent: the cap must
-- cover them all.
if k[8] or a[6] then
  local z = floor(now / 86400000000) + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400
  if month <= 2 then year = year + 1 end
  month = string.format('%04d-%02d', year, month)
  local spent = redis.call('HMGET', KEYS[1], 'sp:a:' .. month, 'sp:k:' .. ARGV[1] .. ':' .. month)
  local key_spent, account_spent = tonumber(spent[2]) or 0, tonumber(spent[1]) or 0
  if k[8] and (key_spent >= tonumber(k[8]) or key_spent + held_km + hold_m > tonumber(k[8])) then
    return {'budget_exceeded', prefix, 'key', k[8]}
  end
  if a[6] and (account_spent >= tonumber(a[6]) or account_spent + held_am + hold_m > tonumber(a[6])) then
    return {'budget_exceeded', prefix, 'account', a[6]}
  end
end
