-- base: tat_gcra
-- bug: PX is reset-after truncated to milliseconds (floor(us / 1000)), so the TAT can expire up to a millisecond before it has passed and the key forgets a charge early.
-- caught-by: reset-after

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
  call('SET', key, w[1], 'PX', idiv(w[2], 1000))
end
