-- base: drip_meter
-- bug: when a client clock is behind the meter, the meter's clock is moved back to it (t = now), so a later clock drains the same time twice and clients whose clocks disagree get more than the rate.
-- caught-by: client clocks

params = {'pos', 'pos', 'pos'}

function validate(p)
  if p[1] * p[3] > MAX_INT / 4 then
    return 'drip_meter capacity*period exceeds 2^51'
  end
end

-- level returns the water at the meter's clock and that clock (>= now).
local function level(key, now, rate)
  local st = call('HMGET', key, 'water', 't')
  local water, t = tonumber(st[1]), tonumber(st[2])
  if water == nil or t == nil then
    return 0, now
  end
  if now <= t then
    return water, now
  end
  if now - t >= cdiv(water, rate) then
    return 0, now
  end
  return water - (now - t) * rate, now
end

-- until_dry is how long (µs, from the client's now) until the bucket is empty.
local function until_dry(water, skew, rate)
  if water == 0 then
    return 0
  end
  return skew + cdiv(water, rate)
end

function check(key, now, cost, p)
  local capacity, rate, period = p[1], p[2], p[3]
  local full = capacity * period
  local water, clock = level(key, now, rate)
  local skew = clock - now
  local pour = cost * period
  if cost > capacity then
    return 0, idiv(full - water, period), -1, until_dry(water, skew, rate), capacity
  end
  if water + pour <= full then
    local after = water + pour
    local reset = until_dry(after, skew, rate)
    return 1, idiv(full - after, period), 0, reset, capacity, {after, clock, reset}
  end
  return 0, idiv(full - water, period), skew + cdiv(water + pour - full, rate), until_dry(water, skew, rate), capacity
end

function commit(key, w)
  call('HSET', key, 'water', w[1], 't', w[2])
  expire_us(key, w[3])
end
