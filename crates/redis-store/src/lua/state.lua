-- tollgate: reading and writing one key's state. Every state records what it was written under,
-- so it keeps its meaning when the quota changes (see tollgate_core::algorithm):
--   t2 (token bucket, GCRA, pacing): the TAT and the emission interval it was written under;
--   w2 (fixed window): the window's start and length, and its count;
--   s2 (sliding counter): the window's start and length, and the previous and current counts;
--   l3 (sliding log): a sorted set of "at:cost:cumulative" members scored by "at" (absolute
--   times, read with the current window);
--   c1 (concurrency): a sorted set of the slots held (see load_slots).
-- A state is a table {fam = 't' | 'w' | 's' | 'l', key = ..., ...}; `exists` says whether the
-- key held one, `dirty` whether it must be written back. Every write sets the key to expire once
-- dropping it would lose nothing, and deletes it when that is already so.
--
-- The string states are packed in binary, because Redis keeps a short string in one allocation
-- with its object (16 bytes, a 3-byte header, the value and a terminator) from jemalloc's size
-- classes: a value of at most 12 bytes takes the 32-byte class, where the decimal text of the
-- format before this one ("1796000000000000:360000000") took 48 or 64. Times and durations are
-- µs; every number is whole and below 2^53.
--   t2: the TAT in 7 bytes, most significant first (so the first byte is below 0x20), then the
--       interval as a duration;
--   w2: a form byte, the start, the length as a duration, then the count as a varint; form 1
--       stores the start as a number of lengths since the epoch (windows start at whole
--       multiples of their length, and a day's window number takes 3 bytes where its µs take
--       8), form 2 in µs (a start off those boundaries, which tollgate never writes; kept so
--       that every state can be written);
--   s2: as w2, with the previous and the current count.
-- A varint holds 7 bits a byte, least significant first, with the high bit set on every byte but
-- the last. A duration is the varint of m × 4 + u: m whole units of DURATION_UNITS[u + 1] (µs,
-- ms, s, min), the largest that divides it, so an hour's interval takes 2 bytes, not 5. A
-- bucket refilling 10 an hour takes 8 bytes, a day's window counting thousands 8.
-- Every state has exactly one encoding: a value that is not one (cut short, with bytes left
-- over, a number longer than it need be or in a smaller unit than it could be) is unreadable.
--
-- Values in the decimal text of the format before ("tat:interval", "start:length:count",
-- "start:length:previous:current") are still read, and written packed on the next write: a
-- packed value starts with a byte below 0x20, a decimal one with a digit.

-- The units a duration may be counted in, each a multiple of the one before.
local DURATION_UNITS = {1, 1000, 1000000, 60000000}

