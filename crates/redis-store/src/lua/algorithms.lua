-- tollgate: the algorithms, over the same integers as tollgate_core::algorithm.
-- A decision is {verdict, limit, remaining, reset_after, wait}; verdict 0 allowed,
-- 1 limit reached, 2 cost exceeds the limit. A charge is {kind, a, b}: 1 scheduled (a = µs),
-- 2 window (a = window, b = cost), 3 logged (a = at, b = cost).

local function allowed(limit, remaining, reset_after, delay)
  return {0, limit, remaining, reset_after, delay or 0}
end

local function refused(limit, remaining, reset_after, retry_after)
  return {1, limit, remaining, reset_after, retry_after}
end

-- Zero cost reports the current state; a cost above the limit never fits.
local function screen(current, cost)
  if cost == 0 then return current end
  if cost > current[2] then return {2, current[2], current[3], current[4], 0} end
  return nil
end

-- Token bucket and GCRA: one theoretical arrival time.
local function gcra(s, q, cost)
  local debt = math.max(s.tat - now, 0)
  local remaining_now = idiv(math.max(q.span - debt, 0), q.interval)
  local early = screen(allowed(q.limit, remaining_now, debt), cost)
  if early then return early end
  local added = cost * q.interval
  local new_debt = debt + added
  if new_debt > q.span then
    return refused(q.limit, remaining_now, debt, new_debt - q.span)
  end
  s.tat = now + new_debt
  return allowed(q.limit, idiv(q.span - new_debt, q.interval), new_debt), {1, added, 0}
end

-- Leaky bucket as pacing: the next free slot; the decision carries the delay.
local function pacing(s, q, cost, not_before)
  local function slots_left(backlog)
    if backlog <= q.span then return idiv(q.span - backlog, q.interval) + 1 end
    return 0
  end
  local backlog = math.max(s.tat - now, 0)
  local early = screen(allowed(q.limit, slots_left(backlog), backlog), cost)
  if early then return early end
  local scheduled_until = math.max(s.tat, now)
  local start = math.max(scheduled_until, not_before)
  local delay = start - now
  if delay > q.span then
    return refused(q.limit, slots_left(backlog), backlog, delay - q.span)
  end
  local next_free = start + cost * q.interval
  s.tat = next_free
  local new_backlog = next_free - now
  return allowed(q.limit, slots_left(new_backlog), new_backlog, delay),
    {1, next_free - scheduled_until, 0}
end

-- Windows are numbered from the Unix epoch and never go back for a key.
local function window_number(q, latest_seen)
  return math.max(idiv(now, q.interval), latest_seen)
end

local function until_window_end(q, window, extra)
  return math.max((window + 1 + extra) * q.interval - now, 0)
end

local function fixed_window(s, q, cost)
  local window = window_number(q, s.window)
  if window ~= s.window then
    s.window, s.count = window, 0
  end
  local reset_after = until_window_end(q, window, 0)
  local remaining_now = math.max(q.limit - s.count, 0)
  local early = screen(allowed(q.limit, remaining_now, reset_after), cost)
  if early then return early end
  if cost > remaining_now then
    return refused(q.limit, remaining_now, reset_after, reset_after)
  end
  s.count = s.count + cost
  return allowed(q.limit, remaining_now - cost, reset_after), {2, window, cost}
end

-- The smallest elapsed time e at which weight × (length − e) <= room × length.
local function earliest_fit(weight, room, length)
  if weight == 0 or room >= weight then return 0 end
  return length - muldiv(room, length, weight)
end

local function sliding_counter(s, q, cost)
  local length = q.interval
  local window = window_number(q, s.window)
  if window ~= s.window then
    if window == s.window + 1 then s.previous = s.current else s.previous = 0 end
    s.window, s.current = window, 0
  end
  local elapsed = math.min(math.max(now - window * length, 0), length)
  -- The previous window's weight, rounded up: ceil(previous × overlap / length).
  local weighted, leftover = muldiv(s.previous, length - elapsed, length)
  if leftover > 0 then weighted = weighted + 1 end
  local function remaining()
    return math.max(q.limit - s.current - weighted, 0)
  end
  local reset_after = 0
  if s.current > 0 then
    reset_after = until_window_end(q, window, 1)
  elseif s.previous > 0 then
    reset_after = until_window_end(q, window, 0)
  end
  local early = screen(allowed(q.limit, remaining(), reset_after), cost)
  if early then return early end
  if s.current + cost + weighted > q.limit then
    local retry_after
    if s.current + cost <= q.limit then
      -- Fits later in this window, once enough of the previous one has slid out.
      local room = q.limit - s.current - cost
      retry_after = math.max(earliest_fit(s.previous, room, length) - elapsed, 1)
    else
      -- This window's count must become the previous one's and slide out in turn.
      retry_after = (length - elapsed) + earliest_fit(s.current, q.limit - cost, length)
    end
    return refused(q.limit, remaining(), reset_after, retry_after)
  end
  s.current = s.current + cost
  return allowed(q.limit, remaining(), until_window_end(q, window, 1)), {2, window, cost}
end

-- Sliding window log: one entry per instant, {at, cost, cumulative}, where cumulative is the
-- running total of every cost logged (so the live total is read off two entries, not summed).
-- The state holds the newest entry, the live total, the cumulative total before the oldest live
-- entry (`base`), and `first_reaching(c)`: the time of the oldest entry whose cumulative total
-- reaches c (entries not yet written included).
local function sliding_log(s, q, cost)
  local window, newest = q.interval, s.newest
  -- A clock that went backwards counts as no time passing.
  local at = now
  if newest and newest.at > at then at = newest.at end
  local reset_after = 0
  if newest then reset_after = math.max(newest.at + window - at, 0) end
  local remaining_now = math.max(q.limit - s.total, 0)
  local early = screen(allowed(q.limit, remaining_now, reset_after), cost)
  if early then return early end
  if cost > remaining_now then
    -- The oldest entries must slide out until the cost fits.
    local oldest_to_go = s.first_reaching(s.base + s.total + cost - q.limit)
    local retry_after = 0
    if oldest_to_go then retry_after = math.max(oldest_to_go + window - at, 0) end
    return refused(q.limit, remaining_now, reset_after, retry_after)
  end
  local cumulative = (newest and newest.cumulative or s.base) + cost
  if newest and newest.at == at then
    newest.cost, newest.cumulative = newest.cost + cost, cumulative
  else
    s.newest = {at = at, cost = cost, cumulative = cumulative}
  end
  s.total = s.total + cost
  s.newest_changed = true
  return allowed(q.limit, remaining_now - cost, window), {3, at, cost}
end
