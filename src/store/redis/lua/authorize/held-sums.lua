-- The sums of holds in flight (src/accounts/credit-holds.ts), after the
-- status checks, given `now`, `k`, `a`, `hold_arg`, `hs`, `key_holds` and the
-- plan's `plan_budgets`, `plan_key_budgets` (whether it has token budgets at
-- all, and for keys): into held_am, held_at (the account's money and
-- tokens), held_km, held_kt (this key's), and hold_m, hold_t (what this
-- request holds if allowed: money only on an account with a balance or a
-- cap, tokens only with a token budget), key_m, key_t (what of it counts for
-- the key: only where the key has a cap or the plan or an override may give
-- it budgets), all 0 when the request brings no hold (hold_arg: ARGV[4],
-- `<minorUnits> <tokens> <requestId>`, one argument: each costs Redis ~1.5k
-- instructions; KEYS[3] the holds hash) or the account holds nothing.
-- The sums are fields of the account hash (redisKeys.holdSumsField,
-- keyHoldSumsField), read with its HMGET (a[hs], a[hs + 1]) and written with
-- its HSET: a hold costs the decision no read of the holds hash, and one
-- write (place-hold.lua). Once the earliest hold's lapse has passed
-- (prune_at), lapsed holds are released first (their answers never came)
-- with one HGETALL of the holds, which also sums the rest afresh and finds
-- the next lapse: at most once per hold lifetime while holds are in flight,
-- as metering releases the others without moving prune_at.
-- Layout: 'hs' is struct '<dddd' (PACKED_HOLD_SUMS_STRUCT, redis-records.ts:
-- prune time, count, minor units, tokens; 32 bytes), 'hk:<keyId>' '<dd'
-- (PACKED_KEY_HOLD_SUMS_STRUCT: minor units, tokens; 16 bytes); a hold is
-- text (place-hold.lua, redisKeys.holds; read by lib/hold-record.lua). A hold
-- lapses 720000000 µs (HOLD_LIFETIME_US) after its Check time; one of another
-- layout counts for nothing and is released with the first prune.
local hold_m, hold_t, key_m, key_t, held_am, held_at, held_km, held_kt, holding, prune_at = 0, 0, 0, 0, 0, 0, 0, 0, false, nil
local hold_id, held_count
if hold_arg then
  local money, tokens = a[2] or k[8] or a[6], plan_budgets or k[7] or a[5]
  if money or tokens then
    holding = true
    local hold_ms, hold_ts
    hold_ms, hold_ts, hold_id = string.match(hold_arg, '^(%d+) (%d+) (.+)$')
    if money then hold_m = tonumber(hold_ms) end
    if tokens then hold_t = tonumber(hold_ts) end
    if k[8] then key_m = hold_m end
    if plan_key_budgets or k[7] or a[5] then key_t = hold_t end
    local sums, key_sums = a[hs], a[hs + 1]
    if not key_holds and (key_m > 0 or key_t > 0) then
      -- An account override gives a key without budgets of its own some: the one case the HMGET did not foresee.
      key_holds = 'hk:' .. ARGV[1]
      key_sums = redis.call('HGET', KEYS[1], key_holds)
    end
    if sums and #sums == 32 then prune_at, held_count, held_am, held_at = struct.unpack('<dddd', sums) end
    if key_sums and #key_sums == 16 then held_km, held_kt = struct.unpack('<dd', key_sums) end
    if prune_at and prune_at <= now then
      --@include lib/hold-record.lua
      local all, lapsed, keys, gone = redis.call('HGETALL', KEYS[3]), {}, {}, {}
      prune_at, held_count, held_am, held_at = nil, 0, 0, 0
      for i = 1, #all, 2 do
        local v = all[i + 1]
        -- The hashtable marker (the empty name) is no hold.
        if all[i] ~= '' then
          local at, m, t, km, kt, id = hold_record(v)
          if not at or at + 720000000 <= now then
            lapsed[#lapsed + 1] = all[i]
            if at and (km > 0 or kt > 0) then gone[id] = true end
          else
            if not prune_at or at + 720000000 < prune_at then prune_at = at + 720000000 end
            held_count, held_am, held_at = held_count + 1, held_am + m, held_at + t
            if km > 0 or kt > 0 then
              local s = keys[id]
              if s then s[1], s[2] = s[1] + km, s[2] + kt else keys[id] = {km, kt} end
            end
          end
        end
      end
      -- The sums afresh: each key's written where it holds, deleted where it no longer does.
      local writes, emptied = {}, {}
      if prune_at then
        writes[1], writes[2] = 'hs', struct.pack('<dddd', prune_at, held_count, held_am, held_at)
        if #lapsed > 0 then redis.call('HDEL', KEYS[3], unpack(lapsed)) end
      else
        emptied[1] = 'hs'
        redis.call('DEL', KEYS[3])
      end
      for id, s in pairs(keys) do
        writes[#writes + 1] = 'hk:' .. id
        writes[#writes + 1] = struct.pack('<dd', s[1], s[2])
        gone[id] = nil
      end
      for id in pairs(gone) do emptied[#emptied + 1] = 'hk:' .. id end
      if #emptied > 0 then redis.call('HDEL', KEYS[1], unpack(emptied)) end
      if #writes > 0 then redis.call('HSET', KEYS[1], unpack(writes)) end
      held_km, held_kt = 0, 0
      if keys[ARGV[1]] then held_km, held_kt = keys[ARGV[1]][1], keys[ARGV[1]][2] end
    end
  end
end
