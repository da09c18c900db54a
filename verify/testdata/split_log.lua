-- split_log: a sliding log whose check is one ZCOUNT and whose commit is one ZADD per
-- unit of cost, as an application without Lua would run them.
--
-- KEYS:   a sorted set of "<time>:<k>" members scored by their time (µs).
-- params: limit (count), window (µs).

params = {'pos', 'pos'}

function check(key, now, cost, p)
  local limit, window = p[1], p[2]
  local count = call('ZCOUNT', key, now - window + 1, '+inf')
  if cost > limit then
    return 0, nonneg(limit - count), -1, window, limit
  end
  if count + cost <= limit then
    return 1, limit - count - cost, 0, window, limit, {now, window, cost}
  end
  local r = call('ZRANGEBYSCORE', key, now - window + 1, '+inf', 'WITHSCORES', 'LIMIT', count + cost - limit - 1, 1)
  return 0, nonneg(limit - count), tonumber(r[2]) + window - now, window, limit
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
