-- tollgate: reading and writing one key's state. Every state records what it was written under,
-- so it keeps its meaning when the quota changes (see tollgate_core::algorithm):
--   t2 (token bucket, GCRA, pacing): "tat:interval", µs;
--   w2 (fixed window): "start:length:count", µs and units;
--   s2 (sliding counter): "start:length:previous:current";
--   l3 (sliding log): a sorted set of "at:cost:cumulative" members scored by "at" (absolute
--   times, read with the current window).
-- A state is a table {fam = 't' | 'w' | 's' | 'l', key = ..., ...}; `exists` says whether the
-- key held one, `dirty` whether it must be written back. Every write sets the key to expire once
-- dropping it would lose nothing, and deletes it when that is already so.

-- The fields of the value at `key` matching `pattern`, as numbers; nil when the key holds
-- nothing. A value that does not match, or whose interval or length is 0, is unreadable.
local function parse(key, pattern, expected)
  local value = redis.call('GET', key)
  if not value then return nil end
  local fields = {string.match(value, pattern)}
  if #fields == 0 then unreadable(key, expected) end
  for i, field in ipairs(fields) do fields[i] = tonumber(field) end
  if fields[2] == 0 or fields[1] >= TWO_53 then unreadable(key, expected) end
  return fields
end

local function load(key, kind)
  if kind == 'g' or kind == 'p' then
    local f = parse(key, '^(%d+):(%d+)$', '"tat:interval"') or {0, 0}
    return {fam = 't', key = key, exists = f[2] ~= 0, tat = f[1], interval = f[2]}
  elseif kind == 'w' then
    local f = parse(key, '^(%d+):(%d+):(%d+)$', '"start:length:count"') or {0, 0, 0}
    return {
      fam = 'w', key = key, exists = f[2] ~= 0, start = f[1], length = f[2], count = f[3],
    }
  elseif kind == 's' then
    local f = parse(key, '^(%d+):(%d+):(%d+):(%d+)$', '"start:length:previous:current"')
      or {0, 0, 0, 0}
    return {
      fam = 's', key = key, exists = f[2] ~= 0,
      start = f[1], length = f[2], previous = f[3], current = f[4],
    }
  end
  return nil
end

-- A log entry from its sorted-set member "at:cost:cumulative" (nil for no member).
local function log_entry(key, member)
  if not member then return nil end
  local at, cost, cumulative = string.match(member, '^(%d+):(%d+):(%d+)$')
  if not at then unreadable(key, 'log members "at:cost:cumulative"') end
  return {at = tonumber(at), cost = tonumber(cost), cumulative = tonumber(cumulative)}
end

local function log_member(entry)
  return fmt(entry.at) .. ':' .. fmt(entry.cost) .. ':' .. fmt(entry.cumulative)
end

local function stored_newest(key)
  return log_entry(key, redis.call('ZRANGE', key, -1, -1)[1])
end

-- A log's working state: the stored newest entry, the newest entry as this script sees it
-- (a charge of this script replaces it until written), and the cutoff below which entries have
-- left the window (it only grows, and is written back as a trim).
local function load_log(key)
  local newest = stored_newest(key)
  return {
    fam = 'l', key = key, exists = newest ~= nil,
    stored_newest = newest, newest = newest, newest_changed = false, cutoff = nil,
  }
end

-- The oldest stored entry above `cutoff`.
local function log_oldest_live(key, cutoff)
  return log_entry(
    key, redis.call('ZRANGEBYSCORE', key, '(' .. fmt(cutoff), '+inf', 'LIMIT', 0, 1)[1])
end

-- The time of the oldest live entry whose cumulative total reaches `target`, by a binary search
-- over the stored entries' ranks; the newest entry of this script (not written yet) comes
-- after every stored one.
local function log_first_reaching(s, target)
  local key = s.key
  local low = redis.call('ZCOUNT', key, '-inf', fmt(s.cutoff))
  local high = redis.call('ZCARD', key) - 1
  local found = nil
  while low <= high do
    local middle = idiv(low + high, 2)
    local entry = log_entry(key, redis.call('ZRANGE', key, middle, middle)[1])
    if entry and entry.cumulative >= target then
      found, high = entry.at, middle - 1
    else
      low = middle + 1
    end
  end
  if not found and s.newest and s.newest.cumulative >= target then found = s.newest.at end
  return found
end

-- Keeps a log alive one window (the current quota's) after its newest entry; a log with no
-- entries is gone already.
local function expire_log(key, window)
  local newest = stored_newest(key)
  if newest then
    redis.call('PEXPIRE', key, ttl_ms(math.max(newest.at + window - now, 0)))
  end
end

-- When dropping a state loses nothing (as `AlgorithmState::idle_at`); logs expire by PEXPIRE.
local function idle_at(s)
  if s.fam == 't' then return s.tat end
  if s.fam == 'w' then
    if s.count == 0 then return 0 end
    return s.start + s.length
  end
  if s.current > 0 then return s.start + 2 * s.length end
  if s.previous > 0 then return s.start + s.length end
  return 0
end

-- Writes a state back: deleted when idle, else set to expire when it would be. `window` is the
-- current quota's window, for a log.
local function save(s, window)
  local key = s.key
  if s.fam == 'l' then
    if s.cutoff then redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(s.cutoff)) end
    if s.newest_changed and s.newest then
      local at = fmt(s.newest.at)
      redis.call('ZREMRANGEBYSCORE', key, at, at)
      redis.call('ZADD', key, at, log_member(s.newest))
    end
    expire_log(key, window)
    return
  end
  local idle = idle_at(s)
  if idle <= now then
    if s.exists then redis.call('DEL', key) end
    return
  end
  local value
  if s.fam == 't' then
    value = fmt(s.tat) .. ':' .. fmt(s.interval)
  elseif s.fam == 'w' then
    value = fmt(s.start) .. ':' .. fmt(s.length) .. ':' .. fmt(s.count)
  else
    value = fmt(s.start) .. ':' .. fmt(s.length) .. ':' .. fmt(s.previous) .. ':' .. fmt(s.current)
  end
  redis.call('SET', key, value, 'PX', ttl_ms(idle - now))
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

-- Takes back a stored log entry's charge (`window` is the receipt quota's): the entry shrinks,
-- and every later entry's cumulative total with it (so refunding the newest entry, the usual
-- case, touches one member; an older one rewrites the entries after it). An entry that has
-- left the window counts no more and is skipped. The key keeps the expiry its last check gave it.
local function refund_logged(key, window, at, cost)
  local entry = log_entry(key, redis.call('ZRANGEBYSCORE', key, fmt(at), fmt(at))[1])
  if not entry then return end
  local newest = stored_newest(key)
  local at_now = now
  if newest and newest.at > at_now then at_now = newest.at end
  if entry.at + window <= at_now then return end
  local lifetime = redis.call('PTTL', key)
  local taken = math.min(cost, entry.cost)
  local rewritten = {}
  entry.cost, entry.cumulative = entry.cost - taken, entry.cumulative - taken
  if entry.cost > 0 then rewritten[1] = entry end
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', key, '(' .. fmt(at), '+inf')) do
    local later = log_entry(key, member)
    later.cumulative = later.cumulative - taken
    rewritten[#rewritten + 1] = later
  end
  redis.call('ZREMRANGEBYSCORE', key, fmt(at), '+inf')
  add_entries(key, rewritten)
  if lifetime > 0 and redis.call('EXISTS', key) == 1 then
    redis.call('PEXPIRE', key, lifetime)
  end
end
