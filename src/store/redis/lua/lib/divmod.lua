-- divmod(x, y): floor division with remainder. Exact while x, y and q * y
-- stay below 2^53: the quotient of the division in doubles is off by at most
-- one, which the remainder's sign corrects.
local function divmod(x, y)
  local q = math.floor(x / y)
  local r = x - q * y
  if r < 0 then q = q - 1; r = r + y elseif r >= y then q = q + 1; r = r - y end
  return q, r
end
