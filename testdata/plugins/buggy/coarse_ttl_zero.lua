-- base: coarse_bucket
-- bug: the TTL is reset-after truncated to whole seconds (floor instead of ceil), so a bucket that refills within a second gets EXPIRE 0, is deleted at once, and is full again.
-- caught-by: limit

params = {'pos', 'pos', 'pos'}

function validate(p)
  if p[1] * p[3] > MAX_INT / 4 then
    return 'coarse_bucket capacity*period exceeds 2^51'
  end
end

-- tokens_at returns the bucket's tokens at now (fixed point).
local function tokens_at(key, now, full, rate)
  local st = call('HMGET', key, 'tokens', 'ts')
  local tokens, ts = tonumber(st[1]), tonumber(st[2])
  if tokens == nil or ts == nil or now - ts >= cdiv(full - tokens, rate) then
    return full
  end
  return tokens + nonneg(now - ts) * rate
end

function check(key, now, cost, p)
  local capacity, rate, period = p[1], p[2], p[3]
  local full = capacity * period
  local tokens = tokens_at(key, now, full, rate)
  local need = cost * period
  if cost > capacity then
    return 0, idiv(tokens, period), -1, cdiv(full - tokens, rate), capacity
  end
  if tokens >= need then
    local left = tokens - need
    local reset = cdiv(full - left, rate)
    return 1, idiv(left, period), 0, reset, capacity, {left, now, reset}
  end
  local wait_ms = cdiv(cdiv(need - tokens, rate), 1000)
  return 0, idiv(tokens, period), wait_ms * 1000, cdiv(full - tokens, rate), capacity
end

function commit(key, w)
  call('HSET', key, 'tokens', w[1], 'ts', w[2])
  call('EXPIRE', key, idiv(w[3], 1000000))
end
