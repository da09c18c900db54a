-- gcra: the generic cell rate algorithm (redis-cell / redis_rate semantics). Cells are
-- emitted every T = period / rate microseconds; up to `burst` cells may be taken at once.
--
-- KEYS:   the rule's key, a string holding the theoretical arrival time TAT: its
--         microseconds when TAT is whole (always, when T is a whole number of
--         microseconds: the string is then an integer, Redis's smallest value), else
--         "t:r" for TAT = t + r/rate microseconds (r in [1, rate)): exact for any rate and
--         period. No key means TAT <= now; so does a key of another type (a layout of an
--         earlier version), which the next charge overwrites.
-- params: rate (cells >= 1) per period (microseconds >= 1), burst (cells >= 1);
--         burst * period <= 2^51.
-- check:  D = max(0, TAT - now); allowed iff D + cost*T <= burst*T (all scaled by rate into
--         integers). On allow, TAT' = max(TAT, now) + cost*T.
--         remaining = floor((burst*T - D') / T) with D' after the charge when allowed.
--         retry_after (denied) = ceil(D + cost*T - burst*T), exact; -1 when cost > burst.
--         reset_after = ceil(D') (until TAT' <= now).
-- Redis:  one GET to check, one SET … PX to commit (a compiled rule's try charges a key
--         without a TAT in one SET … NX GET: algorithms/fast.go).
-- TTL:    reset_after; TAT <= now and a missing key mean the same thing.

params = {'pos', 'pos', 'pos'}


function validate(p)
  if p[3] * p[2] > MAX_INT / 4 then
    return 'gcra burst*period exceeds 2^51'
  end
end

-- delay returns D scaled by rate, max(0, TAT - now) * rate, and whether TAT >= now (a
-- TAT exactly now is state a refund still clears).
local function delay(key, now, rate)
  local v = redis_pcall('GET', key) -- a string, false (no key) or an error table
  if not v then
    return 0, false
  end
  local t, r = tonumber(v), 0
  if t == nil then
    if type(v) ~= 'string' then
      return 0, false
    end
    local a, b = string.match(v, '^(%d+):(%d+)$')
    t, r = tonumber(a), tonumber(b)
  end
  if t == nil or r == nil or t < now then
    return 0, false
  end
  return (t - now) * rate + r, true
end

-- whole returns rate and period with T = period / rate kept: (1, T) when T is a whole
-- number of microseconds, so that D needs no scaling and no division by rate; else as
-- given. Both describe the same cells exactly.
local function whole(rate, period)
  if rate ~= 1 and period % rate == 0 then
    return 1, period / rate
  end
  return rate, period
end

-- store writes the TAT now + d/rate (d scaled by rate) to live ttl microseconds, until it
-- has passed (ttl = ceil(d / rate)).
local function store(key, now, d, rate, ttl)
  local v = now + d
  if rate ~= 1 then
    local w = floor(d / rate)
    local r = d - w * rate
    v = now + w
    if r ~= 0 then
      v = string.format('%.0f:%.0f', v, r)
    end
  end
  set_us(key, v, ttl)
end

function check(key, now, cost, p)
  local rate, period = whole(p[1], p[2])
  local burst = p[3]
  local d = delay(key, now, rate)
  local cap = burst * period
  local reset = d
  if rate ~= 1 then
    reset = ceil(d / rate)
  end
  if cost > burst then
    return 0, nonneg(floor((cap - d) / period)), -1, reset, burst
  end
  local d2 = d + cost * period
  if d2 <= cap then
    local peek = reset
    reset = d2
    if rate ~= 1 then
      reset = ceil(d2 / rate)
    end
    local remaining = floor((cap - d2) / period)
    return 1, remaining, 0, reset, burst, {now, d2, rate, reset}, remaining + cost, peek
  end
  local retry = d2 - cap
  if rate ~= 1 then
    retry = ceil(retry / rate)
  end
  return 0, nonneg(floor((cap - d) / period)), retry, reset, burst
end

function commit(key, w)
  store(key, w[1], w[2], w[3], w[4])
end

function refund(key, now, cost, p)
  local rate, period = whole(p[1], p[2])
  local d, live = delay(key, now, rate)
  if not live then
    return
  end
  d = nonneg(d - cost * period)
  if d == 0 then
    call('DEL', key)
    return
  end
  local ttl = d
  if rate ~= 1 then
    ttl = ceil(d / rate)
  end
  store(key, now, d, rate, ttl)
end

-- owe charges cost without a check (the overdraft of a settled reservation): the TAT
-- moves on by cost*T from max(TAT, now), past the burst when that is where it goes, so
-- the key denies until the debt is earned back (D within the burst again). D is held at
-- most 2^52 (scaled by rate), past any rule's period.
function owe(key, now, cost, p)
  local rate, period = whole(p[1], p[2])
  local d = delay(key, now, rate) + cost * period
  if d > MAX_INT / 2 then
    d = MAX_INT / 2
  end
  local ttl = d
  if rate ~= 1 then
    ttl = ceil(d / rate)
  end
  store(key, now, d, rate, ttl)
end

-- retune (an override's change; see prelude.lua's OVR) converts the key's state at at
-- from parameters p to q (its TTLs counted from the call's instant now >= at): the cells the key has used, D/T rounded up to a whole cell and at
-- most q's burst, are its use under q, D' = used * T'.
function retune(key, at, p, q, now)
  local rate, period = whole(p[1], p[2])
  local used = ceil(delay(key, at, rate) / period)
  if used > q[3] then
    used = q[3]
  end
  if used == 0 then
    call('DEL', key)
    return
  end
  local rate2, period2 = whole(q[1], q[2])
  local d = used * period2
  local ttl = d
  if rate2 ~= 1 then
    ttl = ceil(d / rate2)
  end
  ttl = ttl - (now - at)
  if ttl <= 0 then
    call('DEL', key) -- the TAT has passed: the key's state is empty at now
    return
  end
  store(key, at, d, rate2, ttl)
end
