-- rate_limit_redis: express-rate-limit's middleware on the `rate-limit-redis` store
-- (RedisStore, source/scripts.ts `increment` and `get`), ported to the plugin contract.
-- A hit counter whose window starts at the key's first hit and lasts windowMs (the key's
-- PX TTL), not an aligned window. Upstream reads no clock at all: time is Redis's, through
-- the key's TTL (PTTL), exactly as here.
--
-- KEYS:   the rule's key, a string: the hits counted since the window began, with a PX TTL
--         of windowMs set when the window begins (resetExpiryOnChange = false, the default:
--         later hits do not move it).
-- params: limit (count: express-rate-limit's `limit`), window (µs, a whole number of ms:
--         `windowMs`).
-- check:  the store's increment script, then the middleware's decision:
--           ttl = PTTL key (ms; -2 without the key)
--           ttl <= 0:  SET key c PX windowMs; hits = c; timeToExpire = windowMs
--           else:      hits = INCRBY key c;   timeToExpire = ttl
--         allowed iff hits <= limit (express-rate-limit blocks when totalHits > limit).
--         The hit is counted whether or not the request is then allowed: a denied request
--         writes (check writes here, as upstream's script increments before the decision).
--         remaining   = max(limit - hits, 0) (the middleware's info.remaining).
--         retry_after (denied) = the Retry-After header: ceil(timeToExpire / 1000) seconds
--                     (resetTime = Date.now() + timeToExpire; getResetSeconds rounds up);
--                     never -1.
--         reset_after = the store's resetTime less now: timeToExpire ms (0 with no key).
--         A peek (cost 0) is the store's `get` script: GET and PTTL, no write; allowed iff
--         hits <= limit.
-- precision: milliseconds (PTTL), the Retry-After header in whole seconds.
-- TTL:    PX windowMs from the window's first hit (upstream's SET ... PX).
-- Plumbing: upstream counts one hit per request (express-rate-limit validates
--         `singleCount`); the contract's cost c is taken as c hits at once: INCRBY c in place
--         of INCR, SET c in place of SET 1. The time upstream sees is Redis's own clock, the
--         key's TTL; here the host's clock at the dispatcher's `now`.

params = {'pos', 'pos'} -- limit, window (µs)

function validate(p)
  if p[2] % 1000 ~= 0 then
    return 'rate_limit_redis: windowMs is a whole number of milliseconds upstream'
  end
end

local function answer(limit, hits, timeToExpire, pending)
  local remaining = math.max(limit - hits, 0)
  local reset = 0
  if timeToExpire > 0 then
    reset = timeToExpire * 1000
  end
  if hits > limit then
    return 0, remaining, math.max(0, cdiv(timeToExpire, 1000)) * 1000000, reset, limit
  end
  return 1, remaining, 0, reset, limit, pending
end

function check(key, now, cost, p)
  local limit, windowMs = p[1], idiv(p[2], 1000)
  if cost == 0 then
    -- the store's get script
    local totalHits = tonumber(call('GET', key)) or 0
    local timeToExpire = call('PTTL', key)
    return answer(limit, totalHits, timeToExpire)
  end
  -- the store's increment script
  local timeToExpire = call('PTTL', key)
  local hits
  if timeToExpire <= 0 then
    hits, timeToExpire = cost, windowMs
    if hits > limit then
      call('SET', key, cost, 'PX', windowMs) -- counted, then blocked
    end
    return answer(limit, hits, timeToExpire, {0, cost, windowMs})
  end
  hits = (tonumber(call('GET', key)) or 0) + cost
  if hits > limit then
    call('INCRBY', key, cost) -- counted, then blocked
  end
  return answer(limit, hits, timeToExpire, {1, cost})
end

function commit(key, w)
  if w[1] == 0 then
    call('SET', key, w[2], 'PX', w[3])
  else
    call('INCRBY', key, w[2])
  end
end
