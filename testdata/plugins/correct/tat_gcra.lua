-- tat_gcra: the generic cell rate algorithm with its whole state one integer, the
-- theoretical arrival time (TAT), in a string key. Cells are emitted every T = P / r µs;
-- up to `burst` cells may be taken at once.
--
-- KEYS:   the rule's key, a string: TAT in µs, set with SET ... PX. No key means TAT <= now.
-- params: rate (r >= 1 cells per P µs, P a multiple of r so that T is a whole number of
--         microseconds), burst (count >= 1); burst * T <= 2^51.
-- check:  tat = max(TAT, now); a request of cost c is allowed iff tat + c*T - now <=
--         burst*T; then TAT' = tat + c*T.
--         remaining = floor((burst*T - (TAT' - now)) / T), with TAT' = tat when denied.
--         retry_after (denied) = tat + c*T - burst*T - now: exact, the first microsecond at
--         which the request fits; -1 when c > burst.
--         reset_after = TAT' - now: until TAT' <= now, where the key means nothing.
-- precision: exact, to the microsecond.
-- TTL:    reset_after, rounded up to a millisecond and one more (Redis truncates its clock
--         to the millisecond): a TAT in the past and a missing key mean the same thing.

params = {'pos', 'pos', 'pos'}

function validate(p)
  if p[2] % p[1] ~= 0 then
    return 'tat_gcra needs a whole emission interval: the period must be a multiple of the rate'
  end
  if p[3] * (p[2] / p[1]) > MAX_INT / 4 then
    return 'tat_gcra burst*interval exceeds 2^51'
  end
end

function check(key, now, cost, p)
  local interval, burst = p[2] / p[1], p[3]
  local tat = tonumber(call('GET', key)) or now
  if tat < now then
    tat = now
  end
  local window = burst * interval
  if cost > burst then
    return 0, idiv(window - (tat - now), interval), -1, tat - now, burst
  end
  local tat2 = tat + cost * interval
  if tat2 - now <= window then
    return 1, idiv(window - (tat2 - now), interval), 0, tat2 - now, burst, {tat2, tat2 - now}
  end
  return 0, idiv(window - (tat - now), interval), tat2 - window - now, tat - now, burst
end

function commit(key, w)
  call('SET', key, w[1], 'PX', cdiv(w[2], 1000) + 1)
end
