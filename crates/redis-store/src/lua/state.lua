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

-- A log's live entries; `window` is its length in µs.
local function load_log(key, window)
  local at_now = now
  local newest = redis.call('ZRANGE', key, -1, -1)[1]
  if newest then
    local at = tonumber(string.match(newest, '^(%d+):'))
    if at and at > at_now then at_now = at end
  end
  local cutoff = at_now - window
  local entries, total = {}, 0
  for i, member in ipairs(redis.call('ZRANGEBYSCORE', key, '(' .. fmt(cutoff), '+inf')) do
    local at, cost = string.match(member, '^(%d+):(%d+)$')
    entries[i] = {tonumber(at), tonumber(cost)}
    total = total + entries[i][2]
  end
  return {kind = 'l', entries = entries, total = total, cutoff = cutoff}
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
    local n = #s.entries
    if s.newest_changed and n > 0 then
      local at, cost = s.entries[n][1], s.entries[n][2]
      redis.call('ZREMRANGEBYSCORE', key, fmt(at), fmt(at))
      redis.call('ZADD', key, fmt(at), fmt(at) .. ':' .. fmt(cost))
    end
    if n > 0 then
      redis.call('PEXPIRE', key, ttl_ms(math.max(s.entries[n][1] + q.interval - now, 0)))
    end
  end
end

-- Takes back a log entry's charge (any entry, not only the newest).
local function refund_logged(key, at, cost)
  local member = redis.call('ZRANGEBYSCORE', key, fmt(at), fmt(at))[1]
  if not member then return end
  local logged = tonumber(string.match(member, ':(%d+)$')) or 0
  redis.call('ZREM', key, member)
  if logged > cost then
    redis.call('ZADD', key, fmt(at), fmt(at) .. ':' .. fmt(logged - cost))
  end
end
