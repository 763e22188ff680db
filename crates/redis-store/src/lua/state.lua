-- tollgate: reading and writing one key's state. Timestamps (token bucket, GCRA, pacing) and
-- windows are short strings; a log is a sorted set of "at:cost" members scored by "at".
-- Every write sets the key to expire once dropping it would lose nothing.

local function load(key, kind)
  if kind == 'g' or kind == 'p' then
    return {kind = kind, tat = tonumber(redis.call('GET', key) or '0') or 0}
  elseif kind == 'w' then
    local window, count = string.match(redis.call('GET', key) or '', '^(%d+):(%d+)$')
    return {kind = kind, window = tonumber(window) or 0, count = tonumber(count) or 0}
  elseif kind == 's' then
    local window, previous, current =
      string.match(redis.call('GET', key) or '', '^(%d+):(%d+):(%d+)$')
    return {
      kind = kind,
      window = tonumber(window) or 0,
      previous = tonumber(previous) or 0,
      current = tonumber(current) or 0,
    }
  end
  return nil
end

-- A log entry from its sorted-set member "at:cost:cumulative".
local function log_entry(member)
  if not member then return nil end
  local at, cost, cumulative = string.match(member, '^(%d+):(%d+):(%d+)$')
  if not at then return nil end
  return {at = tonumber(at), cost = tonumber(cost), cumulative = tonumber(cumulative)}
end

local function log_member(entry)
  return fmt(entry.at) .. ':' .. fmt(entry.cost) .. ':' .. fmt(entry.cumulative)
end

-- A log's state, read in O(log n): its newest entry, its oldest live one, and a binary search
-- over ranks for the refusal path. `window` is its length in µs.
local function load_log(key, window)
  local newest = log_entry(redis.call('ZRANGE', key, -1, -1)[1])
  local at_now = now
  if newest and newest.at > at_now then at_now = newest.at end
  local cutoff = at_now - window
  local oldest = log_entry(
    redis.call('ZRANGEBYSCORE', key, '(' .. fmt(cutoff), '+inf', 'LIMIT', 0, 1)[1])
  local s = {kind = 'l', newest = newest, total = 0, base = 0, cutoff = cutoff}
  if oldest and newest then
    s.base = oldest.cumulative - oldest.cost
    s.total = newest.cumulative - s.base
  elseif newest then
    s.base = newest.cumulative
  end
  s.first_reaching = function(target)
    local low = redis.call('ZCOUNT', key, '-inf', fmt(cutoff))
    local high = redis.call('ZCARD', key) - 1
    local found = nil
    while low <= high do
      local middle = idiv(low + high, 2)
      local entry = log_entry(redis.call('ZRANGE', key, middle, middle)[1])
      if entry and entry.cumulative >= target then
        found, high = entry.at, middle - 1
      else
        low = middle + 1
      end
    end
    -- Entries of this request not written yet come after every stored one.
    if not found and s.newest and s.newest.cumulative >= target then found = s.newest.at end
    return found
  end
  return s
end

-- Keeps a log alive one window after its newest entry (a log with no entries is gone).
local function expire_log(key, window)
  local newest = log_entry(redis.call('ZRANGE', key, -1, -1)[1])
  if newest then
    redis.call('PEXPIRE', key, ttl_ms(math.max(newest.at + window - now, 0)))
  end
end

local function load_state(key, kind, q)
  if kind == 'l' then return load_log(key, q.interval) end
  return load(key, kind)
end

local function save(key, s, q)
  local kind = s.kind
  if kind == 'g' or kind == 'p' then
    if s.tat > now then
      redis.call('SET', key, fmt(s.tat), 'PX', ttl_ms(s.tat - now))
    else
      redis.call('DEL', key)
    end
  elseif kind == 'w' then
    if s.count > 0 then
      local value = fmt(s.window) .. ':' .. fmt(s.count)
      redis.call('SET', key, value, 'PX', ttl_ms(until_window_end(q, s.window, 0)))
    else
      redis.call('DEL', key)
    end
  elseif kind == 's' then
    if s.previous > 0 or s.current > 0 then
      local value = fmt(s.window) .. ':' .. fmt(s.previous) .. ':' .. fmt(s.current)
      redis.call('SET', key, value, 'PX', ttl_ms(until_window_end(q, s.window, 1)))
    else
      redis.call('DEL', key)
    end
  else
    redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(s.cutoff))
    if s.newest_changed then
      local at = fmt(s.newest.at)
      redis.call('ZREMRANGEBYSCORE', key, at, at)
      redis.call('ZADD', key, at, log_member(s.newest))
    end
    expire_log(key, q.interval)
  end
end

-- Writes log entries with as few ZADD calls as Lua's argument limit allows.
local function add_entries(key, entries)
  local args = {}
  for _, entry in ipairs(entries) do
    args[#args + 1] = fmt(entry.at)
    args[#args + 1] = log_member(entry)
    if #args >= 1000 then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  if #args > 0 then redis.call('ZADD', key, unpack(args)) end
end

-- Takes back a log entry's charge: the entry shrinks, and every later entry's cumulative
-- total with it (so refunding the newest entry, the usual case, touches one member; an older
-- one rewrites the entries after it). An entry that has expired counts no more, so taking it
-- back changes nothing and is skipped.
local function refund_logged(key, window, at, cost)
  local entry = log_entry(redis.call('ZRANGEBYSCORE', key, fmt(at), fmt(at))[1])
  if not entry then return end
  local newest = log_entry(redis.call('ZRANGE', key, -1, -1)[1])
  local at_now = now
  if newest and newest.at > at_now then at_now = newest.at end
  if entry.at + window <= at_now then return end
  local taken = math.min(cost, entry.cost)
  local rewritten = {}
  entry.cost, entry.cumulative = entry.cost - taken, entry.cumulative - taken
  if entry.cost > 0 then rewritten[1] = entry end
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', key, '(' .. fmt(at), '+inf')) do
    local later = log_entry(member)
    if later then
      later.cumulative = later.cumulative - taken
      rewritten[#rewritten + 1] = later
    end
  end
  redis.call('ZREMRANGEBYSCORE', key, fmt(at), '+inf')
  add_entries(key, rewritten)
  expire_log(key, window)
end
