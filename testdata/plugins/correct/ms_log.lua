-- ms_log: a sliding log on a millisecond clock, as scripts that stamp their log with the
-- time in milliseconds keep one: at most `limit` cost in any window-long interval of that
-- clock.
--
-- KEYS:   the rule's key, a sorted set with one member per unit of cost charged, scored by
--         the millisecond of the charge, t = floor(now / 1000). A member is "<t>.<n>", n
--         numbering the units charged in that millisecond.
-- params: limit (count >= 1, at most 100000: one member per unit), window (µs, a whole
--         number of milliseconds W).
-- check:  live = the members scored in (t - W, t]; a request of cost c is allowed iff
--         live + c <= limit.
--         remaining = limit - live, less c when allowed.
--         retry_after (denied) = until the (live + c - limit)-th oldest live member leaves
--         the window, (its score + W - t) ms; -1 when c > limit.
--         reset_after = until the newest live member leaves the window, (its score + W -
--         t) ms, 0 when none is live.
-- precision: resolution 1ms: the clock is now's millisecond, so a charge counts for a
--         window that is up to 1ms shorter in true time, and answers counted in whole
--         milliseconds from that millisecond's start are up to 1ms late.
-- TTL:    the window, through expire_us; commit drops the members that left the window,
--         so the set never holds more than `limit` of them.

params = {'pos', 'pos'}

local function decimal(n)
  return string.format('%.0f', n)
end

function validate(p)
  if p[1] > 100000 then
    return 'ms_log keeps one member per unit of cost: limit must be at most 100000'
  end
  if p[2] % 1000 ~= 0 then
    return 'ms_log counts whole milliseconds: the window must be a whole number of them'
  end
end

function check(key, now, cost, p)
  local limit, window = p[1], idiv(p[2], 1000)
  local t = idiv(now, 1000)
  local edge = t - window
  local live = call('ZCOUNT', key, '(' .. decimal(edge), '+inf')
  local reset = 0
  if live > 0 then
    local newest = call('ZRANGE', key, -1, -1, 'WITHSCORES')
    reset = (tonumber(newest[2]) - edge) * 1000
  end
  if cost > limit then
    return 0, nonneg(limit - live), -1, reset, limit
  end
  if live + cost <= limit then
    if cost > 0 then
      reset = window * 1000
    end
    return 1, limit - live - cost, 0, reset, limit, {t, edge, cost, window}
  end
  local nth = call('ZRANGEBYSCORE', key, '(' .. decimal(edge), '+inf', 'WITHSCORES', 'LIMIT', live + cost - limit - 1, 1)
  return 0, nonneg(limit - live), (tonumber(nth[2]) - edge) * 1000, reset, limit
end

function commit(key, w)
  local t, edge, cost, window = w[1], w[2], w[3], w[4]
  call('ZREMRANGEBYSCORE', key, '-inf', edge)
  local stamp = decimal(t)
  local n = call('ZCOUNT', key, t, t)
  for i = 1, cost do
    call('ZADD', key, t, stamp .. '.' .. decimal(n + i))
  end
  expire_us(key, window * 1000)
end
