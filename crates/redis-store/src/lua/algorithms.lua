-- tollgate: the algorithms, over the same integers as tollgate_core::algorithm.
-- A decision is {verdict, limit, remaining, reset_after, wait}; verdict 0 allowed,
-- 1 limit reached, 2 cost exceeds the limit. A charge is {kind, a, b}: 1 scheduled (a = µs
-- added, b = the TAT right after the charge), 2 window (a = the window's start µs, b = cost),
-- 3 logged (a = at, b = cost), 4 held (a = the hold's id, b = its slots).
--
-- Every check first reads the state in its quota's terms (`normalize`, as the Rust states'
-- `normalize`): a state written under another emission interval or window is rewritten, a clock
-- that stepped back is clamped. A normalisation that changed the state marks it dirty, so it is
-- written even when the check is refused.

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

local function copy(s)
  local c = {}
  for field, value in pairs(s) do c[field] = value end
  return c
end

-- Token bucket, GCRA and pacing: one theoretical arrival time (TAT) and the emission interval
-- it was written under.

-- The longest backlog a quota can build: τ; for pacing, the maximum delay and `limit` slots.
local function reach(q, kind)
  if kind == 'p' then return q.span + q.limit * q.interval end
  return q.span
end

-- The backlog under `q` (GcraState::backlog): how far ahead of schedule the caller is, the
-- stored tat − now rescaled to q's emission interval (whole units owed, rounded up; pacing keeps
-- its schedule) and capped at q's reach.
local function backlog_of(s, q, kind)
  local raw = math.max(s.tat - now, 0)
  local limit = reach(q, kind)
  if raw > 0 and s.interval ~= 0 and s.interval ~= q.interval and kind ~= 'p' then
    local owed = ceil_div(raw, s.interval)
    -- owed × interval may pass 2^53; it only matters whether it passes the reach.
    if owed > idiv(limit, q.interval) then return limit end
    return owed * q.interval
  end
  return math.min(raw, limit)
end

local function normalize_tat(s, q, kind)
  local changed = (s.interval ~= q.interval and s.tat > now) or (s.tat - now > reach(q, kind))
  if s.tat > now then s.tat = now + backlog_of(s, q, kind) end
  s.interval = q.interval
  if changed then s.dirty = true end
end

-- When a pacing request could start at the earliest.
local function earliest_start(s, q)
  return now + backlog_of(s, q, 'p')
end

local function gcra(s, q, cost)
  local backlog = math.max(s.tat - now, 0)
  local remaining_now = idiv(math.max(q.span - backlog, 0), q.interval)
  local early = screen(allowed(q.limit, remaining_now, backlog), cost)
  if early then return early end
  local added = cost * q.interval
  local new_backlog = backlog + added
  if new_backlog > q.span then
    return refused(q.limit, remaining_now, backlog, new_backlog - q.span)
  end
  s.tat = now + new_backlog
  return allowed(q.limit, idiv(q.span - new_backlog, q.interval), new_backlog), {1, added, s.tat}
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
    {1, next_free - scheduled_until, next_free}
end

-- Gives back what is left of a scheduled charge (GcraState::refund): min(µs, until − now,
-- tat − now) — nothing once `until` has passed, never more than the caller owes, and the same in
-- whatever order receipts come back. Nothing when the state's emission interval is not the
-- charge's. Pacing gives back only its latest booking, the part of [until − µs, until) not yet
-- past: a slot promised to later bookings stays booked.
local function refund_tat(s, it, micros, ends)
  if s.interval ~= 0 and s.interval ~= it.q.interval then return end
  local held
  if it.kind == 'p' then
    if ends < s.tat then return end
    held = math.max(s.tat - math.max(ends - micros, now, 0), 0)
  else
    held = math.max(math.min(micros, ends - now, s.tat - now), 0)
  end
  if held > 0 then
    s.tat = math.max(s.tat - held, 0)
    s.dirty = true
  end
end

