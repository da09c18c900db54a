-- lease_pool: at most `slots` units of cost held at once. A request takes `cost` slots
-- under the lease id the engine gives it and gives them back with the refund op (a
-- release) when it finishes; slots nobody gives back are free again `ttl` after they were
-- taken.
--
-- KEYS:   the rule's key, a sorted set with one member per slot taken, "<lease>#<i>" for
--         i = 1..cost, scored by the instant the slot frees itself (taken + ttl, µs).
-- params: slots (count >= 1), ttl (µs >= 1), lease (a string unique per request).
-- check:  held = the members scored after now; a request of cost c is allowed iff
--         held + c <= slots.
--         remaining = slots - held, less c when allowed.
--         retry_after (denied) = until the (held + c - slots)-th earliest member frees
--         itself, assuming nobody releases (a release only makes it sooner); -1 when
--         c > slots.
--         reset_after = until the last member frees itself, 0 when none is held.
-- precision: exact, to the microsecond.
-- TTL:    reset_after (expire_us); commit drops the members that freed themselves and
--         trims the set to `slots` members, so it stays bounded whatever happens.
-- refund: releases the lease: removes its own members, and nobody else's.

params = {'pos', 'pos', 'str'}

local function slot(lease, i)
  return string.format('%s#%d', lease, i)
end

function check(key, now, cost, p)
  local slots, ttl = p[1], p[2]
  local after = '(' .. string.format('%.0f', now)
  local held = call('ZCOUNT', key, after, '+inf')
  local reset = 0
  if held > 0 then
    local last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
    reset = tonumber(last[2]) - now
  end
  if cost > slots then
    return 0, nonneg(slots - held), -1, reset, slots
  end
  if held + cost <= slots then
    if cost > 0 then
      reset = ttl
    end
    return 1, slots - held - cost, 0, reset, slots, {now, ttl, p[3], cost, slots}
  end
  local nth = call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', held + cost - slots - 1, 1)
  return 0, nonneg(slots - held), tonumber(nth[2]) - now, reset, slots
end

function commit(key, w)
  local now, ttl, lease, cost, slots = w[1], w[2], w[3], w[4], w[5]
  call('ZREMRANGEBYSCORE', key, '-inf', now)
  for i = 1, cost do
    call('ZADD', key, now + ttl, slot(lease, i))
  end
  call('ZREMRANGEBYRANK', key, 0, -(slots + 1))
  expire_us(key, ttl)
end

function refund(key, now, cost, p)
  for i = 1, cost do
    call('ZREM', key, slot(p[3], i))
  end
end
