-- The last-owner rule's count (src/accounts/members.ts isActingOwner): owners that are bound identities.
local function acting_owners(members)
  local n = 0
  for _, json in ipairs(redis.call('HVALS', members)) do
    local m = cjson.decode(json)
    if m.role == 'owner' and m.principal.kind == 'identity' then n = n + 1 end
  end
  return n
end
local function leaves_no_owner(members, m)
  return m.role == 'owner' and m.principal.kind == 'identity' and acting_owners(members) == 1
end