-- Windows: start at whole multiples of their length since the epoch.

local function window_start(at, length)
  return idiv(at, length) * length
end

-- Whether [a, a + a_len) and [b, b + b_len) share an instant.
local function overlaps(a, a_len, b, b_len)
  return a < b + b_len and a + a_len > b
end

-- WindowCount::normalize: moves the state to q's window that "now" falls in; answers "now",
-- never earlier than the stored window's start.
local function normalize_window(s, q)
  local length = q.interval
  local at = now
  if s.length ~= 0 and s.start > at then at = s.start end
  local start = window_start(at, length)
  local count
  if s.length == length then
    -- A count above a lowered limit is cut to the limit.
    if s.start == start then count = math.min(s.count, q.limit) else count = 0 end
  elseif s.length == 0 or s.start + s.length <= at
    or not overlaps(s.start, s.length, start, length) then
    count = 0
  else
    count = math.min(s.count, q.limit)
  end
  if s.length ~= 0 and (start ~= s.start or length ~= s.length or count ~= s.count) then
    s.dirty = true
  end
  s.start, s.length, s.count = start, length, count
  return at
end

local function fixed_window(s, q, cost)
  normalize_window(s, q)
  -- Measured from the real "now": after a clock stepped back, the wait holds.
  local reset_after = s.start + s.length - now
  local remaining_now = math.max(q.limit - s.count, 0)
  local early = screen(allowed(q.limit, remaining_now, reset_after), cost)
  if early then return early end
  if cost > remaining_now then
    return refused(q.limit, remaining_now, reset_after, reset_after)
  end
  s.count = s.count + cost
  return allowed(q.limit, remaining_now - cost, reset_after), {2, s.start, cost}
end

-- Takes a window charge out of the window it went into, if that window is still running (same
-- start, same length, not ended).
local function refund_window(s, q, start, cost)
  if start == s.start and s.length == q.interval and s.count > 0
    and s.start + s.length > now then
    s.count = math.max(s.count - cost, 0)
    s.dirty = true
  end
end

-- ceil(count × overlap / length), exactly.
local function weighted_up(count, overlap, length)
  local weighted, leftover = muldiv(count, overlap, length)
  if leftover > 0 then weighted = weighted + 1 end
  return weighted
end

-- SlidingCounts::normalize: rolls the state in its own length to the window "now" falls in,
-- then, under another length, folds the estimate (previous weighted, rounded up, plus current,
-- capped at the limit) into the new window's current count. Answers "now", never earlier than
-- the stored window's start.
local function normalize_sliding(s, q)
  local length = q.interval
  if s.length == 0 then
    s.start, s.length, s.previous, s.current = window_start(now, length), length, 0, 0
    return now
  end
  local before = {s.start, s.length, s.previous, s.current}
  local at = math.max(now, s.start)
  local start = window_start(at, s.length)
  if start ~= s.start then
    if start == s.start + s.length then s.previous = s.current else s.previous = 0 end
    s.current, s.start = 0, start
  end
  -- A lowered limit: counts above it would make a caller wait longer than the new quota ever
  -- could.
  s.previous = math.min(s.previous, q.limit)
  s.current = math.min(s.current, q.limit)
  if s.length ~= length then
    local elapsed = math.min(at - s.start, s.length)
    local weighted = weighted_up(s.previous, s.length - elapsed, s.length)
    local used = math.min(s.current + weighted, q.limit)
    s.start, s.length, s.previous, s.current = window_start(at, length), length, 0, used
  end
  if s.start ~= before[1] or s.length ~= before[2] or s.previous ~= before[3]
    or s.current ~= before[4] then
    s.dirty = true
  end
  return at
end

-- The smallest elapsed time e at which weight × (length − e) <= room × length.
local function earliest_fit(weight, room, length)
  if weight == 0 or room >= weight then return 0 end
  return length - muldiv(room, length, weight)
end

