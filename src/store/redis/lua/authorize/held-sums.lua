-- The sums of holds in flight (src/accounts/credit-holds.ts, layout in
-- redisKeys.holds), after the status checks, given `now`, `k`, `a` and the
-- plan's `plan_budgets`, `plan_key_budgets` (whether it has token budgets at
-- all, and for keys): into held_am, held_at (the account's money and
-- tokens), held_km, held_kt (this key's), and hold_m, hold_t (what this
-- request holds if allowed: money only on an account with a balance or a
-- cap, tokens only with a token budget), key_m, key_t (what of it counts for
-- the key: only where the key has a cap or the plan or an override may give
-- it budgets), all 0 when the request brings no hold (ARGV[4], '' or absent:
-- `<minorUnits> <tokens> <requestId>`, one argument: each costs Redis ~1.5k
-- instructions; KEYS[3] the holds hash) or the account holds nothing. Only
-- such an account pays anything: one HMGET of the holds hash, of the sums
-- (packed: no strtod) and of the request id (held_before: a repeat, which
-- holds nothing more). Once the earliest hold's lapse has passed (prune_at),
-- lapsed holds are released first (their answers never came) with one
-- HGETALL of the holds, which also sums the rest afresh and finds the next
-- lapse: at most once per hold lifetime while holds are in flight, as
-- metering releases the others without moving prune_at.
-- Fields: '\001sums' (redisKeys.holdSumsField) is struct '<dddd'
-- (PACKED_HOLD_SUMS_STRUCT: prune time, count, minor units, tokens; 32
-- bytes), '\001key:<keyId>' (keyHoldSumsField) '<dd' (PACKED_KEY_HOLD_SUMS_STRUCT:
-- minor units, tokens; 16 bytes); '' the hashtable marker
-- (holdsHashtableField). A hold lapses 660000000 µs (HOLD_LIFETIME_US) after
-- its Check time.
local hold_m, hold_t, key_m, key_t, held_am, held_at, held_km, held_kt, holding, prune_at = 0, 0, 0, 0, 0, 0, 0, 0, false, nil
local hold_ms, hold_ts, hold_id, held_before, held_count
if ARGV[4] and ARGV[4] ~= '' then
  local money, tokens = a[2] or k[8] or a[6], plan_budgets or k[7] or a[5]
  if money or tokens then
    holding = true
    hold_ms, hold_ts, hold_id = string.match(ARGV[4], '^(%d+) (%d+) (.+)$')
    if money then hold_m = tonumber(hold_ms) end
    if tokens then hold_t = tonumber(hold_ts) end
    if k[8] then key_m = hold_m end
    if plan_key_budgets or k[7] or a[5] then key_t = hold_t end
    local h, key_sums
    if key_m > 0 or key_t > 0 then
      h = redis.call('HMGET', KEYS[3], '\001sums', hold_id, '\001key:' .. ARGV[1])
      key_sums = h[3]
    else
      h = redis.call('HMGET', KEYS[3], '\001sums', hold_id)
    end
    held_before = h[2]
    if h[1] and #h[1] == 32 then prune_at, held_count, held_am, held_at = struct.unpack('<dddd', h[1]) end
    if key_sums and #key_sums == 16 then held_km, held_kt = struct.unpack('<dd', key_sums) end
    if prune_at and prune_at <= now then
      local all, lapsed, keys = redis.call('HGETALL', KEYS[3]), {}, {}
      prune_at, held_count, held_am, held_at = nil, 0, 0, 0
      for i = 1, #all, 2 do
        local at, m, t, km, kt, id = string.match(all[i + 1], '^(%d+):(%d+):(%d+):(%d+):(%d+):(.+)$')
        local lapse = at and tonumber(at) + 660000000
        local for_key = id and (km ~= '0' or kt ~= '0')
        if for_key and not keys[id] then keys[id] = {0, 0} end
        -- Neither the hashtable marker nor the sums (named from \001) is a hold.
        if all[i] ~= '' and string.byte(all[i]) ~= 1 then
          if not lapse or lapse <= now then
            lapsed[#lapsed + 1] = all[i]
            if all[i] == hold_id then held_before = false end
          else
            if not prune_at or lapse < prune_at then prune_at = lapse end
            held_count, held_am, held_at = held_count + 1, held_am + m, held_at + t
            if for_key then keys[id][1], keys[id][2] = keys[id][1] + km, keys[id][2] + kt end
          end
        end
      end
      if prune_at then
        local writes, emptied = {'\001sums', struct.pack('<dddd', prune_at, held_count, held_am, held_at)}, lapsed
        for id, s in pairs(keys) do
          if s[1] > 0 or s[2] > 0 then
            writes[#writes + 1] = '\001key:' .. id
            writes[#writes + 1] = struct.pack('<dd', s[1], s[2])
          else
            emptied[#emptied + 1] = '\001key:' .. id
          end
        end
        if #emptied > 0 then redis.call('HDEL', KEYS[3], unpack(emptied)) end
        redis.call('HSET', KEYS[3], unpack(writes))
      else
        redis.call('DEL', KEYS[3])
      end
      held_km, held_kt = 0, 0
      if keys[ARGV[1]] then held_km, held_kt = keys[ARGV[1]][1], keys[ARGV[1]][2] end
    end
  end
end
