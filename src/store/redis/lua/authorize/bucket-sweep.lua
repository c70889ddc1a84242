-- The general path's sweep when it is due (at most once per hour per
-- account, and on an account's first decision): one HGETALL of the account
-- hash, then packed bucket fields whose windows have all passed are deleted
-- (a rotated or revoked key's, windows no longer in use) unless they carry
-- holds still in flight (their sums' slot the current one or the one
-- before, a sum not 0), and the sweep time is written. Its writes happen whatever the decision, so a refused decision
-- does not scan again. With them goes the hashtable marker
-- (redisKeys.hashtableMarkerField): the account hash is a hashtable from its
-- first decision on, whose field lookups cost no scan. Sets kb and ab, this
-- key's and the account's buckets still ahead of now, for the decision that
-- follows.
local BUCKET_SWEEP_INTERVAL_US = 3600000000
local all = redis.call('HGETALL', KEYS[1])
local live, stale = {}, {}
for i = 1, #all, 2 do
  local f = all[i]
  if string.sub(f, 1, 3) == 'rk:' or f == 'ra' then
    local m = {}
    local v = all[i + 1]
    for w, t in pairs(parse_buckets(v, {})) do if t > now then m[w] = t end end
    local holds = false
    if #v % 12 == 4 and #v >= 40 then
      local s, m0, t0, m1, t1 = struct.unpack('<ddddd', v, #v - 39)
      holds = s + 1 >= floor(now / 720000000) and m0 + t0 + m1 + t1 > 0
    end
    if next(m) == nil and not holds then stale[#stale + 1] = f else live[f] = m end
  end
end
if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
redis.call('HSET', KEYS[1], 'bucketSweepAtUs', string.format('%d', now + BUCKET_SWEEP_INTERVAL_US),
  '', 'keeps this hash a hashtable: longer than the 64 bytes of hash-max-listpack-value')
kb, ab = live[kf] or {}, live['ra'] or {}
