-- token_bucket: a bucket of `capacity` tokens refilled at `rate` tokens per `period`; a
-- request takes `cost` tokens. Burst = capacity.
--
-- KEYS:   the rule's key, a hash {l = tokens * period (fixed point, exact), t = time of l (µs)}.
--         No key means a full bucket.
-- params: capacity (tokens >= 1), rate (tokens >= 1) per period (microseconds >= 1);
--         capacity * period <= 2^52.
-- check:  tokens(now) = min(capacity, l/period + (now - t) * rate / period), kept exact as
--         l + (now - t) * rate in fixed point. Allowed iff tokens >= cost.
--         remaining = floor(tokens) after the charge when allowed.
--         retry_after (denied) = ceil((cost*period - l) / rate): exact, the first microsecond
--         at which enough tokens have dripped in; -1 when cost > capacity.
--         reset_after = until the bucket is full again.
-- TTL:    reset_after; a full bucket and a missing key mean the same thing.

params = {'pos', 'pos', 'pos'}


function validate(p)
  if p[1] * p[3] > MAX_INT / 2 then
    return 'token_bucket capacity*period exceeds 2^52'
  end
end

-- level returns the fixed-point tokens at now and the time they refer to (>= now).
local function level(key, now, full, rate)
  local st = call('HMGET', key, 'l', 't')
  local l, t = tonumber(st[1]), tonumber(st[2])
  if l == nil or t == nil then
    return full, now
  end
  if now > t then
    if now - t >= ceil((full - l) / rate) then
      return full, now
    end
    return l + (now - t) * rate, now
  end
  return l, t
end

function check(key, now, cost, p)
  local capacity, rate, period = p[1], p[2], p[3]
  local full = capacity * period
  local l, t = level(key, now, full, rate)
  local skew = t - now -- > 0 only when a client clock went backwards
  if cost > capacity then
    return 0, nonneg(floor(l / period)), -1, skew + ceil((full - l) / rate), capacity
  end
  local c = cost * period
  if l >= c then
    local l2 = l - c
    local reset = skew + ceil((full - l2) / rate)
    local remaining = floor(l2 / period)
    return 1, remaining, 0, reset, capacity, {l2, t, reset}, remaining + cost, skew + ceil((full - l) / rate)
  end
  return 0, nonneg(floor(l / period)), skew + ceil((c - l) / rate), skew + ceil((full - l) / rate), capacity
end

function commit(key, w)
  call('HSET', key, 'l', w[1], 't', w[2])
  expire_us(key, w[3])
end

function refund(key, now, cost, p)
  local capacity, rate, period = p[1], p[2], p[3]
  local full = capacity * period
  local l, t = level(key, now, full, rate)
  local l2 = l + cost * period
  if l2 >= full then
    call('DEL', key)
    return
  end
  call('HSET', key, 'l', l2, 't', t)
  expire_us(key, (t - now) + ceil((full - l2) / rate))
end

-- owe takes cost without a check (the overdraft of a settled reservation): the tokens go
-- below zero, a debt the refill earns back before the bucket admits again. The debt is
-- held at most 2^52 (fixed point).
function owe(key, now, cost, p)
  local capacity, rate, period = p[1], p[2], p[3]
  local full = capacity * period
  local l, t = level(key, now, full, rate)
  local l2 = l - cost * period
  if l2 < -MAX_INT / 2 then
    l2 = -MAX_INT / 2
  end
  call('HSET', key, 'l', l2, 't', t)
  expire_us(key, (t - now) + ceil((full - l2) / rate))
end

-- retune (an override's change; see prelude.lua's OVR) converts the key's state at at
-- from parameters p to q (its TTLs counted from the call's instant now >= at): the tokens the key has used, rounded up to a whole token and at
-- most q's capacity, are its use under q.
function retune(key, at, p, q, now)
  local full = p[1] * p[3]
  local l, t = level(key, at, full, p[2])
  local used = ceil((full - l) / p[3])
  if used > q[1] then
    used = q[1]
  end
  if used <= 0 then
    call('DEL', key)
    return
  end
  local full2 = q[1] * q[3]
  local l2 = full2 - used * q[3]
  call('HSET', key, 'l', l2, 't', t)
  expire_us(key, (t - now) + ceil((full2 - l2) / q[2]))
end
