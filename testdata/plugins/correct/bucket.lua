-- bucket: a token bucket of `capacity` tokens refilled at `rate` (r tokens per period P),
-- kept as what the bucket owes: the tokens missing from a full bucket.
--
-- KEYS:   the rule's key, a hash {owed = (capacity - tokens) * P, fixed point so that
--         refilling is exact; at = the instant owed was measured (µs)}. No key means a
--         full bucket (owed 0).
-- params: capacity (count >= 1), rate (r >= 1 tokens per P µs); capacity * P <= 2^51.
-- check:  owed(now) = max(0, owed - (now - at) * r). A request of cost c is allowed iff
--         owed(now) + c*P <= capacity*P.
--         remaining = floor((capacity*P - owed') / P), owed' after the charge when allowed:
--         the most tokens a request can take now.
--         retry_after (denied) = ceil((owed(now) + c*P - capacity*P) / r), the first
--         microsecond at which c tokens are there; -1 when c > capacity.
--         reset_after = ceil(owed' / r): until the bucket is full again.
-- precision: exact, to the microsecond.
-- TTL:    reset_after (expire_us): a full bucket and a missing key mean the same thing.

params = {'pos', 'pos', 'pos'}

function validate(p)
  if p[1] * p[3] > MAX_INT / 4 then
    return 'bucket capacity*period exceeds 2^51'
  end
end

-- owed_at returns what the bucket owes at now (fixed point, >= 0).
local function owed_at(key, now, rate)
  local st = call('HMGET', key, 'owed', 'at')
  local owed, at = tonumber(st[1]), tonumber(st[2])
  if owed == nil or at == nil or now - at >= cdiv(owed, rate) then
    return 0
  end
  return owed - nonneg(now - at) * rate
end

function check(key, now, cost, p)
  local capacity, rate, period = p[1], p[2], p[3]
  local full = capacity * period
  local owed = owed_at(key, now, rate)
  local need = cost * period
  if cost > capacity then
    return 0, idiv(full - owed, period), -1, cdiv(owed, rate), capacity
  end
  if owed + need <= full then
    local after = owed + need
    local reset = cdiv(after, rate)
    return 1, idiv(full - after, period), 0, reset, capacity, {after, now, reset}
  end
  return 0, idiv(full - owed, period), cdiv(owed + need - full, rate), cdiv(owed, rate), capacity
end

function commit(key, w)
  call('HSET', key, 'owed', w[1], 'at', w[2])
  expire_us(key, w[3])
end
