-- A packed token bucket field (redisKeys.keyTokenBucketField: per window 16
-- bytes, struct '<I4dI4', PACKED_TOKEN_BUCKET_STRUCT) -> {[windowSeconds] =
-- {tat, fraction}}; of a value that is not whole entries, its whole entries.
local function token_buckets_of(packed)
  local out = {}
  if packed then
    for at = 1, #packed - 15, 16 do
      local w, t, f = struct.unpack('<I4dI4', packed, at)
      out[w] = {t, f}
    end
  end
  return out
end
