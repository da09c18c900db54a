-- simple_gcra: the generic cell rate algorithm with its whole state one integer in a
-- string key. A cell is earned every T = period / amount µs; up to `burst` cells may be
-- taken at once.
--
-- KEYS:      the rule's key, a string: the theoretical arrival time TAT in µs, the instant
--            the key is back to empty. No key means TAT <= now.
-- params:    rate (amount >= 1 cells per period µs, the period a multiple of the amount so
--            that T is a whole number of µs), burst (cells >= 1); burst * T <= 2^51.
-- check:     tat = max(TAT, now): a clock that runs behind never moves TAT back.
--            A request of cost c is allowed iff tat + c*T - now <= burst*T; then
--            TAT' = tat + c*T (TAT' = tat when denied).
--            remaining   = floor((burst*T - (TAT' - now)) / T), at least 0.
--            retry_after = tat + c*T - burst*T - now when denied: the first µs at which
--                          the request fits; -1 when c > burst.
--            reset_after = TAT' - now.
-- precision: exact, to the microsecond: integers only, and idiv for every division.
-- TTL:       reset_after, through expire_us: a TAT in the past and no key mean the same.

params = {'pos', 'pos', 'pos'} -- the rate's amount and period (µs), burst

function validate(p)
  if p[2] % p[1] ~= 0 then
    return 'simple_gcra needs a whole emission interval: the period must be a multiple of the amount'
  end
  if p[3] * idiv(p[2], p[1]) > MAX_INT / 4 then
    return 'simple_gcra burst * interval exceeds 2^51'
  end
end

function check(key, now, cost, p)
  local t, burst = idiv(p[2], p[1]), p[3]
  local tat = tonumber(call('GET', key)) or now
  if tat < now then
    tat = now
  end
  local span = burst * t -- how far TAT may run ahead of now
  local left = nonneg(idiv(span - (tat - now), t))
  if cost > burst then
    return 0, left, -1, tat - now, burst
  end
  local tat2 = tat + cost * t
  if tat2 - now > span then
    return 0, left, tat2 - span - now, tat - now, burst
  end
  return 1, idiv(span - (tat2 - now), t), 0, tat2 - now, burst, {tat2, tat2 - now}
end

function commit(key, w)
  call('SET', key, w[1])
  expire_us(key, w[2])
end

function refund(key, now, cost, p)
  local tat = tonumber(call('GET', key))
  if tat == nil then
    return
  end
  tat = tat - cost * idiv(p[2], p[1])
  if tat <= now then
    call('DEL', key)
    return
  end
  call('SET', key, tat)
  expire_us(key, tat - now)
end
