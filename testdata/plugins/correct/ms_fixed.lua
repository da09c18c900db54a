-- ms_fixed: a fixed-window counter on a millisecond clock, as scripts that read the time in
-- milliseconds keep one: at most `limit` cost per aligned window of W milliseconds.
--
-- KEYS:   the rule's key, a hash {k = index of the window n counts, n = cost charged in
--         it}.
-- params: limit (count >= 1), window (µs, a whole number of milliseconds W).
-- check:  t = floor(now / 1000), the millisecond; window k = floor(t / W); used = n when
--         the hash's k is k, else 0; a request of cost c is allowed iff used + c <= limit.
--         remaining = limit - used, after the charge when allowed.
--         retry_after (denied) = until the end of window k, ((k+1)*W - t) ms; -1 when
--         c > limit.
--         reset_after = until the end of window k, ((k+1)*W - t) ms, when window k holds
--         a charge (after this one), else 0.
-- precision: resolution 1ms: answers are counted in whole milliseconds from the start of
--         now's millisecond, so up to 1ms late.
-- bound:  2: a client may spend `limit` at the end of one window and `limit` again at the
--         start of the next.
-- TTL:    until the end of window k (expire_us); after it the hash counts nothing.

params = {'pos', 'pos'}

function validate(p)
  if p[2] % 1000 ~= 0 then
    return 'ms_fixed counts whole milliseconds: the window must be a whole number of them'
  end
end

function check(key, now, cost, p)
  local limit = p[1]
  local W = idiv(p[2], 1000)
  local t = idiv(now, 1000)
  local k = idiv(t, W)
  local st = call('HMGET', key, 'k', 'n')
  local used = 0
  if tonumber(st[1]) == k then
    used = tonumber(st[2])
  end
  local to_end = ((k + 1) * W - t) * 1000
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
    return 1, limit - after, 0, reset, limit, {k, after, to_end}
  end
  if cost > limit then
    return 0, nonneg(limit - used), -1, reset, limit
  end
  return 0, limit - used, to_end, reset, limit
end

function commit(key, w)
  call('HSET', key, 'k', w[1], 'n', w[2])
  expire_us(key, w[3])
end
