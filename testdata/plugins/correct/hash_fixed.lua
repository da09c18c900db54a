-- hash_fixed: a fixed-window counter: at most `limit` cost per aligned window
-- [k*window, (k+1)*window).
--
-- KEYS:   the rule's key, a hash with one field: the current window's index k (decimal),
--         holding the cost charged in window k. A field of an older window counts nothing.
-- params: limit (count >= 1), window (µs >= 1); limit * window <= 2^53.
-- check:  k = floor(now / window); used = the field k's value (0 when absent); a request
--         of cost c is allowed iff used + c <= limit.
--         remaining = limit - used, after the charge when allowed.
--         retry_after (denied) = until the end of window k, (k+1)*window - now: the next
--         window starts empty; -1 when c > limit.
--         reset_after = until the end of window k when window k holds a charge (after
--         this one), else 0.
-- precision: exact, to the microsecond.
-- bound:  2: a client may spend `limit` at the end of one window and `limit` again at the
--         start of the next, 2*limit within two microseconds.
-- TTL:    until the end of window k (expire_us); after it the field counts nothing, so
--         expiry never changes an answer.

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
  expire_us(key, w[4])
end
