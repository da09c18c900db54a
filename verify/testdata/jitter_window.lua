-- jitter_window: a fixed window counter whose retry-after adds a random jitter.
--
-- KEYS:   a hash {w = window index, n = count in that window}.
-- params: limit (count), window (µs).
--
-- The flaw: a denial's retry-after is the window's end plus up to 1 s drawn from
-- math.random, so a retry at the window's end passes earlier than advised (unsound).
-- What verify finds depends on math.random's state, which a host carries from one script
-- to the next: the checks' findings must not depend on which worker ran them.

params = {'pos', 'pos'}

function check(key, now, cost, p)
  local limit, window = p[1], p[2]
  local win = idiv(now, window)
  local st = call('HMGET', key, 'w', 'n')
  local to_end = (win + 1) * window - now
  local n = 0
  if tonumber(st[1]) == win then
    n = tonumber(st[2])
  end
  if cost > limit then
    return 0, nonneg(limit - n), -1, to_end, limit
  end
  if n + cost <= limit then
    if cost == 0 then
      return 1, limit - n, 0, to_end, limit
    end
    return 1, limit - n - cost, 0, to_end, limit, {win, n + cost, to_end}
  end
  return 0, limit - n, to_end + math.random(1000000), to_end, limit
end

function commit(key, w)
  call('HSET', key, 'w', w[1], 'n', w[2])
  expire_us(key, w[3])
end