-- Compared exactly: previous × (length − elapsed) + current × length against limit × length
-- is the same test as current + ceil(previous × (length − elapsed) / length) against the limit,
-- since the other terms are whole.
local function sliding_counter(s, q, cost)
  local at = normalize_sliding(s, q)
  -- After a clock stepped back the estimate is made at the window's start, and the waits are
  -- measured from the real "now", so they hold.
  local lag = at - now
  local length = s.length
  local elapsed = math.min(at - s.start, length)
  local weighted = weighted_up(s.previous, length - elapsed, length)
  local function remaining()
    return math.max(q.limit - s.current - weighted, 0)
  end
  local function window_end(extra)
    return math.max(s.start + length * (1 + extra) - now, 0)
  end
  local reset_after = 0
  if s.current > 0 then
    reset_after = window_end(1)
  elseif s.previous > 0 then
    reset_after = window_end(0)
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
    return refused(q.limit, remaining(), reset_after, retry_after + lag)
  end
  s.current = s.current + cost
  return allowed(q.limit, remaining(), window_end(1)), {2, s.start, cost}
end

-- Takes a window charge out of the window it went into while that window still counts (as the
-- current or the previous one, under the same length).
local function refund_sliding(s, q, start, cost)
  if s.length ~= q.interval then return end
  -- Where the windows stand now: a charge whose window has slid out holds nothing.
  local rolled = window_start(math.max(now, s.start), s.length)
  if rolled ~= s.start then
    if rolled == s.start + s.length then s.previous = s.current else s.previous = 0 end
    s.current, s.start, s.dirty = 0, rolled, true
  end
  if start == s.start then
    if s.current > 0 then s.dirty = true end
    s.current = math.max(s.current - cost, 0)
  elseif start + s.length == s.start then
    if s.previous > 0 then s.dirty = true end
    s.previous = math.max(s.previous - cost, 0)
  end
end

-- Sliding window log: one entry per instant, {at, cost, cumulative}, where cumulative is the
-- running total of every cost logged (so the live total is read off two entries, not summed).

