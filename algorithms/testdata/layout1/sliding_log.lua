-- sliding_log: at most `limit` cost in every window-long interval (exact).
--
-- KEYS:   the rule's key, a sorted set with one member per unit of cost charged, scored by
--         the charge's time in microseconds; members are "<time>:<k>", k = 1.. within one
--         microsecond, so members stay unique however many arrive at once.
-- params: limit (count >= 1), window (microseconds >= 1).
-- check:  the log inside (now - window, now] holds `count` members; allowed iff
--         count + cost <= limit. remaining = limit - count (after the charge when allowed).
--         retry_after (denied) = the instant the oldest (count + cost - limit) members have
--         left the window, exact to the microsecond; -1 when cost > limit.
--         reset_after = until the newest member leaves the window, 0 when the log is empty.
-- writes: commit drops members that left the window, adds `cost` members, sets the TTL to
--         reset_after. Memory is O(limit) members per key.

params = {'pos', 'pos'}


function validate(p)
  if p[1] > 1000000 then
    return 'sliding_log limit above 1000000 (one member per unit of cost)'
  end
end

-- newest returns the highest score in the log, or nil.
local function newest(key)
  local r = call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if r[2] then
    return tonumber(r[2])
  end
  return nil
end

function check(key, now, cost, p)
  local limit, window = p[1], p[2]
  local lo = now - window + 1
  local count = call('ZCOUNT', key, lo, '+inf')
  local reset = 0
  local last = nil
  if count > 0 then
    last = newest(key)
    reset = last + window - now
  end
  if cost > limit then
    return 0, nonneg(limit - count), -1, reset, limit
  end
  if count + cost <= limit then
    if cost > 0 and reset < window then
      reset = window
    end
    return 1, limit - count - cost, 0, reset, limit, {now, window, cost, reset}
  end
  local need = count + cost - limit
  local r = call('ZRANGEBYSCORE', key, lo, '+inf', 'WITHSCORES', 'LIMIT', need - 1, 1)
  return 0, nonneg(limit - count), tonumber(r[2]) + window - now, reset, limit
end

function commit(key, w)
  local now, window, cost = w[1], w[2], w[3]
  call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local k = call('ZCOUNT', key, now, now)
  local stamp = string.format('%.0f', now)
  local args = {}
  for i = 1, cost do
    args[#args + 1] = now
    args[#args + 1] = stamp .. ':' .. (k + i)
    if #args >= 1000 or i == cost then
      call('ZADD', key, unpack(args))
      args = {}
    end
  end
  expire_us(key, w[4])
end

-- refund removes the newest `cost` members charged at `now`.
function refund(key, now, cost, p)
  local k = call('ZCOUNT', key, now, now)
  local stamp = string.format('%.0f', now)
  for i = k, math.max(k - cost + 1, 1), -1 do
    call('ZREM', key, stamp .. ':' .. i)
  end
end

