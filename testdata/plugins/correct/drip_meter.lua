-- drip_meter: a leaky bucket used as a meter, for a policy on client clocks: each request
-- pours its cost into a bucket of `capacity` that drains at `rate` (r per period P); a
-- request that would overflow it is denied.
--
-- KEYS:   the rule's key, a hash {water = level * P, fixed point so that draining is
--         exact; t = the meter's clock: the instant water was measured (µs)}. No key means
--         an empty bucket.
-- params: capacity (count >= 1), rate (r >= 1 per P µs); capacity * P <= 2^51.
-- clock:  the clients' clocks may disagree, so now may be behind t. The meter's clock
--         never runs back: at now < t no time has passed (the bucket drains from t), the
--         stored t stays, and answers count from the client's now, so they carry the
--         skew t - now. A clock that runs back can therefore never drain the bucket twice.
-- check:  clock = max(t, now); water(clock) = max(0, water - (clock - t) * r); a request of
--         cost c is allowed iff water(clock) + c*P <= capacity*P.
--         remaining = floor((capacity*P - water') / P), water' after the charge when
--         allowed.
--         retry_after (denied) = skew + ceil((water(clock) + c*P - capacity*P) / r): exact;
--         -1 when c > capacity.
--         reset_after = skew + ceil(water' / r) while the bucket holds water, else 0.
-- precision: exact, to the microsecond.
-- TTL:    reset_after (expire_us): an empty bucket and a missing key mean the same thing.

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
    return water, t
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
