-- coarse_bucket: a token bucket of `capacity` tokens refilled at `rate` (r tokens per
-- period P) that answers in coarse units, as an author keeping to whole milliseconds and
-- seconds would: retry-after rounded up to a millisecond, the key's TTL in whole seconds
-- (EXPIRE). Sound, and declared so: precision { retry_after = "1ms", ttl = "1s" }.
--
-- KEYS:   the rule's key, a hash {tokens = tokens * P, fixed point so that refilling is
--         exact; ts = the instant of tokens (µs)}. No key means a full bucket.
-- params: capacity (count >= 1), rate (r >= 1 tokens per P µs); capacity * P <= 2^51.
-- check:  tokens(now) = min(capacity*P, tokens + (now - ts) * r). A request of cost c is
--         allowed iff tokens(now) >= c*P.
--         remaining = floor(tokens' / P), tokens' after the charge when allowed.
--         retry_after (denied) = ceil((c*P - tokens(now)) / r), the first microsecond at
--         which c tokens are there, rounded up to a whole millisecond: late by less than
--         1ms, never early; -1 when c > capacity.
--         reset_after = ceil((capacity*P - tokens') / r), exact: until the bucket is full.
-- precision: retry_after up to 1ms late; reset_after exact.
-- TTL:    reset_after rounded up to whole seconds (EXPIRE): the key outlives its meaning
--         by less than 1s (Redis keeps it through the last millisecond of its expire
--         time, so it never expires while it means something); a full bucket and a
--         missing key mean the same thing.

params = {'pos', 'pos', 'pos'}

function validate(p)
  if p[1] * p[3] > MAX_INT / 4 then
    return 'coarse_bucket capacity*period exceeds 2^51'
  end
end

-- tokens_at returns the bucket's tokens at now (fixed point).
local function tokens_at(key, now, full, rate)
  local st = call('HMGET', key, 'tokens', 'ts')
  local tokens, ts = tonumber(st[1]), tonumber(st[2])
  if tokens == nil or ts == nil or now - ts >= cdiv(full - tokens, rate) then
    return full
  end
  return tokens + nonneg(now - ts) * rate
end

function check(key, now, cost, p)
  local capacity, rate, period = p[1], p[2], p[3]
  local full = capacity * period
  local tokens = tokens_at(key, now, full, rate)
  local need = cost * period
  if cost > capacity then
    return 0, idiv(tokens, period), -1, cdiv(full - tokens, rate), capacity
  end
  if tokens >= need then
    local left = tokens - need
    local reset = cdiv(full - left, rate)
    return 1, idiv(left, period), 0, reset, capacity, {left, now, reset}
  end
  local wait_ms = cdiv(cdiv(need - tokens, rate), 1000)
  return 0, idiv(tokens, period), wait_ms * 1000, cdiv(full - tokens, rate), capacity
end

function commit(key, w)
  call('HSET', key, 'tokens', w[1], 'ts', w[2])
  call('EXPIRE', key, cdiv(w[3], 1000000))
end
