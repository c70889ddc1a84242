-- The sums of holds in flight (src/accounts/credit-holds.ts, layout in
-- redisKeys.holds), after the status checks, given `now`, `k`, `a` and the
-- plan's `plan_budgets`, `plan_key_budgets` (whether it has token budgets at
-- all, and for keys): into held_am, held_at (the account's money and
-- tokens), held_km, held_kt (this key's), and hold_m, hold_t (what this
-- request holds if allowed: money only on an account with a balance or a
-- cap, tokens only with a token budget), key_m, key_t (what of it counts for
-- the key: only where the key has a cap or the plan or an override may give
-- it budgets), all 0 when the request brings no hold (ARGV[3..6]: minor
-- units, tokens, request id, deadline; KEYS[3] the holds hash) or the
-- account holds nothing. Only such an account pays anything: one HMGET of
-- the sums, the key's only where they count. Once the earliest hold's
-- deadline has passed (prune_at), lapsed holds are released first (their
-- answers never came) with one HGETALL of the holds, which also finds the
-- next earliest deadline: at most once per hold lifetime while holds are in
-- flight, as metering releases the others without moving prune_at.
local hold_m, hold_t, key_m, key_t, held_am, held_at, held_km, held_kt, holding, prune_at = 0, 0, 0, 0, 0, 0, 0, 0, false, nil
if ARGV[3] then
  local money, tokens = a[2] or k[8] or a[6], plan_budgets or k[7] or a[5]
  if money or tokens then
    holding = true
    if money then hold_m = tonumber(ARGV[3]) end
    if tokens then hold_t = tonumber(ARGV[4]) end
    if k[8] then key_m = hold_m end
    if plan_key_budgets or k[7] or a[5] then key_t = hold_t end
    local h
    if key_m > 0 or key_t > 0 then h = redis.call('HMGET', KEYS[1], 'hm', 'ht', 'holdPruneAtUs', 'hm:' .. ARGV[1], 'ht:' .. ARGV[1])
    else h = redis.call('HMGET', KEYS[1], 'hm', 'ht', 'holdPruneAtUs') end
    prune_at = tonumber(h[3])
    if prune_at and prune_at <= now then
      local all, lapsed, taken = redis.call('HGETALL', KEYS[3]), {}, {}
      prune_at = nil
      for i = 1, #all, 2 do
        local deadline, id, m, t, km, kt = string.match(all[i + 1], '^(%d+) (%S+) (%d+) (%d+) (%d+) (%d+)$')
        deadline = tonumber(deadline)
        if all[i] == '' then -- luacheck: ignore 542 (the hashtable marker is no hold: neither lapsed nor counted)
        elseif not deadline or deadline <= now then
          lapsed[#lapsed + 1] = all[i]
          if id then
            for f, n in pairs({hm = m, ht = t, ['hm:' .. id] = km, ['ht:' .. id] = kt}) do
              taken[f] = (taken[f] or 0) + tonumber(n)
            end
          end
        elseif not prune_at or deadline < prune_at then
          prune_at = deadline
        end
      end
      if not prune_at then redis.call('DEL', KEYS[3])
      elseif #lapsed > 0 then redis.call('HDEL', KEYS[3], unpack(lapsed)) end
      local emptied = {}
      for f, n in pairs(taken) do
        if n > 0 and redis.call('HINCRBY', KEYS[1], f, string.format('%.0f', -n)) <= 0 then emptied[#emptied + 1] = f end
      end
      if #emptied > 0 then redis.call('HDEL', KEYS[1], unpack(emptied)) end
      if prune_at then redis.call('HSET', KEYS[1], 'holdPruneAtUs', string.format('%.0f', prune_at))
      else redis.call('HDEL', KEYS[1], 'holdPruneAtUs') end
      if key_m > 0 or key_t > 0 then h = redis.call('HMGET', KEYS[1], 'hm', 'ht', 'holdPruneAtUs', 'hm:' .. ARGV[1], 'ht:' .. ARGV[1])
      else h = redis.call('HMGET', KEYS[1], 'hm', 'ht', 'holdPruneAtUs') end
    end
    held_am, held_at, held_km, held_kt = tonumber(h[1]) or 0, tonumber(h[2]) or 0, tonumber(h[4]) or 0, tonumber(h[5]) or 0
  end
end
