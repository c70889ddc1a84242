-- An allowed decision places its hold: the sums with it (held-sums.lua) go after the windows of the bucket fields the
-- script writes anyway, where the plain path has not packed them with the windows already (a_sums, k_sums), or make
-- the field where the plan has no windows for its scope. A key its holds do not count for gets no sums, and loses
-- any it had. A decision that holds nothing keeps the sums already there wherever it writes the windows.
if holding then
  if not a_sums then
    local sums = struct.pack('<ddddd', ha_s, ha_m0, ha_t0, ha_m1, ha_t1)
    a_packed = a_packed and a_packed .. sums or sums
  end
  if key_sums and not k_sums then
    local sums = struct.pack('<ddddd', hk_s, hk_m0, hk_t0, hk_m1, hk_t1)
    k_packed = k_packed and k_packed .. sums or sums
  elseif not key_sums and not k_packed and kv and #kv % 12 == 4 and #kv >= 40 then
    -- No windows written for the key (none in its plan): its sums go all the same, so a cap given to it again starts
    -- from the account's (update-key.lua), not from what it held when they last counted.
    k_packed = string.sub(kv, 1, #kv - 40)
  end
else
  if a_packed and a_tail then a_packed = a_packed .. a_tail end
  if k_packed and k_tail then k_packed = k_packed .. k_tail end
end
