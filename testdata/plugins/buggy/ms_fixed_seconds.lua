-- base: ms_fixed
-- bug: takes the window in whole seconds, as a port that hands it to EXPIRE does: a 1.5s window is kept as 1s, so three windows' limits pass within 1s
-- caught-by: limit

params = {'pos', 'pos'}

function validate(p)
  if p[2] % 1000 ~= 0 then
    return 'ms_fixed counts whole milliseconds: the window must be a whole number of them'
  end
end

function check(key, now, cost, p)
  local limit = p[1]
  local W = idiv(p[2], 1000000) * 1000
  local t = idiv(now, 1000)
  local k = idiv(t, W)
  local st = call('HMGET', key, 'k', 'n')
  local used = 0
  if tonumber(st[1]) == k then
    used = tonumber(st[2])
  end
  local to_end = ((k + 1) * W - t) * 1000
  local fits = used + cost <= limit
  local after = used
  if fits then
    after = used + cost
  end
  local reset = 0
  if after > 0 then
    reset = to_end
  end
  if fits then
    return 1, limit - after, 0, reset, limit, {k, after, to_end}
  end
  if cost > limit then
    return 0, nonneg(limit - used), -1, reset, limit
  end
  return 0, limit - used, to_end, reset, limit
end

function commit(key, w)
  call('HSET', key, 'k', w[1], 'n', w[2])
  expire_us(key, w[3])
end
