-- tollgate: one script for every store operation, so one SHA is loaded once.
-- ARGV[1] operation ('check', 'peek', 'refund' or 'start'), ARGV[2] now in µs or '' for the
-- server's clock, ARGV[3] key-lifetime slack in ms, ARGV[4] the earliest any pacing item may
-- start, µs (0: no constraint; a cluster batch split over slots aligns its pacing items with
-- it), then 7 arguments per key:
--   kind ('g' GCRA / token bucket, 'p' pacing, 'w' fixed window, 's' sliding counter,
--   'l' sliding log), limit, interval µs, span µs, then
--   check and peek: cost, enforcing (1 or 0), 0;
--   refund: charge kind, charge a, charge b.
-- Check, peek and refund answer {allowed, now, then 8 integers per key: verdict, limit,
-- remaining, reset_after µs, wait µs, charge kind, charge a, charge b} (a refund answers each
-- key's state after it, at the given cost, uncharged). 'start' answers {the latest earliest start of its
-- enforcing pacing keys, µs}.

local STRIDE = 8
local items = {}
for i = 1, #KEYS do
  local base = 4 + (i - 1) * STRIDE
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

local function evaluate(s, it, cost, not_before)
  local kind = it.kind
  if kind == 'g' then return gcra(s, it.q, cost) end
  if kind == 'p' then return pacing(s, it.q, cost, not_before) end
  if kind == 'w' then return fixed_window(s, it.q, cost) end
  if kind == 's' then return sliding_counter(s, it.q, cost) end
  return sliding_log(s, it.q, cost)
end

local function answer(allowed_all, decisions, charges)
  local reply = {allowed_all and 1 or 0, now}
  for i = 1, #items do
    local d, c = decisions[i], charges[i] or {0, 0, 0}
    for _, value in ipairs(d) do reply[#reply + 1] = value end
    for _, value in ipairs(c) do reply[#reply + 1] = value end
  end
  return reply
end

local operation = ARGV[1]

if operation == 'peek' then
  local it = items[1]
  return answer(true, {evaluate(load_state(it.key, it.kind, it.q), it, it.a, now)}, {})
end

if operation == 'refund' then
  for _, it in ipairs(items) do
    local charge, a, b = it.a, it.b, it.c
    if charge == 0 then
      -- Nothing was charged: only report the state.
    elseif it.kind == 'l' then
      if charge == 3 then refund_logged(it.key, it.q.interval, a, b) end
    else
      local s = load_state(it.key, it.kind, it.q)
      if (it.kind == 'g' or it.kind == 'p') and charge == 1 then
        s.tat = math.max(s.tat - a, 0)
      elseif it.kind == 'w' and charge == 2 and a == s.window then
        s.count = math.max(s.count - b, 0)
      elseif it.kind == 's' and charge == 2 then
        if a == s.window then
          s.current = math.max(s.current - b, 0)
        elseif a + 1 == s.window then
          s.previous = math.max(s.previous - b, 0)
        end
      end
      save(it.key, s, it.q)
    end
  end
  local decisions = {}
  for i, it in ipairs(items) do
    decisions[i] = evaluate(load_state(it.key, it.kind, it.q), it, it.d, now)
  end
  return answer(true, decisions, {})
end

-- check: all or nothing over the enforcing items, on working copies of each key's state.
local working = {}
local function state_of(it)
  local s = working[it.key]
  if not s then
    s = load_state(it.key, it.kind, it.q)
    working[it.key] = s
  end
  s.q = it.q
  return s
end

-- Several pacing items are all scheduled at the latest of their earliest slots.
local not_before = math.max(now, tonumber(ARGV[4]))
for _, it in ipairs(items) do
  if it.b == 1 and it.a > 0 and it.kind == 'p' then
    not_before = math.max(not_before, state_of(it).tat)
  end
end
if operation == 'start' then
  return {not_before}
end

local decisions, charges, allowed_all = {}, {}, true
for i, it in ipairs(items) do
  if it.b == 1 then
    local s = state_of(it)
    decisions[i], charges[i] = evaluate(s, it, it.a, not_before)
    if charges[i] then s.dirty = true end
    if decisions[i][1] ~= 0 then allowed_all = false end
  end
end

if not allowed_all then
  -- Nothing is written: every item reports the state as it is, uncharged.
  for i, it in ipairs(items) do
    local fresh = load_state(it.key, it.kind, it.q)
    if it.b == 0 then
      decisions[i] = evaluate(fresh, it, it.a, now)
    elseif decisions[i][1] == 0 then
      decisions[i] = evaluate(fresh, it, 0, now)
    end
    charges[i] = nil
  end
  return answer(false, decisions, charges)
end

-- Shadow items act as if enforced alone, charged because the request goes ahead.
for i, it in ipairs(items) do
  if it.b == 0 then
    local s = state_of(it)
    decisions[i], charges[i] = evaluate(s, it, it.a, now)
    if charges[i] then s.dirty = true end
  end
end
for key, s in pairs(working) do
  if s.dirty then save(key, s, s.q) end
end
return answer(true, decisions, charges)
