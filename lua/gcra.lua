-- gcra: the generic cell rate algorithm (redis-cell / redis_rate semantics). Cells are
-- emitted every T = period / rate microseconds; up to `burst` cells may be taken at once.
--
-- KEYS:   the rule's key, a hash {t, r}: the theoretical arrival time TAT = t + r/rate
--         microseconds (r in [0, rate)), exact for any rate and period. No key means TAT <= now.
-- params: rate (cells >= 1) per period (microseconds >= 1), burst (cells >= 1);
--         burst * period <= 2^51.
-- check:  D = max(0, TAT - now); allowed iff D + cost*T <= burst*T (all scaled by rate into
--         integers). On allow, TAT' = max(TAT, now) + cost*T.
--         remaining = floor((burst*T - D') / T) with D' after the charge when allowed.
--         retry_after (denied) = ceil(D + cost*T - burst*T), exact; -1 when cost > burst.
--         reset_after = ceil(D') (until TAT' <= now).
-- TTL:    reset_after; TAT <= now and a missing key mean the same thing.

params = {'pos', 'pos', 'pos'}


function validate(p)
  if p[3] * p[2] > MAX_INT / 4 then
    return 'gcra burst*period exceeds 2^51'
  end
end

function check(key, now, cost, p)
  local rate, period, burst = p[1], p[2], p[3]
  local st = call('HMGET', key, 't', 'r')
  local t = tonumber(st[1])
  local d = 0 -- D scaled by rate
  if t ~= nil and t >= now then
    d = (t - now) * rate + (tonumber(st[2]) or 0)
  end
  local cap = burst * period
  if cost > burst then
    return 0, nonneg(idiv(cap - d, period)), -1, cdiv(d, rate), burst
  end
  local d2 = d + cost * period
  if d2 <= cap then
    local whole = idiv(d2, rate)
    local reset = cdiv(d2, rate)
    return 1, idiv(cap - d2, period), 0, reset, burst, {now + whole, d2 - whole * rate, reset}
  end
  return 0, nonneg(idiv(cap - d, period)), cdiv(d2 - cap, rate), cdiv(d, rate), burst
end

function commit(key, w)
  call('HSET', key, 't', w[1], 'r', w[2])
  expire_us(key, w[3])
end

function refund(key, now, cost, p)
  local rate, period = p[1], p[2]
  local st = call('HMGET', key, 't', 'r')
  local t = tonumber(st[1])
  if t == nil or t < now then
    return
  end
  local d = nonneg((t - now) * rate + (tonumber(st[2]) or 0) - cost * period)
  if d == 0 then
    call('DEL', key)
    return
  end
  local whole = idiv(d, rate)
  call('HSET', key, 't', now + whole, 'r', d - whole * rate)
  expire_us(key, cdiv(d, rate))
end

