-- base: zset_log
-- bug: commit trims members up to window - 1 old (edge + 1), one microsecond too many, so a member that still counts is dropped and one more request fits within the window.
-- caught-by: limit

params = {'pos', 'pos'}

local function decimal(us)
  return string.format('%.0f', us)
end

function validate(p)
  if p[1] > 100000 then
    return 'zset_log keeps one member per unit of cost: limit must be at most 100000'
  end
end

function check(key, now, cost, p)
  local limit, window = p[1], p[2]
  local edge = now - window
  local live = call('ZCOUNT', key, '(' .. decimal(edge), '+inf')
  local reset = 0
  if live > 0 then
    local newest = call('ZRANGE', key, -1, -1, 'WITHSCORES')
    reset = tonumber(newest[2]) - edge
  end
  if cost > limit then
    return 0, nonneg(limit - live), -1, reset, limit
  end
  if live + cost <= limit then
    if cost > 0 then
      reset = window
    end
    return 1, limit - live - cost, 0, reset, limit, {now, edge, cost, window}
  end
  local nth = call('ZRANGEBYSCORE', key, '(' .. decimal(edge), '+inf', 'WITHSCORES', 'LIMIT', live + cost - limit - 1, 1)
  return 0, nonneg(limit - live), tonumber(nth[2]) - edge, reset, limit
end

function commit(key, w)
  local now, edge, cost, window = w[1], w[2], w[3], w[4]
  call('ZREMRANGEBYSCORE', key, '-inf', edge + 1)
  local stamp = decimal(now)
  local n = call('ZCOUNT', key, now, now)
  for i = 1, cost do
    local member = stamp .. '.' .. decimal(n + i)
    call('ZADD', key, now, member)
  end
  expire_us(key, window)
end
