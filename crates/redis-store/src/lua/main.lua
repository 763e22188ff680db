-- tollgate: one script for every store operation, so one SHA is loaded once.
-- ARGV[1] operation ('check', 'enforce', 'peek', 'refund', 'renew' or 'start'; 'enforce' is a
-- check that leaves shadow items uncharged; 'renew' extends concurrency holds), ARGV[2] now in µs or '' for the server's clock, ARGV[3]
-- key-lifetime slack in ms, ARGV[4] the earliest any pacing item may start, µs (0: no
-- constraint; a cluster batch split over slots aligns its pacing items with it), ARGV[5] when
-- the caller stops waiting, µs on this clock (0: no deadline; a check or enforce that starts
-- later charges nothing and answers the error TOLLGATE_LATE), then 8 arguments per item:
--   kind ('g' GCRA / token bucket, 'p' pacing, 'w' fixed window, 's' sliding counter,
--   'l' sliding log, 'c' concurrency), limit, interval µs, span µs, then
--   check, enforce, peek and start: cost, mode (1 enforcing, 0 shadow, 2 read-only: checked
--   like an enforcing item, never charged), take (0 exact, 1 up to, 2 as debt, 3 after
--   debt: see taking.lua), and a concurrency item's hold id (0 for others);
--   renew: the hold's id and slots, 0, 0;
--   refund: charge kind, charge a, charge b, the cost to report the state at afterwards.
-- KEYS: one state key per item; a check with up-to, debt or after-debt items follows them with one debt
-- key per item (an exact item's place is never read); a refund may follow them with one refund marker per item
-- (`<prefix>:r1:{<the state key's hash tag>}:<receipt id>`): the refund is applied only if it
-- can set its marker (SET NX, for as long as the charge can matter), so a retried refund gives
-- back once. Without markers (compensating a refused cross-slot batch) refunds apply as sent,
-- a bucket's by a rule that does not depend on the order of concurrent refunds.
-- Check, enforce, peek and refund answer {allowed, now, then 9 integers per item: verdict, limit,
-- remaining, reset_after µs, wait µs, charge kind, charge a, charge b, units owed} (a refund answers each
-- item's state after it, at the given cost, uncharged). 'start' answers {the latest earliest
-- start of its enforcing pacing items, µs}.

local STRIDE = 8
local items = {}
local HEADER = 5
for i = 1, idiv(#ARGV - HEADER, STRIDE) do
  local base = HEADER + (i - 1) * STRIDE
  items[i] = {
    key = KEYS[i],
    kind = ARGV[base + 1],
    q = {
      limit = tonumber(ARGV[base + 2]),
      interval = tonumber(ARGV[base + 3]),
      span = tonumber(ARGV[base + 4]),
    },
    a = tonumber(ARGV[base + 5]),
    b = tonumber(ARGV[base + 6]),
    c = tonumber(ARGV[base + 7]),
    d = tonumber(ARGV[base + 8]),
  }
end

local function load_state(it)
  if it.kind == 'l' then return load_log(it.key) end
  return load(it.key, it.kind)
end

local owed = {}

local function answer(allowed_all, decisions, charges)
  local reply = {allowed_all and 1 or 0, now}
  for i = 1, #items do
    local d, c = decisions[i], charges[i] or {0, 0, 0}
    for _, value in ipairs(d) do reply[#reply + 1] = value end
    for _, value in ipairs(c) do reply[#reply + 1] = value end
    reply[#reply + 1] = owed[i] or 0
  end
  return reply
end

local operation = ARGV[1]

if operation == 'peek' then
  local it = items[1]
  return answer(true, {peek(load_state(it), it, it.a)}, {})
end

if operation == 'renew' then
  -- Each item: its hold's id and slots in place of cost and mode (a = id, b = slots).
  local renewed = 0
  for _, it in ipairs(items) do
    renewed = renewed + renew_hold(it.key, it.a, it.b, it.q.span)
  end
  return {renewed}
end

if operation == 'refund' then
  local markers = #KEYS >= 2 * #items
  -- Every state is read before anything is written, so an unreadable one stops the refund
  -- before a marker is set.
  for _, it in ipairs(items) do load_state(it) end
  -- Newest first, as a refused batch takes its charges back: a bucket's charge gives back
  -- only the part of the schedule it still holds, so the later ones must go first.
  for i = #items, 1, -1 do
    local it = items[i]
    local kind, a, b = it.a, it.b, it.c
    local apply = kind ~= 0
    -- A hold is given back by removing its members, which happens once however often it is
    -- sent: no marker.
    if apply and markers and kind ~= 4 then
      -- Nothing is held once the charge cannot matter; otherwise the marker makes this refund
      -- happen once, however often it is sent.
      local lifetime = charge_lifetime(it, kind, a, b)
      apply = lifetime > 0
        and redis.call('SET', KEYS[#items + i], '1', 'NX', 'PX', ttl_ms(lifetime)) ~= false
    end
    if apply then
      if it.kind == 'l' then
        if kind == 3 then refund_logged(it.key, it.q.interval, a, b) end
      else
        local s = load_state(it)
        refund_working(s, it, {kind, a, b})
        if s.dirty then save(s) end
      end
    end
  end
  local decisions = {}
  for i, it in ipairs(items) do
    decisions[i] = peek(load_state(it), it, it.d)
  end
  return answer(true, decisions, {})
end

-- A check or enforce that starts after its caller stopped waiting charges nothing: the caller
-- was answered by its failure policy (a server stalled with calls queued, say).
local deadline = tonumber(ARGV[5])
if operation ~= 'start' and deadline > 0 and now > deadline then
  -- "now" first: the store learns the server's clock from a declined call too.
  return redis.error_reply(string.format('TOLLGATE_LATE %.0f the call started %.0f us after its '
    .. 'caller stopped waiting; nothing was charged', now, now - deadline))
end

-- check, enforce and start: on working copies of each key's state, written back at the end.
local working = {}
local function state_of(it)
  local s = working[it.key]
  if not s then
    s = load_state(it)
    working[it.key] = s
  end
  return s
end

-- Several pacing items are all scheduled at the latest of their earliest slots.
local not_before = math.max(now, tonumber(ARGV[4]))
for _, it in ipairs(items) do
  if it.b == 1 and it.a > 0 and it.kind == 'p' then
    not_before = math.max(not_before, earliest_start(state_of(it), it.q))
  end
end
if operation == 'start' then
  return {not_before}
end

local function check(it, cost, moment)
  local s = state_of(it)
  local decision, charge = evaluate(s, it, cost, moment)
  if charge then s.dirty = true end
  -- A log's expiry follows the window of the last quota it was checked under.
  s.window = it.q.interval
  return decision, charge
end

-- Debts as this script sees them, by key: {units, lapses_at, stored} (written at the end, with
-- the states, so a script that stops on an unreadable value has written nothing).
local debts = {}

local function write_back()
  for _, s in pairs(working) do
    if s.dirty then save(s, s.window) end
  end
  for key, debt in pairs(debts) do
    if debt.units > 0 then
      redis.call('SET', key, fmt(debt.units) .. ':' .. fmt(debt.lapses_at),
        'PX', ttl_ms(debt.lapses_at - now))
    elseif debt.stored then
      redis.call('DEL', key)
    end
  end
end

local function debt_of(key)
  local debt = debts[key]
  if debt then return debt end
  debt = {units = 0, lapses_at = 0, stored = false}
  local value = redis.call('GET', key)
  if value then
    local units, lapses_at = string.match(value, '^(%d+):(%d+)$')
    if not units then unreadable(key, '"owed:lapses_at"') end
    debt.stored = true
    -- The key's own expiry is the server's; the lapse is read on the script's clock.
    if tonumber(lapses_at) > now then debt.units = tonumber(units) end
  end
  debts[key] = debt
  return debt
end

-- An up-to, debt or after-debt item: its caller's debt is read, settled and written back with it. What it
-- paid and what it owes stay, whatever the rest of the batch does.
local function check_taking(i, it)
  local debt = debt_of(KEYS[#items + i])
  local s = state_of(it)
  local decision, charge, after = take(s, it, it.a, debt.units)
  s.dirty = true
  s.window = it.q.interval
  debt.units = after
  if after > 0 then debt.lapses_at = debt_lapses_at(s, it, after) end
  owed[i] = after
  return decision, charge
end

local decisions, charges, allowed_all = {}, {}, true
for i, it in ipairs(items) do
  if it.b == 1 and it.c ~= 0 then
    decisions[i], charges[i] = check_taking(i, it)
    if decisions[i][1] ~= 0 then allowed_all = false end
  elseif it.b == 1 then
    decisions[i], charges[i] = check(it, it.a, not_before)
    if decisions[i][1] ~= 0 then allowed_all = false end
  elseif it.b == 2 then
    decisions[i] = peek(state_of(it), it, it.a)
    if decisions[i][1] ~= 0 then allowed_all = false end
  end
end

if not allowed_all then
  -- All or nothing: take back every charge, newest first; then report every item that did not
  -- refuse as it stands with none of them charged (items may share keys). What the checks
  -- normalised is kept.
  for i = #items, 1, -1 do
    if charges[i] then
      refund_working(state_of(items[i]), items[i], charges[i])
      charges[i] = nil
    end
  end
  for i, it in ipairs(items) do
    if it.b == 0 then
      decisions[i] = peek(state_of(it), it, it.a)
    elseif it.b == 1 and decisions[i][1] == 0 then
      decisions[i] = peek(state_of(it), it, 0)
    end
  end
  write_back()
  return answer(false, decisions, charges)
end

if operation == 'enforce' then
  -- One slot's part of a request split over several: whether the request goes ahead is not
  -- known yet, so shadow items only report (they are checked once it is, in a call of their own).
  for i, it in ipairs(items) do
    if it.b == 0 then decisions[i] = peek(state_of(it), it, it.a) end
  end
  write_back()
  return answer(true, decisions, charges)
end

-- Shadow items act as if enforced alone, charged because the request goes ahead.
for i, it in ipairs(items) do
  if it.b == 0 then
    decisions[i], charges[i] = check(it, it.a, now)
  end
end
write_back()
return answer(true, decisions, charges)
