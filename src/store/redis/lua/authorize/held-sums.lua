-- The holds in flight (src/accounts/credit-holds.ts), after the status
-- checks, given `now`, `k`, `a`, `hold_ms`, `hold_ts`, `hold_slot` (the
-- request's hold and its slot, nil for none: ARGV[2]) and the plan's `plan_budgets`: into held_am,
-- held_at (the account's money and tokens held), held_km, held_kt (this
-- key's), hold_m, hold_t (what this request holds if allowed: money only on
-- an account with a balance or a cap, tokens only with a token budget), all
-- 0 when the request brings no hold or the account holds nothing.
-- There is no record per hold: the sums are kept per slot of 720 s
-- (HOLD_SLOT_US), the current one and the one before counting, and ride at
-- the end of the bucket fields every decision reads and writes already, the
-- account's (a[7], 'ra') and the key's (a[8], 'rk:<keyId>'; only for a key
-- its holds count for: one with a cap or token budgets of its own, or under
-- a plan or an override that gives keys budgets): struct '<ddddd'
-- (PACKED_HOLD_SLOTS_STRUCT, 40 bytes after the windows' 12 each): the slot,
-- then the minor units and tokens of that slot and of the one before.
-- Metering takes a hold off the slot it was placed in (lib/release-hold.lua);
-- one whose answer never comes lapses with its slots, 720 to 1440 s after
-- its Check. A Check of a slot behind the stored one (another replica's clock
-- a little ahead) adds to the stored slot: its hold then counts ha_s long or
-- longer, and its release takes from an earlier slot, never from a later
-- one, so no sum ends below what is in flight.
-- With the plan's two windows in a scope, the field is read with its windows
-- in one struct.unpack (p*: the windows, for the plain path); the sums ha_s
-- they are to be written, this request's hold added, are ha_s, ha_m0, ha_t0, ha_m1,
-- ha_t1 (the account's) and hk_s, hk_m0, ... (the key's), packed with the windows
-- where the plain path packs those, else by place-hold.lua. Without a hold,
-- the sums already there (a_tail, k_tail) are kept ha_s they are. Written out
-- per scope, ha_s the plain path's windows are: a closure called twice
-- measured 1.4k more instructions a decision.
local hold_m, hold_t, held_am, held_at, held_km, held_kt, holding = 0, 0, 0, 0, 0, 0, false
local ha_s, ha_m0, ha_t0, ha_m1, ha_t1, hk_s, hk_m0, hk_t0, hk_m1, hk_t1
local key_sums, a_tail, k_tail, paw1, pat1, paw2, pat2, pkw1, pkt1, pkw2, pkt2
local av, kv = a[7], a[8]
if hold_ms then
  local money, tokens = a[2] or k[8] or a[6], plan_budgets or k[7] or a[5]
  if money or tokens then
    holding = true
    if money then hold_m = hold_ms end
    if tokens then hold_t = hold_ts end
    local slot = hold_slot
    local x, m0, t0, m1, t1
    if na == 2 and av and #av == 64 then
      paw1, pat1, paw2, pat2, x, m0, t0, m1, t1 = struct.unpack('<I4dI4dddddd', av)
    elseif av and #av % 12 == 4 and #av >= 40 then
      x, m0, t0, m1, t1 = struct.unpack('<ddddd', av, #av - 39)
    end
    if x and x >= slot then
      ha_s, held_am, held_at, ha_m0, ha_t0, ha_m1, ha_t1 = x, m0 + m1, t0 + t1, m0 + hold_m, t0 + hold_t, m1, t1
    elseif x == slot - 1 then
      ha_s, held_am, held_at, ha_m0, ha_t0, ha_m1, ha_t1 = slot, m0, t0, hold_m, hold_t, m0, t0
    else
      ha_s, ha_m0, ha_t0, ha_m1, ha_t1 = slot, hold_m, hold_t, 0, 0
    end
    key_sums = nbk > 0 or k[8] or k[7] or a[5]
    if key_sums then
      x = nil
      if nk == 2 and kv and #kv == 64 then
        pkw1, pkt1, pkw2, pkt2, x, m0, t0, m1, t1 = struct.unpack('<I4dI4dddddd', kv)
      elseif kv and #kv % 12 == 4 and #kv >= 40 then
        x, m0, t0, m1, t1 = struct.unpack('<ddddd', kv, #kv - 39)
      end
      if x and x >= slot then
        hk_s, held_km, held_kt, hk_m0, hk_t0, hk_m1, hk_t1 = x, m0 + m1, t0 + t1, m0 + hold_m, t0 + hold_t, m1, t1
      elseif x == slot - 1 then
        hk_s, held_km, held_kt, hk_m0, hk_t0, hk_m1, hk_t1 = slot, m0, t0, hold_m, hold_t, m0, t0
      else
        hk_s, hk_m0, hk_t0, hk_m1, hk_t1 = slot, hold_m, hold_t, 0, 0
      end
    end
  end
end
if not holding then
  -- A decision that holds nothing (no hold sent, or nothing counts one) keeps the sums already there.
  if av and #av % 12 == 4 and #av >= 40 then a_tail = string.sub(av, -40) end
  if kv and #kv % 12 == 4 and #kv >= 40 then k_tail = string.sub(kv, -40) end
end
