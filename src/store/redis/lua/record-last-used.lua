-- Last-use times and request counts of a batch of keys (see gwaRecordLastUsed in scripts.ts).
local n = (#KEYS - 1) / 3
local hourly_ttl = tonumber(ARGV[2])
local daily_ttl = tonumber(ARGV[3])
local counting = false
if tonumber(ARGV[1]) > 0 then
  counting = redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) ~= false
end
local written = 0
-- A batch's keys mostly share their account's two count hashes: each hash gets its lifetime once per call.
local given_lifetime = {}
local function count(hash, key_id, requests, ttl)
  redis.call('HINCRBY', hash, key_id, requests)
  if not given_lifetime[hash] then
    redis.call('PEXPIRE', hash, ttl)
    given_lifetime[hash] = true
  end
end
for i = 1, n do
  local base = 3 + 4 * (i - 1)
  local at = tonumber(ARGV[base + 1])
  local current = redis.call('HMGET', KEYS[1 + i], 'status', 'lastUsedMs')
  if current[1] then
    if not current[2] or tonumber(current[2]) < at then
      redis.call('HSET', KEYS[1 + i], 'lastUsedMs', ARGV[base + 1], 'lastUsedAt', ARGV[base + 2])
      written = written + 1
    end
    local requests = tonumber(ARGV[base + 3])
    if counting and requests > 0 then
      if hourly_ttl > 0 then count(KEYS[1 + n + i], ARGV[base + 4], requests, ARGV[2]) end
      if daily_ttl > 0 then count(KEYS[1 + 2 * n + i], ARGV[base + 4], requests, ARGV[3]) end
    end
  end
end
return written
