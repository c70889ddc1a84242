--@include lib/iso8601.lua
--@include lib/divmod.lua
--@include lib/token-buckets-of.lua
--@include lib/token-consume.lua
--@include lib/release-hold.lua
-- One usage record applied to its account, exactly once per request id (see
-- gwaApplyUsage in scripts.ts); with the stream and its marker as KEYS[10] and
-- KEYS[11], also its usage stream entry (gwaApplyAndStreamUsage). KEYS[7],
-- KEYS[8] and KEYS[9] are the account's webhook outbox, endpoint state and
-- endpoints: a prepaid balance that crosses the account's credit.low
-- threshold, or reaches zero, and a spend cap or token budget reached,
-- append their events in this step (see webhook_event below). The usage
-- sweep runs at most once per USAGE_SWEEP_INTERVAL_US per account.
local USAGE_SWEEP_INTERVAL_US = 3600000000
local streams = #KEYS == 11
local plan_from = 17
local stream_once
if streams then
  -- The stream entry from ARGV[19...] (ARGV[18] strings: names and values, the
  -- values of billing and creditShortfall (USAGE_STREAM_BILLING_FIELD,
  -- USAGE_STREAM_SHORTFALL_FIELD) replaced by how the script billed the
  -- record). The stream key's type is checked first, before any write. Once
  -- the marker exists it is written again unchanged (SET KEEPTTL): a write,
  -- so that a WAIT or WAITAOF after a repeat covers the first application,
  -- made perhaps on a connection since lost.
  plan_from = 19 + tonumber(ARGV[18])
  local stream_type = redis.call('TYPE', KEYS[10])['ok']
  if stream_type ~= 'stream' and stream_type ~= 'none' then return {'wrong_type', KEYS[10], stream_type} end
  local streamed_id = redis.call('GET', KEYS[11])
  stream_once = function(billing, shortfall)
    if streamed_id then
      redis.call('SET', KEYS[11], streamed_id, 'KEEPTTL')
      return
    end
    local fields = {}
    for i = 19, 18 + tonumber(ARGV[18]), 2 do
      local name, value = ARGV[i], ARGV[i + 1]
      if name == 'billing' then value = billing
      elseif name == 'creditShortfall' then value = shortfall end
      fields[#fields + 1] = name
      fields[#fields + 1] = value
    end
    streamed_id = redis.call('XADD', KEYS[10], 'MAXLEN', '~', ARGV[17], '*', unpack(fields))
    redis.call('SET', KEYS[11], streamed_id, 'PX', ARGV[2])
  end
else
  stream_once = function() end
end
local first = redis.call('GET', KEYS[3])
if first then
  stream_once(string.match(first, '^(%a+):(%d+)$'))
  return {'duplicate', first}
end
-- The answer came: its hold (ARGV[15], what its Check placed) gives way to its real cost, once (KEYS[6], its
-- request's release marker; ARGV[16], the key's bucket field).
release_hold(KEYS[1], ARGV[16], ARGV[15], KEYS[6], ARGV[2])
local a = redis.call('HMGET', KEYS[1], 'id', 'creditBalance', 'tokenBudgets', ARGV[5], ARGV[6], 'creditShortfall', 'usageSweepDueUs',
  'monthlySpendCap')
if not a[1] then
  stream_once('account_not_found', '0')
  return {'account_not_found'}
end
local function amount(text, name)
  if not text then return 0 end
  if not string.match(text, '^%d+$') or string.len(text) > 16 then error({corrupt = name, text = text}) end
  return tonumber(text)
end
local ok, problem = pcall(function()
  if a[2] and (not string.match(a[2], '^-?%d+$') or string.len(a[2]) > 17 or math.abs(tonumber(a[2])) > 9007199254740991) then
    error({corrupt = 'creditBalance', text = a[2]})
  end
  amount(a[4], ARGV[5]); amount(a[5], ARGV[6]); amount(a[6], 'creditShortfall')
end)
if not ok then
  if type(problem) == 'table' then return {'corrupt', problem.corrupt, problem.text} end
  error(problem)
end
local now
if ARGV[1] ~= '' then now = tonumber(ARGV[1])
else local t = redis.call('TIME'); now = tonumber(t[1]) * 1000000 + tonumber(t[2]) end
local writes, gone = {}, {}
local sweep_at = a[7] and tonumber(a[7])
if not sweep_at or sweep_at <= now then
  -- A new account (no sweep time yet) has nothing to sweep. The sweep, one
  -- HGETALL: spend of months before the previous is deleted (and marked
  -- gone); token buckets whose TAT has passed are dropped from their packed
  -- field, and a field left empty is deleted. Written before the record's own
  -- reads, which then see the swept fields.
  if sweep_at then
    local oldest = iso8601(math.floor(now / 1000)):sub(1, 7)
    local year, month = tonumber(oldest:sub(1, 4)), tonumber(oldest:sub(6, 7))
    if month == 1 then oldest = string.format('%04d-12', year - 1) else oldest = string.format('%04d-%02d', year, month - 1) end
    local all, stale = redis.call('HGETALL', KEYS[1]), {}
    for i = 1, #all, 2 do
      local f, v = all[i], all[i + 1]
      local prefix = string.sub(f, 1, 3)
      if prefix == 'tp:' then
        local buckets, changed = token_buckets_of(v), false
        for w, b in pairs(buckets) do if b[1] < now then buckets[w] = nil; changed = true end end
        if changed then
          if next(buckets) == nil then stale[#stale + 1] = f else redis.call('HSET', KEYS[1], f, tb_pack({}, buckets, now)) end
        end
      elseif prefix == 'sp:' and string.sub(f, -7) < oldest then
        stale[#stale + 1] = f; gone[f] = true
      elseif prefix == 'tn:' and (tonumber(v) or 0) <= now then
        stale[#stale + 1] = f
      end
    end
    if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
  end
  writes[#writes + 1] = 'usageSweepDueUs'
  writes[#writes + 1] = string.format('%.0f', now + USAGE_SWEEP_INTERVAL_US)
end
local cost = tonumber(ARGV[3])
local billing, shortfall = 'postpaid', 0
local events = 0
-- The webhook events of a crossing (src/webhooks/webhook-events.ts builds the same text): ids from the account,
-- request and type (and scope), so the one record never makes two; amounts as integers. `data` is the JSON after
-- the account id. An account with no endpoint gets none (lib/outbox.lua says why), nor writes a token budget's notice.
local endpoints_exist
local function has_endpoints()
  if endpoints_exist == nil then endpoints_exist = redis.call('EXISTS', KEYS[9]) == 1 end
  return endpoints_exist
end
local function webhook_event(event_type, id_suffix, data)
  if not has_endpoints() then return end
  local id = 'msg_' .. string.sub(redis.sha1hex(a[1] .. ' ' .. ARGV[14] .. ' ' .. event_type .. id_suffix), 1, 24)
  local payload = '{"type":"' .. event_type .. '","timestamp":"' .. iso8601(math.floor(now / 1000)) ..
    '","data":{"account_id":"' .. a[1] .. '"' .. data .. '}}'
  redis.call('XADD', KEYS[7], '*', 'id', id, 'type', event_type, 'payload', payload, 'endpoint', '')
  events = events + 1
end
local function credit_event(event_type, balance, threshold)
  local extra = ''
  if threshold then extra = ',"threshold":' .. string.format('%.0f', threshold) end
  webhook_event(event_type, '', ',"credit_balance":' .. string.format('%.0f', balance) .. extra)
end
if a[2] then
  billing = 'prepaid'
  local debited = tonumber(a[2]) - cost
  local balance = math.max(debited, -tonumber(ARGV[9]))
  shortfall = balance - debited
  writes[#writes + 1] = 'creditBalance'
  writes[#writes + 1] = string.format('%.0f', balance)
  local before = tonumber(a[2])
  local threshold = tonumber(redis.call('HGET', KEYS[8], 'creditLowThreshold') or '')
  if threshold and before >= threshold and balance < threshold then credit_event('credit.low', balance, threshold) end
  if before > 0 and balance <= 0 then credit_event('credit.exhausted', balance) end
  if shortfall > 0 then
    writes[#writes + 1] = 'creditShortfall'
    writes[#writes + 1] = string.format('%.0f', math.min(amount(a[6]) + shortfall, 9007199254740991))
  end
end
local key_cap = redis.call('HMGET', KEYS[2], 'monthlySpendCap', 'id', 'prefix')
local caps = {tonumber(a[8] or ''), tonumber(key_cap[1] or '')}
for i, field in ipairs({ARGV[5], ARGV[6]}) do
  local spent = 0
  if not gone[field] then spent = amount(a[3 + i]) end
  local after = math.min(spent + cost, 9007199254740991)
  writes[#writes + 1] = field
  writes[#writes + 1] = string.format('%.0f', after)
  -- A monthly spend cap reached by this record: budget.reached, for the account or the key.
  if caps[i] and spent < caps[i] and after >= caps[i] then
    local scope = '"account"'
    if i == 2 then scope = '"key","key_id":"' .. key_cap[2] .. '"' end
    webhook_event('budget.reached', ' ' .. i, ',"budget":"monthly_spend_cap","scope":' .. scope .. ',"monthly_spend_cap":' ..
      string.format('%.0f', caps[i]) .. ',"month_spend":' .. string.format('%.0f', after))
  end
end
-- A token budget exhausted by this record (the Check refuses the next request, src/check/deny-reasons.ts):
-- budget.reached, for the key (i 1) or the account (i 2), at most once per budget per window length. The notice
-- field (`tn:k:<keyId>:<window>` or `tn:a:<window>`, see redis-keys.ts: the bucket field's name with `tn:` for `tp:`)
-- holds until when (us) the budget sends no other: a key that stays at its budget, each admitted request taking the
-- tokens that refilled, would otherwise send one per request. The sweep deletes notices whose time has passed.
local function token_budget_reached(i, limit, w)
  if not has_endpoints() then return end
  local notice = 'tn' .. string.sub(ARGV[6 + i], 3) .. ':' .. w
  local quiet_until = tonumber(redis.call('HGET', KEYS[1], notice) or '')
  if quiet_until and quiet_until > now then return end
  writes[#writes + 1] = notice
  writes[#writes + 1] = string.format('%.0f', now + w * 1000000)
  local scope = '"account"'
  if i == 1 then
    scope = '"key","key_id":"' .. string.sub(ARGV[7], 6) .. '"'
    if key_cap[3] then scope = scope .. ',"key_prefix":"' .. key_cap[3] .. '"' end
  end
  webhook_event('budget.reached', ' ' .. i .. ':' .. w, ',"budget":"token_budget","scope":' .. scope .. ',"tokens":' ..
    string.format('%.0f', limit) .. ',"window_seconds":' .. string.format('%.0f', w))
end
local key_count, account_count = tonumber(ARGV[12]), tonumber(ARGV[13])
local aggregates_from = plan_from + 2 * (key_count + account_count)
local tokens = tonumber(ARGV[4])
if tokens > 0 then
  local function plan_budgets(from, count)
    local out = {}
    for i = from, from + 2 * count - 1, 2 do out[#out + 1] = {tokens = tonumber(ARGV[i]), windowSeconds = tonumber(ARGV[i + 1])} end
    return out
  end
  local overrides = {}
  if a[3] then overrides = cjson.decode(a[3]) end
  local own = redis.call('HGET', KEYS[2], 'tokenBudgets')
  local key_budgets = (own and cjson.decode(own)) or overrides.key or plan_budgets(plan_from, key_count)
  local account_budgets = overrides.account or plan_budgets(plan_from + 2 * key_count, account_count)
  if #key_budgets + #account_budgets > 0 then
    local stored = redis.call('HMGET', KEYS[1], ARGV[7], ARGV[8])
    for i, scope in ipairs({key_budgets, account_budgets}) do
      if #scope > 0 then
        local buckets, moved = token_buckets_of(stored[i]), {}
        for j, b in ipairs(scope) do
          local w = b.windowSeconds
          local old = buckets[w] or {}
          local tat, fraction = tb_consume(old[1], old[2], now, tokens, b.tokens, w)
          moved[j] = {w, tat, fraction}
          buckets[w] = nil
          if not tb_exhausted(old[1], old[2], now, b.tokens, w) and tb_exhausted(tat, fraction, now, b.tokens, w) then
            token_budget_reached(i, b.tokens, w)
          end
        end
        writes[#writes + 1] = ARGV[6 + i]
        writes[#writes + 1] = tb_pack(moved, buckets, now)
      end
    end
  end
end
redis.call('HSET', KEYS[1], unpack(writes))
local outcome = billing .. ':' .. string.format('%.0f', shortfall)
redis.call('SET', KEYS[3], outcome, 'PX', ARGV[2])
stream_once(billing, string.format('%.0f', shortfall))
-- A TTL from the service's clock, not PEXPIREAT: Redis's own clock may differ
-- from the gateway's, and the bucket must live as long as the service reads it.
local now_ms = math.floor(now / 1000)
for i, expires in ipairs({ARGV[10], ARGV[11]}) do
  if tonumber(expires) > now_ms then
    for j = aggregates_from, #ARGV, 2 do redis.call('HINCRBY', KEYS[3 + i], ARGV[j], ARGV[j + 1]) end
    redis.call('PEXPIRE', KEYS[3 + i], tonumber(expires) - now_ms)
  end
end
return {'applied', outcome, events}
