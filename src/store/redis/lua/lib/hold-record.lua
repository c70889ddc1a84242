-- hold_record(text): a hold as the holds hash keeps it (authorize/place-hold.lua)
-- read back: its Check time, minor units, tokens, the key's minor units and
-- tokens, and the key's id; nothing for a value of another layout.
local function hold_record(text)
  local at, money_counts, tokens_counts, key_id, m, t = string.match(text, '^(%d+) ([-AK])([-AK]) (%S+) (%d+) (%d+) ')
  if not at then return end
  m, t = money_counts == '-' and 0 or tonumber(m), tokens_counts == '-' and 0 or tonumber(t)
  return tonumber(at), m, t, money_counts == 'K' and m or 0, tokens_counts == 'K' and t or 0, key_id
end