-- The log as a check at "now" under `window` sees it (ChargeLog::check's opening): "now" no
-- earlier than the newest entry; entries that left the window are dropped (the cutoff only
-- grows, and is written back). Answers that "now", the live total and the cumulative total
-- before the oldest live entry.
local function log_live(s, window)
  local newest = s.newest
  local at = now
  if newest and newest.at > at then at = newest.at end
  local cutoff = at - window
  if s.cutoff and s.cutoff > cutoff then cutoff = s.cutoff end
  s.cutoff = cutoff
  if not newest or newest.at <= cutoff then
    return at, 0, newest and newest.cumulative or 0
  end
  local oldest = log_oldest_live(s.key, cutoff)
  if not oldest or oldest.at > newest.at then oldest = newest end
  local base = oldest.cumulative - oldest.cost
  return at, newest.cumulative - base, base
end

local function sliding_log(s, q, cost)
  local window = q.interval
  local at, total, base = log_live(s, window)
  -- Waits are measured from the real "now", so they hold after a clock stepped back.
  local newest = s.newest
  local reset_after = 0
  if newest and newest.at > s.cutoff then reset_after = math.max(newest.at + window - now, 0) end
  local remaining_now = math.max(q.limit - total, 0)
  local early = screen(allowed(q.limit, remaining_now, reset_after), cost)
  if early then return early end
  if cost > remaining_now then
    -- The oldest entries must slide out until the cost fits.
    local oldest_to_go = log_first_reaching(s, base + total + cost - q.limit)
    local retry_after = 0
    if oldest_to_go then retry_after = math.max(oldest_to_go + window - now, 0) end
    return refused(q.limit, remaining_now, reset_after, retry_after)
  end
  local cumulative = (newest and newest.cumulative or base) + cost
  if newest and newest.at == at then
    s.newest = {at = at, cost = newest.cost + cost, cumulative = cumulative}
  else
    s.newest = {at = at, cost = cost, cumulative = cumulative}
  end
  s.newest_changed = true
  s.dirty = true
  return allowed(q.limit, remaining_now - cost, at + window - now), {3, at, cost}
end

-- Takes back a charge this script logged (it is the newest entry): the entry shrinks, and goes
-- (the stored newest is the newest again) when nothing is left of it.
local function refund_log_working(s, q, at, cost)
  local newest = s.newest
  if not newest then return end
  if at + q.interval <= math.max(now, newest.at) or newest.at ~= at then return end
  local taken = math.min(cost, newest.cost)
  if newest.cost - taken > 0 then
    s.newest = {at = at, cost = newest.cost - taken, cumulative = newest.cumulative - taken}
  else
    s.newest = s.stored_newest
  end
  s.newest_changed = s.newest ~= s.stored_newest
end

-- Concurrency: `cost` slots taken as hold `hold` when that many are free; a refusal waits the
-- quota's own retry-after (its interval). Nothing resets on its own: reset_after is 0.
local function concurrency(s, q, cost, hold)
  local free = math.max(q.limit - s.held, 0)
  local early = screen(allowed(q.limit, free, 0), cost)
  if early then return early end
  if cost > free then return refused(q.limit, free, 0, q.interval) end
  local adds = copy(s.adds)
  adds[hold] = cost
  s.adds, s.held, s.ttl, s.dirty = adds, s.held + cost, q.span, true
  return allowed(q.limit, free - cost, 0), {4, hold, cost}
end

-- Gives back hold `hold`: this script's own is not written at all; a stored one is removed.
local function refund_held(s, hold, slots)
  local adds, removes = copy(s.adds), copy(s.removes)
  if adds[hold] then
    adds[hold] = nil
    s.held = s.held - slots
  else
    removes[hold] = slots
  end
  s.adds, s.removes, s.dirty = adds, removes, true
end

-- Evaluates `cost` of item `it` on state `s` (normalising it first) and charges it if allowed.
local function evaluate(s, it, cost, not_before)
  local kind, q = it.kind, it.q
  if kind == 'g' or kind == 'p' then
    normalize_tat(s, q, kind)
    if kind == 'p' then return pacing(s, q, cost, not_before) end
    return gcra(s, q, cost)
  end
  if kind == 'w' then return fixed_window(s, q, cost) end
  if kind == 's' then return sliding_counter(s, q, cost) end
  if kind == 'c' then return concurrency(s, q, cost, it.d) end
  -- Every check of a log that exists writes it back: its trim, and its expiry from its newest
  -- entry under this (perhaps longer) window.
  if s.exists then s.dirty = true end
  return sliding_log(s, q, cost)
end

-- Would `cost` pass? Evaluates a copy; charges nothing.
local function peek(s, it, cost)
  return evaluate(copy(s), it, cost, now)
end

-- Undoes a charge {kind, a, b} on a state, by the Rust rules.
local function refund_working(s, it, charge)
  local kind, a, b = charge[1], charge[2], charge[3]
  if kind == 1 and s.fam == 't' then refund_tat(s, it, a, b)
  elseif kind == 2 and s.fam == 'w' then refund_window(s, it.q, a, b)
  elseif kind == 2 and s.fam == 's' then refund_sliding(s, it.q, a, b)
  elseif kind == 3 and s.fam == 'l' then refund_log_working(s, it.q, a, b)
  elseif kind == 4 and s.fam == 'c' then refund_held(s, a, b)
  end
end

-- How much longer (µs) a charge {kind, a, b} made under `it`'s quota can matter: a schedule
-- until its TAT passes, a window until it ends (a sliding counter's one more window, while it
-- weighs in the estimate), a log entry until it leaves the window.
local function charge_lifetime(it, kind, a, b)
  local length = it.q.interval
  if kind == 1 then return b - now end
  if kind == 2 and it.kind == 's' then return a + 2 * length - now end
  if kind == 2 then return a + length - now end
  return a + length - now
end
