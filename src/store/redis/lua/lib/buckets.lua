-- A packed bucket field (redisKeys.keyBucketField: per window 12 bytes,
-- struct '<I4d', PACKED_BUCKET_STRUCT) -> {[windowSeconds] = tatUs}, into
-- `into`; a value of another length adds nothing. format_buckets packs
-- `first` ({window, tat} pairs, in order) then the windows of `rest` in
-- ascending order.
local function parse_buckets(packed, into)
  if packed and #packed % 12 == 0 then
    for i = 1, #packed, 12 do
      local w, t = struct.unpack('<I4d', packed, i)
      into[w] = t
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
