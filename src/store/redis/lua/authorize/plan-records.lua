-- The plan's records of one kind as tables, for the table-driven paths: `n`
-- records of `size` bytes from byte `from` of P, the first two doubles of
-- each named `first` and `second`.
local function plan_records(from, n, size, first, second)
  local out = {}
  for i = 1, n do
    local x, y = struct.unpack('<dd', P, from + size * (i - 1))
    out[i] = {[first] = x, [second] = y}
  end
  return out
end
