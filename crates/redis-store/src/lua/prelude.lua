-- tollgate: shared opening of every script. Integer arithmetic on Lua doubles, and "now".
--
-- Every quantity is a whole number of microseconds or units below 2^53, which a double holds
-- exactly. Division and products that could leave that range go through idiv and muldiv, so
-- nothing is ever rounded.

local TWO_53 = 9007199254740992

-- floor(a / b) for whole a >= 0, b > 0, corrected for the rounding of a / b.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

-- floor(a * b / c) and the remainder, exact even when a * b passes 2^53
-- (a, b < 2^53, c <= 2^52, and the quotient must fit).
local function muldiv(a, b, c)
  local product = a * b
  if product < TWO_53 then
    local q = idiv(product, c)
    return q, product - q * c
  end
  local bq = idiv(b, c)
  local br = b - bq * c
  local bits, n, x = {}, 0, a
  while x > 0 do
    local half = idiv(x, 2)
    n = n + 1
    bits[n] = x - 2 * half
    x = half
  end
  -- Long multiplication of a by br, one bit of a at a time, keeping q * c + r exact.
  local q, r = 0, 0
  for i = n, 1, -1 do
    q, r = q * 2, r * 2
    if r >= c then q, r = q + 1, r - c end
    if bits[i] == 1 then
      r = r + br
      if r >= c then q, r = q + 1, r - c end
    end
  end
  return a * bq + q, r
end

-- ceil(a / b) for whole a >= 0, b > 0, exactly.
local function ceil_div(a, b)
  local q = idiv(a, b)
  if q * b < a then q = q + 1 end
  return q
end

local function fmt(n)
  return string.format('%.0f', n)
end

-- Stops the script with an error reply when a key holds something tollgate did not write (a
-- hand-set value, another program's): reading it as "no state" would grant a fresh quota.
-- Every check raises this before it writes anything, so nothing is half done.
local function unreadable(key, expected)
  error({err = 'TOLLGATE_CORRUPT the value at ' .. key .. ' is not a tollgate state (expected '
    .. expected .. '); delete the key to reset this caller'})
end

-- "Now" comes from one place: the server's clock, unless a test passes its own.
local now
if ARGV[2] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  now = tonumber(ARGV[2])
end
-- Times past 2^52 - 1 us (tollgate's Timestamp::MAX_SUPPORTED, in the year 2112) are not
-- supported: a time plus a quota's longest span must stay below 2^53, or the state written
-- would not read back. A call whose "now" is later (a misread server clock, a test's clock)
-- reads and writes nothing, and answers the error TOLLGATE_TIME, "now" first.
local MAX_SUPPORTED = 4503599627370495
if now > MAX_SUPPORTED then
  return redis.error_reply(string.format('TOLLGATE_TIME %.0f the clock reads %.0f us since the '
    .. 'Unix epoch; tollgate supports times from 0 to %.0f us (the year 2112); nothing was read '
    .. 'or changed', now, now, MAX_SUPPORTED))
end
-- Extra lifetime for keys, in ms: 0 on the server's clock; tests that pass a "now" far from
-- the server's give their keys time to outlive the test.
local slack = tonumber(ARGV[3])

-- A key's lifetime: whole ms, rounded up, at least 1.
local function ttl_ms(micros)
  return math.max(idiv(micros + 999, 1000), 1) + slack
end
