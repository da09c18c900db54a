params = {'pos', 'pos'}
function check(key, now, cost, p)
  local limit, window = p[1], p[2]
  local st = call('HMGET', key, 'w', 'n')
  local win, to_end = idiv(now, window), window - now % window
  if cost == 0 then return 1, limit - tonumber(st[2]), 0, to_end, limit end
  local n = 0
  if tonumber(st[1]) == win then n = tonumber(st[2]) end
  if cost > limit then return 0, nonneg(limit - n), -1, to_end, limit end
  if n + cost <= limit then return 1, limit - n - cost, 0, to_end, limit, {win, n + cost, to_end} end
  return 0, limit - n, to_end, to_end, limit
end
function commit(key, w)
  call('HSET', key, 'w', w[1], 'n', w[2])
  expire_us(key, w[3])
end