-- a - floor(a / b) * b, exactly (Lua's % is off by b when a / b rounds up to a whole number).
local function remainder(a, b)
  return a - idiv(a, b) * b
end

-- `n` as a varint.
local function varint(n)
  local bytes = {}
  while n >= 128 do
    local low = n % 128
    bytes[#bytes + 1] = low + 128
    n = (n - low) / 128
  end
  bytes[#bytes + 1] = n
  return string.char(unpack(bytes))
end

-- The varint at byte `at` of `value`, and the position after it; nil when the value ends inside
-- it, when it is longer than it need be (a last byte of 0 after others), or when it reaches
-- 2^53 (a double's sum stays at or above 2^53 once the exact one is, so that check holds).
local function read_varint(value, at)
  local n, scale = 0, 1
  for i = at, at + 7 do
    local byte = string.byte(value, i)
    if not byte then return nil end
    if byte < 128 then
      if byte == 0 and i > at then return nil end
      n = n + byte * scale
      if n >= TWO_53 then return nil end
      return n, i + 1
    end
    n = n + (byte - 128) * scale
    scale = scale * 128
  end
  return nil
end

-- `micros` (> 0) as a duration. m × 4 + u may pass 2^53 (an interval of up to 2^52 µs in µs):
-- its first byte is written from m's low 5 bits, the rest is the varint of m's higher bits.
local function duration(micros)
  local unit = #DURATION_UNITS
  while remainder(micros, DURATION_UNITS[unit]) ~= 0 do unit = unit - 1 end
  local m = idiv(micros, DURATION_UNITS[unit])
  local low = m % 32
  local high = (m - low) / 32
  local first = low * 4 + unit - 1
  if high == 0 then return string.char(first) end
  return string.char(first + 128) .. varint(high)
end

-- The duration at byte `at` of `value`, µs, and the position after it; nil when it is not one
-- (cut short, 0, 2^53 µs or more, or not in its one encoding: a longer varint than needed, or a
-- smaller unit than the largest that divides it).
local function read_duration(value, at)
  local first = string.byte(value, at)
  if not first then return nil end
  local unit = first % 4 + 1
  local m, after = idiv(first % 128, 4), at + 1
  if first >= 128 then
    local high
    high, after = read_varint(value, at + 1)
    if not high or high == 0 then return nil end
    m = m + high * 32
  end
  local micros = m * DURATION_UNITS[unit]
  if m == 0 or micros >= TWO_53 then return nil end
  local larger = DURATION_UNITS[unit + 1]
  if larger and remainder(micros, larger) == 0 then return nil end
  return micros, after
end

-- `n` (below 2^56) in 7 bytes, most significant first.
local function fixed7(n)
  local bytes = {}
  for i = 7, 1, -1 do
    local low = n % 256
    bytes[i] = low
    n = (n - low) / 256
  end
  return string.char(unpack(bytes))
end

-- A packed bucket value as {tat, interval}, or nil.
local function unpack_tat(value)
  if #value < 8 then return nil end
  local tat = 0
  for i = 1, 7 do tat = tat * 256 + string.byte(value, i) end
  local interval, after = read_duration(value, 8)
  if after ~= #value + 1 then return nil end
  return {tat, interval}
end

-- A packed window value with `counts` counts as {start, length, counts...}, or nil.
local function unpack_window(value, counts)
  local form = string.byte(value, 1)
  if form ~= 1 and form ~= 2 then return nil end
  local start, at = read_varint(value, 2)
  if not start then return nil end
  local length
  length, at = read_duration(value, at)
  if not length then return nil end
  if form == 1 then
    start = start * length
    if start >= TWO_53 then return nil end
  elseif remainder(start, length) == 0 then
    return nil
  end
  local fields = {start, length}
  for i = 1, counts do
    fields[2 + i], at = read_varint(value, at)
    if not at then return nil end
  end
  if at ~= #value + 1 then return nil end
  return fields
end

-- A window's start, length and counts, packed.
local function pack_window(start, length, counts)
  local index = idiv(start, length)
  local parts
  if index * length == start then
    parts = {string.char(1), varint(index), duration(length)}
  else
    parts = {string.char(2), varint(start), duration(length)}
  end
  for _, count in ipairs(counts) do parts[#parts + 1] = varint(count) end
  return table.concat(parts)
end

-- The decimal text of the format before, as numbers; nil when `value` does not match `pattern`
-- or holds a number of 2^53 or more.
local function unpack_decimal(value, pattern)
  local fields = {string.match(value, pattern)}
  if #fields == 0 then return nil end
  for i, field in ipairs(fields) do
    fields[i] = tonumber(field)
    if fields[i] >= TWO_53 then return nil end
  end
  return fields
end

-- How each kind's value is read: packed, in decimal, the field count, and the format expected
-- (for the error on a value that is neither).
local FORMATS = {
  t = {
    unpack = unpack_tat, pattern = '^(%d+):(%d+)$',
    expected = '7 bytes of TAT then the interval, packed; or the older "tat:interval"',
  },
  w = {
    unpack = function(value) return unpack_window(value, 1) end,
    pattern = '^(%d+):(%d+):(%d+)$',
    expected = 'a form byte, start, length and count, packed; or the older "start:length:count"',
  },
  s = {
    unpack = function(value) return unpack_window(value, 2) end,
    pattern = '^(%d+):(%d+):(%d+):(%d+)$',
    expected = 'a form byte, start, length, previous and current count, packed; or the older '
      .. '"start:length:previous:current"',
  },
}

-- The fields of `value` (a state of kind 't', 'w' or 's'), as numbers, or nil when it is not
-- one: packed if it starts with a byte below 0x20, the decimal text of the format before if it
-- starts with a digit. A state's interval or length is never 0.
local function unpack_state(kind, value)
  local format = FORMATS[kind]
  local first = string.byte(value, 1)
  local fields
  if first and first < 0x20 then
    fields = format.unpack(value)
  elseif first and first >= 0x30 and first <= 0x39 then
    fields = unpack_decimal(value, format.pattern)
  end
  if fields and fields[2] == 0 then return nil end
  return fields
end

-- The fields of the state at `key` (nil when the key holds nothing); a value that is not a
-- state is unreadable.
local function parse(key, kind)
  local value = redis.call('GET', key)
  if not value then return nil end
  local fields = unpack_state(kind, value)
  if not fields then unreadable(key, FORMATS[kind].expected) end
  return fields
end

-- A state's value, packed.
local function pack_state(s)
  if s.fam == 't' then return fixed7(s.tat) .. duration(s.interval) end
  if s.fam == 'w' then return pack_window(s.start, s.length, {s.count}) end
  return pack_window(s.start, s.length, {s.previous, s.current})
end

-- Concurrency (c1): a sorted set with one member per slot held, "<hold id>:<n>" for n = 1 to
-- the hold's slots, scored by when it lapses unless renewed (µs on the script's clock). Lapsed
-- members hold nothing; a write drops them. `adds` and `removes` are this script's holds to
-- write, by id: {slots, ...}.
local function load_slots(key)
  local held = redis.call('ZCOUNT', key, '(' .. fmt(now), '+inf')
  return {fam = 'c', key = key, exists = held > 0, held = held, adds = {}, removes = {}}
end

-- Calls `command` on `key` with `options` then `args` (a flat list of an even length), at
-- most 1,000 of `args` a call: Lua's `unpack` stops near 8,000, and a hold may take up to
-- 100,000 slots. Answers the sum of the calls' answers.
local function call_in_chunks(command, key, options, args)
  local total, at = 0, 1
  while at <= #args do
    local call = {key}
    for _, option in ipairs(options) do call[#call + 1] = option end
    for i = at, math.min(at + 999, #args) do call[#call + 1] = args[i] end
    total = total + redis.call(command, unpack(call))
    at = at + 1000
  end
  return total
end

-- The members of hold `id` of `slots` slots.
local function hold_members(id, slots)
  local members = {}
  for n = 1, slots do members[n] = fmt(id) .. ':' .. n end
  return members
end

-- The members of hold `id`, each scored `score`, as ZADD takes them.
local function scored_members(id, slots, score)
  local args = {}
  for _, member in ipairs(hold_members(id, slots)) do
    args[#args + 1] = fmt(score)
    args[#args + 1] = member
  end
  return args
end

-- Keeps the key as long as its latest member: holds of a longer slot ttl (a quota changed
-- while they ran) are not cut short by a shorter one's write.
local function expire_slots(key)
  local latest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]
  if latest then redis.call('PEXPIRE', key, ttl_ms(math.max(tonumber(latest) - now, 0))) end
end

-- Writes a concurrency state: lapsed members and given-back holds go, new holds lapse `ttl` µs
-- from now, and the key lives as long as its latest member (deleted once empty).
local function save_slots(s)
  local key = s.key
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
  for id, slots in pairs(s.removes) do
    call_in_chunks('ZREM', key, {}, hold_members(id, slots))
  end
  local added = false
  for id, slots in pairs(s.adds) do
    call_in_chunks('ZADD', key, {}, scored_members(id, slots, now + s.ttl))
    added = true
  end
  if added then expire_slots(key) end
end

-- Renews hold `id` (its members that have not lapsed) for `ttl` µs more; answers how many
-- members were renewed (0: the hold lapsed, or was given back).
local function renew_hold(key, id, slots, ttl)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
  local renewed = call_in_chunks('ZADD', key, {'XX', 'CH'}, scored_members(id, slots, now + ttl))
  if renewed > 0 then expire_slots(key) end
  return renewed
end

local function load(key, kind)
  if kind == 'c' then return load_slots(key) end
  if kind == 'g' or kind == 'p' then
    local f = parse(key, 't') or {0, 0}
    return {fam = 't', key = key, exists = f[2] ~= 0, tat = f[1], interval = f[2]}
  elseif kind == 'w' then
    local f = parse(key, 'w') or {0, 0, 0}
    return {
      fam = 'w', key = key, exists = f[2] ~= 0, start = f[1], length = f[2], count = f[3],
    }
  elseif kind == 's' then
    local f = parse(key, 's') or {0, 0, 0, 0}
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
  if s.fam == 'c' then return save_slots(s) end
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
  redis.call('SET', key, pack_state(s), 'PX', ttl_ms(idle - now))
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
