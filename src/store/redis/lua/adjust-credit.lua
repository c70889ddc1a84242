-- Adds credit atomically (see gwaAdjustCredit in scripts.ts): a post-paid
-- account (no balance) is refused, and so is a result outside +-limit,
-- before anything is written; with an idempotency key (KEYS[2]) the marker
-- is written in the same step as the outcome.
local marker = KEYS[2]
local now
if marker then
  if ARGV[3] ~= '' then now = tonumber(ARGV[3])
  else local t = redis.call('TIME'); now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) end
  local stored = redis.call('GET', marker)
  if stored then
    local expires, amount, attempt, kind, balance = string.match(stored, '^(%d+) (%S+) (%S+) (%S+) ?(%S*)$')
    if not expires then return {'marker_unreadable', stored} end
    if tonumber(expires) > now then
      if amount ~= ARGV[1] then return {'idempotency_key_reused', amount} end
      if attempt == ARGV[5] then return {kind, balance} end
      return {'replayed', kind, balance}
    end
  end
end
local function decided(kind, balance)
  if marker then
    local text = string.format('%.0f', now + tonumber(ARGV[4])) .. ' ' .. ARGV[1] .. ' ' .. ARGV[5] .. ' ' .. kind
    if balance then text = text .. ' ' .. balance end
    redis.call('SET', marker, text, 'PX', ARGV[4])
  end
  return {kind, balance}
end
if redis.call('EXISTS', KEYS[1]) == 0 then return {'account_not_found'} end
local stored = redis.call('HGET', KEYS[1], 'creditBalance')
if not stored then return decided('not_prepaid') end
if not string.match(stored, '^-?%d+$') or string.len(stored) > 17 then return {'balance_unreadable', stored} end
local balance = tonumber(stored)
local limit = tonumber(ARGV[2])
if math.abs(balance) > 9007199254740991 then return {'balance_unreadable', stored} end
local result = balance + tonumber(ARGV[1])
if math.abs(result) > limit then return decided('balance_out_of_range', stored) end
local text = string.format('%.0f', result)
redis.call('HSET', KEYS[1], 'creditBalance', text)
return decided('ok', text)
