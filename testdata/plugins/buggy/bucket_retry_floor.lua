-- base: bucket
-- bug: retry-after divides by the rate rounding down (floor instead of ceil), so the advised retry comes a microsecond before the tokens are there and is denied.
-- caught-by: retry-after

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
  local capacity, rate, period = p[1], p[2], p[3]
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
  return 0, idiv(full - owed, period), idiv(owed + need - full, rate), cdiv(owed, rate), capacity
end

function commit(key, w)
  call('HSET', key, 'owed', w[1], 'at', w[2])
  expire_us(key, w[3])
end
