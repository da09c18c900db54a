-- leaky_bucket: a policing meter. Each request pours `cost` units into a bucket that holds
-- `capacity` and leaks `rate` units per `period`; a request that would overflow is dropped.
-- (As a meter it admits exactly what token_bucket with the same numbers admits; the state is
-- the fill level instead of the tokens left.)
--
-- KEYS:   the rule's key, a hash {l = level * period (fixed point, exact), t = time of l (µs)}.
--         No key means an empty bucket.
-- params: capacity (units >= 1), rate (units >= 1) per period (microseconds >= 1);
--         capacity * period <= 2^52.
-- check:  level(now) = max(0, l/period - (now - t) * rate / period); allowed iff
--         level + cost <= capacity. remaining = floor(capacity - level) after the charge.
--         retry_after (denied) = ceil((l + cost*period - capacity*period) / rate), exact;
--         -1 when cost > capacity. reset_after = until the bucket is empty.
-- TTL:    reset_after; an empty bucket and a missing key mean the same thing.

params = {'pos', 'pos', 'pos'}


function validate(p)
  if p[1] * p[3] > MAX_INT / 2 then
    return 'leaky_bucket capacity*period exceeds 2^52'
  end
end

-- level returns the fixed-point level at now and the time it refers to (>= now).
local function level(key, now, rate)
  local st = call('HMGET', key, 'l', 't')
  local l, t = tonumber(st[1]), tonumber(st[2])
  if l == nil or t == nil then
    return 0, now
  end
  if now > t then
    if now - t >= ceil(l / rate) then
      return 0, now
    end
    return l - (now - t) * rate, now
  end
  return l, t
end

function check(key, now, cost, p)
  local capacity, rate, period = p[1], p[2], p[3]
  local full = capacity * period
  local l, t = level(key, now, rate)
  local skew = t - now
  if cost > capacity then
    return 0, nonneg(floor((full - l) / period)), -1, skew + ceil(l / rate), capacity
  end
  local l2 = l + cost * period
  if l2 <= full then
    local reset = skew + ceil(l2 / rate)
    local remaining = floor((full - l2) / period)
    return 1, remaining, 0, reset, capacity, {l2, t, reset}, remaining + cost, skew + ceil(l / rate)
  end
  return 0, nonneg(floor((full - l) / period)), skew + ceil((l2 - full) / rate), skew + ceil(l / rate), capacity
end

function commit(key, w)
  call('HSET', key, 'l', w[1], 't', w[2])
  expire_us(key, w[3])
end

function refund(key, now, cost, p)
  local rate, period = p[2], p[3]
  local l, t = level(key, now, rate)
  local l2 = nonneg(l - cost * period)
  if l2 == 0 then
    call('DEL', key)
    return
  end
  call('HSET', key, 'l', l2, 't', t)
  expire_us(key, (t - now) + ceil(l2 / rate))
end

-- owe pours cost in without a check (the overdraft of a settled reservation): the level
-- goes above the capacity, a debt the leak drains before the bucket admits again. The
-- level is held at most 2^52 (fixed point).
function owe(key, now, cost, p)
  local rate, period = p[2], p[3]
  local l, t = level(key, now, rate)
  local l2 = l + cost * period
  if l2 > MAX_INT / 2 then
    l2 = MAX_INT / 2
  end
  call('HSET', key, 'l', l2, 't', t)
  expire_us(key, (t - now) + ceil(l2 / rate))
end

-- retune (an override's change; see prelude.lua's OVR) converts the key's state at at
-- from parameters p to q (its TTLs counted from the call's instant now >= at): the level, rounded up to a whole unit and at most q's capacity,
-- is the level under q.
function retune(key, at, p, q, now)
  local l, t = level(key, at, p[2])
  local used = ceil(l / p[3])
  if used > q[1] then
    used = q[1]
  end
  if used <= 0 then
    call('DEL', key)
    return
  end
  local l2 = used * q[3]
  call('HSET', key, 'l', l2, 't', t)
  expire_us(key, (t - now) + ceil(l2 / q[2]))
end
