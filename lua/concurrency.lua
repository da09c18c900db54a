-- concurrency: at most `max` leases held at once (Stripe's concurrent-requests limiter).
-- A request acquires `cost` slots under a caller-chosen lease id and releases them with the
-- refund op when it finishes; a lease nobody releases expires after `ttl`.
--
-- KEYS:   the rule's key, a sorted set with one member per lease. A lease of cost 1 is the
--         member "<lease>" scored by its expiry (µs); a lease of cost n > 1 is "<n>*<lease>"
--         scored by minus its expiry, so that the leases of cost 1, the usual ones, are
--         counted by one ZCOUNT above 0 and the others are read below 0.
-- params: max (leases >= 1), ttl (microseconds >= 1), lease (a string unique per acquisition).
-- check:  active = the cost of the leases expiring after now; allowed iff
--         active + cost <= max. remaining = max - active (after the charge when allowed).
--         retry_after (denied) = until the oldest (active + cost - max) units of the held
--         leases, in order of expiry, have expired, assuming none is released (a release
--         only makes it sooner); -1 when cost > max.
--         reset_after = until the last lease expires.
--         Work: O(log n + m) for n members and m leases of cost > 1 held; a denial adds
--         O(log m) counts of O(log n) each.
-- writes: commit drops the expired leases, adds the lease (O(log n)) and sets the TTL to
--         reset_after. refund (release) removes the lease acquired under that id with that
--         cost; any other id or cost is a lease never taken, and removes nothing.
-- memory: O(leases held), whatever their cost.
-- older layout: a lease of cost n > 1 used to be n members "<lease>:1" .. "<lease>:n"
--         scored by its expiry. They count as n leases of cost 1, which they are, and a
--         release that finds no lease "<n>*<lease>" removes them: O(n) for a release of a
--         lease of cost n > 1 that is not held (released before, or expired).
-- Denials are a 503-class answer (capacity), not a 429.

params = {'pos', 'pos', 'str'}

local function member(lease, cost)
  if cost == 1 then
    return lease
  end
  return string.format('%.0f*', cost) .. lease
end

-- held reads the leases of cost > 1 that expire after now: {expiry, units expiring at or
-- before it, ...} in order of expiry, one pair per instant, and their total cost.
local function held(key, now)
  local r = call('ZRANGEBYSCORE', key, '-inf', -(now + 1), 'WITHSCORES')
  local hs, sum = {}, 0
  for i = #r - 1, 1, -2 do
    local m = r[i]
    local j = string.find(m, '*', 1, true)
    sum = sum + (j and tonumber(string.sub(m, 1, j - 1)) or 1)
    local exp = -tonumber(r[i + 1])
    if hs[#hs - 1] == exp then
      hs[#hs] = sum
    else
      hs[#hs + 1], hs[#hs + 2] = exp, sum
    end
  end
  return hs, sum
end

-- expiring returns the instant by which `need` units of the held leases have expired:
-- the first x with singles(now, x] + weighted(now, x] >= need, where the leases of cost 1
-- are counted by ZCOUNT and those of cost > 1 are hs (see held).
local function expiring(key, now, need, hs)
  -- The first instant of hs at which enough has expired, by bisection.
  local lo, hi = 0, #hs / 2 + 1
  while hi - lo > 1 do
    local mid = lo + floor((hi - lo) / 2)
    if call('ZCOUNT', key, now + 1, hs[2 * mid - 1]) + hs[2 * mid] >= need then
      hi = mid
    else
      lo = mid
    end
  end
  -- Before that instant (or after the last of hs), the units still needed come from
  -- leases of cost 1: the k-th one's expiry, by rank.
  local k = need
  if lo > 0 then
    k = need - hs[2 * lo]
  end
  local at
  local rank = call('ZCOUNT', key, '-inf', now) + k - 1
  local r = call('ZRANGE', key, rank, rank, 'WITHSCORES')
  if r[2] then
    at = tonumber(r[2])
  end
  if hi <= #hs / 2 and (not at or at > hs[2 * hi - 1]) then
    at = hs[2 * hi - 1]
  end
  return at
end

function check(key, now, cost, p)
  local max, ttl = p[1], p[2]
  local singles = call('ZCOUNT', key, now + 1, '+inf')
  local hs, weighted = held(key, now)
  local active = singles + weighted
  local reset = 0
  if singles > 0 then
    local last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
    reset = tonumber(last[2]) - now
  end
  if weighted > 0 and hs[#hs - 1] - now > reset then
    reset = hs[#hs - 1] - now
  end
  if cost > max then
    return 0, nonneg(max - active), -1, reset, max
  end
  if active + cost <= max then
    local peek = reset
    if cost > 0 and reset < ttl then
      reset = ttl
    end
    return 1, max - active - cost, 0, reset, max, {now, ttl, p[3], cost, reset}, max - active, peek
  end
  return 0, nonneg(max - active), expiring(key, now, active + cost - max, hs) - now, reset, max
end

function commit(key, w)
  local now, ttl, lease, cost = w[1], w[2], w[3], w[4]
  call('ZREMRANGEBYSCORE', key, -now, now)
  if cost == 1 then
    call('ZADD', key, now + ttl, lease)
  else
    call('ZADD', key, -(now + ttl), member(lease, cost))
  end
  expire_us(key, w[5])
end

-- refund releases the lease: its member, or else its units in the older layout (at most
-- max of them, as no larger lease was ever acquired).
function refund(key, now, cost, p)
  local lease = p[3]
  if call('ZREM', key, member(lease, cost)) > 0 or cost == 1 or cost > p[1] then
    return
  end
  local units = {}
  for i = 1, cost do
    units[#units + 1] = lease .. string.format(':%.0f', i)
    if #units >= 1000 or i == cost then
      call('ZREM', key, unpack(units))
      units = {}
    end
  end
end

-- retune (an override's change; see prelude.lua's OVR): the leases held carry as they are,
-- against the new max; a new ttl applies to the leases taken from then on.
function retune(key, at, p, q, now)
end
