-- A packed bucket field (redisKeys.keyBucketField: per window 12 bytes,
-- struct '<I4d', PACKED_BUCKET_STRUCT, then perhaps the 40 bytes of the
-- holds' sums, authorize/held-sums.lua) -> {[windowSeconds] = tatUs}, into
-- `into`; a value of another length adds nothing. format_buckets packs
-- `first` ({window, tat} pairs, in order) then the windows of `rest` in
-- ascending order.
local function parse_buckets(packed, into)
  if packed then
    local n = #packed
    if n % 12 == 4 then n = n - 40 end
    if n % 12 == 0 then
      for i = 1, n, 12 do
        local w, t = struct.unpack('<I4d', packed, i)
        into[w] = t
      end
    end
  end
  return into
end
local function format_buckets(first, rest)
  local parts, windows = {}, {}
  for i, b in ipairs(first) do parts[i] = struct.pack('<I4d', b[1], b[2]) end
  for w in pairs(rest) do windows[#windows + 1] = w end
  table.sort(windows)
  for _, w in ipairs(windows) do parts[#parts + 1] = struct.pack('<I4d', w, rest[w]) end
  return table.concat(parts)
end
