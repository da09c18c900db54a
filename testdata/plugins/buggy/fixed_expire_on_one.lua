-- base: hash_fixed
-- bug: sets the TTL only when the counter is created at 1 (the INCR-then-EXPIRE-if-1 idiom), which a first request of cost above 1 skips: that key never expires.
-- caught-by: expiry

params = {'pos', 'pos'}

function validate(p)
  if p[1] * p[2] > MAX_INT then
    return 'hash_fixed limit*window exceeds 2^53'
  end
end

function check(key, now, cost, p)
  local limit, window = p[1], p[2]
  local k = idiv(now, window)
  local field = string.format('%.0f', k)
  local used = tonumber(call('HGET', key, field)) or 0
  local to_end = (k + 1) * window - now
  local fits = used + cost <= limit
  local after = used
  if fits then
    after = used + cost
  end
  local reset = 0
  if after > 0 then
    reset = to_end
  end
  if fits then
    return 1, limit - after, 0, reset, limit, {field, used, cost, to_end}
  end
  if cost > limit then
    return 0, nonneg(limit - used), -1, reset, limit
  end
  return 0, limit - used, to_end, reset, limit
end

-- commit starts the hash afresh in a new window (dropping the old window's field) and adds
-- the cost to window k's field.
function commit(key, w)
  if w[2] == 0 then
    call('DEL', key)
  end
  call('HINCRBY', key, w[1], w[3])
  if w[2] + w[3] == 1 then expire_us(key, w[4]) end
end
