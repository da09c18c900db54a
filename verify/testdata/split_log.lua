-- split_log: a sliding log whose check is one ZCOUNT and whose commit is one ZADD per
-- unit of cost, as an application without Lua would run them.
--
-- KEYS:   a sorted set of "<time>:<k>" members scored by their time (µs).
-- params: limit (count), window (µs).

params = {'pos', 'pos'}

-- reset_after is until the newest entry leaves the window.
local function reset_after(key, now, window)
  local last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] == nil then
    return 0
  end
  return nonneg(tonumber(last[2]) + window - now)
end

function check(key, now, cost, p)
  local limit, window = p[1], p[2]
  local count = call('ZCOUNT', key, now - window + 1, '+inf')
  if cost > limit then
    return 0, nonneg(limit - count), -1, reset_after(key, now, window), limit
  end
  if count + cost <= limit then
    if cost == 0 then
      return 1, limit - count, 0, reset_after(key, now, window), limit
    end
    return 1, limit - count - cost, 0, window, limit, {now, window, cost}
  end
  local r = call('ZRANGEBYSCORE', key, now - window + 1, '+inf', 'WITHSCORES', 'LIMIT', count + cost - limit - 1, 1)
  return 0, nonneg(limit - count), tonumber(r[2]) + window - now, reset_after(key, now, window), limit
end

function commit(key, w)
  local now, window, cost = w[1], w[2], w[3]
  call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local k = call('ZCOUNT', key, now, now)
  local stamp = string.format('%.0f', now)
  for i = 1, cost do
    call('ZADD', key, now, stamp .. ':' .. (k + i))
  end
  expire_us(key, window)
end
