-- tollgate: taking a cost "up to" what there is, "as debt" past the limit, or exactly "after
-- debt" (tollgate_core::Take), by the same steps as tollgate_core::algorithm::taking. An item's
-- take is 0 exact, 1 up to, 2 as debt, 3 after debt. A caller's debt lives in a key of its own beside its state
-- (same hash tag), "owed:lapses_at" (units, µs), set to expire when the debt lapses.

-- Charges as much of `want` as remains on `s`: decision, charge, units granted. With nothing
-- remaining, the refusal of one unit (when it will fit).
local function up_to(s, it, want)
  local current = evaluate(s, it, 0, now)
  if want == 0 then return current, nil, 0 end
  local grant = math.min(want, current[3])
  while grant > 0 do
    local d, c = evaluate(s, it, grant, now)
    if d[1] == 0 then return d, c, grant end
    -- An estimate (the sliding counter's) that promised more than fits.
    grant = math.min(grant - 1, d[3])
  end
  local d, c = evaluate(s, it, 1, now)
  if c then return d, c, 1 end
  return d, nil, 0
end

-- When `owed` units lapse for a caller whose state is `s`: once the state is whole again, plus
-- one replenish time (the quota's span) per full limit owed.
local function debt_lapses_at(s, it, owed)
  local whole = now
  if s.fam == 'l' then
    if s.newest then whole = math.max(whole, s.newest.at + it.q.interval) end
  else
    whole = math.max(whole, idle_at(s))
  end
  -- At most 2^52 µs (a debt is capped, and so is how long it can take to pay).
  return whole + math.min(ceil_div(owed, it.q.limit) * it.q.span, 4503599627370496)
end

-- The most a caller can owe: 1,024 full allowances (below 2^53: limits are below 2^40).
local function debt_cap(it)
  return it.q.limit * 1024
end

-- An up-to, debt or after-debt item of `cost` on `s`, whose caller owed `owed`: decision,
-- charge (not for debt items), and the units owed after it. What is owed is paid first.
local function take(s, it, cost, owed)
  if owed > 0 then
    local _, _, paid = up_to(s, it, owed)
    owed = owed - paid
  end
  if it.c == 1 or it.c == 3 then
    if owed > 0 then
      -- Wait until the debt and one unit (an estimate: its cost) fit.
      local wanted = 1
      if it.c == 3 then wanted = math.max(cost, 1) end
      local waiting = peek(s, it, math.min(owed + wanted, it.q.limit))
      return refused(it.q.limit, 0, waiting[4], waiting[5]), nil, owed
    end
    if it.c == 3 then
      local d, c = evaluate(s, it, cost, now)
      return d, c, 0
    end
    local d, c = up_to(s, it, cost)
    return d, c, 0
  end
  local d, _, got = up_to(s, it, cost)
  owed = math.min(owed + (cost - got), debt_cap(it))
  local remaining = d[3]
  if owed > 0 then remaining = 0 end
  return allowed(it.q.limit, remaining, d[4]), nil, owed
end
