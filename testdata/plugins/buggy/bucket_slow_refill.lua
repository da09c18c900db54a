-- base: bucket
-- bug: reads the rate's period in the wrong unit (milliseconds for microseconds), so the bucket refills 1000 times slower than the rate it declares, consistently in every answer: a limiter far stricter than its guarantee.
-- caught-by: denials

params = {'pos', 'pos', 'pos'}

function validate(p)
  if p[1] * p[3] > MAX_INT / 4 then
    return 'bucket capacity*period exceeds 2^51'
  end
end

-- owed_at returns what the bucket owes at now (fixed point, >= 0).
local function owed_at(key, now, rate)
  local st = call('HMGET', key, 'owed', 'at')
  local owed, at = tonumber(st[1]), tonumber(st[2])
  if owed == nil or at == nil or now - at >= cdiv(owed, rate) then
    return 0
  end
  return owed - nonneg(now - at) * rate
end

function check(key, now, cost, p)
  local capacity, rate, period = p[1], p[2], p[3] * 1000
  local full = capacity * period
  local owed = owed_at(key, now, rate)
  local need = cost * period
  if cost > capacity then
    return 0, idiv(full - owed, period), -1, cdiv(owed, rate), capacity
  end
  if owed + need <= full then
    local after = owed + need
    local reset = cdiv(after, rate)
    return 1, idiv(full - after, period), 0, reset, capacity, {after, now, reset}
  end
  return 0, idiv(full - owed, period), cdiv(owed + need - full, rate), cdiv(owed, rate), capacity
end

function commit(key, w)
  call('HSET', key, 'owed', w[1], 'at', w[2])
  expire_us(key, w[3])
end
