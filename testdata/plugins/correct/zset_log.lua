-- zset_log: a sliding log kept in a sorted set: at most `limit` cost in any window-long
-- interval, exactly.
--
-- KEYS:   the rule's key, a sorted set with one member per unit of cost charged, scored by
--         the instant of the charge (µs). A member is "<instant>.<n>", n numbering the units
--         charged at that instant, so two charges in one microsecond stay two members.
-- params: limit (count >= 1, at most 100000: one member per unit), window (µs >= 1).
-- check:  live = the members scored in (now - window, now]; a request of cost c is allowed
--         iff live + c <= limit.
--         remaining = limit - live, less c when allowed.
--         retry_after (denied) = until the (live + c - limit)-th oldest live member leaves
--         the window (its score + window - now), the first microsecond at which c fits;
--         -1 when c > limit.
--         reset_after = until the newest live member leaves the window (its score +
--         window - now), 0 when none is live.
-- precision: exact, to the microsecond.
-- TTL:    reset_after, through expire_us; commit drops the members that left the window,
--         so the set never holds more than `limit` of them.

params = {'pos', 'pos'}

local function decimal(us)
  return string.format('%.0f', us)
end

function validate(p)
  if p[1] > 100000 then
    return 'zset_log keeps one member per unit of cost: limit must be at most 100000'
  end
end

function check(key, now, cost, p)
  local limit, window = p[1], p[2]
  local edge = now - window
  local live = call('ZCOUNT', key, '(' .. decimal(edge), '+inf')
  local reset = 0
  if live > 0 then
    local newest = call('ZRANGE', key, -1, -1, 'WITHSCORES')
    reset = tonumber(newest[2]) - edge
  end
  if cost > limit then
    return 0, nonneg(limit - live), -1, reset, limit
  end
  if live + cost <= limit then
    if cost > 0 then
      reset = window
    end
    return 1, limit - live - cost, 0, reset, limit, {now, edge, cost, window}
  end
  local nth = call('ZRANGEBYSCORE', key, '(' .. decimal(edge), '+inf', 'WITHSCORES', 'LIMIT', live + cost - limit - 1, 1)
  return 0, nonneg(limit - live), tonumber(nth[2]) - edge, reset, limit
end

function commit(key, w)
  local now, edge, cost, window = w[1], w[2], w[3], w[4]
  call('ZREMRANGEBYSCORE', key, '-inf', edge)
  local stamp = decimal(now)
  local n = call('ZCOUNT', key, now, now)
  for i = 1, cost do
    local member = stamp .. '.' .. decimal(n + i)
    call('ZADD', key, now, member)
  end
  expire_us(key, window)
end
