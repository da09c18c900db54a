-- careless_window: a fixed window counter with a bug in its peek.
--
-- KEYS:   a hash {w = window index, n = count in that window}.
-- params: limit (count), window (µs).
--
-- The bug: a peek (cost 0) reads the count without defaulting it, so a peek at a key
-- that does not exist yet is arithmetic on nil, a Lua runtime error.

params = {'pos', 'pos'}

function check(key, now, cost, p)
  local limit, window = p[1], p[2]
  local win = idiv(now, window)
  local st = call('HMGET', key, 'w', 'n')
  local to_end = (win + 1) * window - now
  if cost == 0 then
    return 1, limit - tonumber(st[2]), 0, to_end, limit
  end
  local n = 0
  if tonumber(st[1]) == win then
    n = tonumber(st[2])
  end
  if cost > limit then
    return 0, nonneg(limit - n), -1, to_end, limit
  end
  if n + cost <= limit then
    return 1, limit - n - cost, 0, to_end, limit, {win, n + cost, to_end}
  end
  return 0, limit - n, to_end, to_end, limit
end

function commit(key, w)
  call('HSET', key, 'w', w[1], 'n', w[2])
  expire_us(key, w[3])
end
