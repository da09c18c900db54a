-- concurrency: at most `max` leases held at once (Stripe's concurrent-requests limiter).
-- A request acquires `cost` slots under a caller-chosen lease id and releases them with the
-- refund op when it finishes; a lease nobody releases expires after `ttl`.
--
-- KEYS:   the rule's key, a sorted set of lease members scored by their expiry (µs). A lease
--         of cost 1 is the member "<lease>"; a lease of cost n is "<lease>:1" .. "<lease>:n".
-- params: max (leases >= 1), ttl (microseconds >= 1), lease (a string unique per acquisition).
-- check:  active = members expiring after now; allowed iff active + cost <= max.
--         remaining = max - active (after the charge when allowed).
--         retry_after (denied) = until enough leases expire, assuming none is released
--         (a release only makes it sooner); -1 when cost > max.
--         reset_after = until the last lease expires.
-- Denials are a 503-class answer (capacity), not a 429.

params = {'pos', 'pos', 'str'}


local function member(lease, cost, i)
  if cost == 1 then
    return lease
  end
  return lease .. ':' .. i
end

function check(key, now, cost, p)
  local max, ttl = p[1], p[2]
  local active = call('ZCOUNT', key, now + 1, '+inf')
  local reset = 0
  if active > 0 then
    local last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
    reset = tonumber(last[2]) - now
  end
  if cost > max then
    return 0, nonneg(max - active), -1, reset, max
  end
  if active + cost <= max then
    if cost > 0 and reset < ttl then
      reset = ttl
    end
    return 1, max - active - cost, 0, reset, max, {now, ttl, p[3], cost, reset}
  end
  local need = active + cost - max
  local r = call('ZRANGEBYSCORE', key, now + 1, '+inf', 'WITHSCORES', 'LIMIT', need - 1, 1)
  return 0, nonneg(max - active), tonumber(r[2]) - now, reset, max
end

function commit(key, w)
  local now, ttl, lease, cost = w[1], w[2], w[3], w[4]
  call('ZREMRANGEBYSCORE', key, '-inf', now)
  for i = 1, cost do
    call('ZADD', key, now + ttl, member(lease, cost, i))
  end
  expire_us(key, w[5])
end

-- refund releases the lease.
function refund(key, now, cost, p)
  for i = 1, cost do
    call('ZREM', key, member(p[3], cost, i))
  end
end

