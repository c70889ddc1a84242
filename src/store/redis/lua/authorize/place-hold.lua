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
  end
else
  if a_packed and a_tail then a_packed = a_packed .. a_tail end
  if k_packed and k_tail then k_packed = k_packed .. k_tail end
end
