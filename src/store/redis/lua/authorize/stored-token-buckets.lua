-- A scope's stored token buckets on the straight-line path: given `n` (the
-- plan's budgets in the scope, 1 or 2), `tv` (its packed field, '<I4dI4' per
-- window) and `pw1`, `pw2` (the budgets' windows), sets `t1`, `f1`, `t2`, `f2`
-- (declared by the caller, nil for no bucket) to each budget's TAT and
-- fraction: with one struct.unpack when the field holds the plan's windows
-- in order, as the usage script writes them, else found by window.
if n > 0 and tv then
  local w1, w2
  if #tv == 16 * n then w1, t1, f1, w2, t2, f2 = struct.unpack(n == 2 and '<I4dI4I4dI4' or '<I4dI4', tv) end
  if w1 ~= pw1 or (n == 2 and w2 ~= pw2) then
    t1, f1, t2, f2 = nil, nil, nil, nil
    for p = 1, #tv - 15, 16 do
      local w, t, f = struct.unpack('<I4dI4', tv, p)
      if w == pw1 then t1, f1 = t, f elseif w == pw2 then t2, f2 = t, f end
    end
  end
end
