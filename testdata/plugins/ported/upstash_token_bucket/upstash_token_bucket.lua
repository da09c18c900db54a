-- upstash_token_bucket: @upstash/ratelimit's tokenBucket (src/single.ts, which runs
-- tokenBucketLimitScript of src/lua-scripts/single.ts), ported to the plugin contract.
-- Upstream's arithmetic is kept as it is; only how the key, the time and the parameters
-- arrive, and how the answers leave, is plumbing.
--
-- KEYS:   the rule's key, a hash {refilledAt = the ms instant of the last refill step,
--         tokens = the tokens left then, negative when a request took more than there was}.
--         No key means a full bucket.
-- params: maxTokens (count), refill (rate: refillRate tokens every interval µs, interval a
--         whole number of ms: upstream's tokenBucket(refillRate, interval, maxTokens)).
-- check:  as upstream, in milliseconds (Date.now()):
--           no key: refilledAt = now, tokens = maxTokens
--           now >= refilledAt + interval: n = floor((now - refilledAt) / interval),
--             tokens = min(maxTokens, tokens + n * refillRate), refilledAt += n * interval
--         refill happens in whole steps, refillRate tokens at once every interval.
--         tokens == 0 and c > 0: denied, nothing written.
--         otherwise remaining = tokens - c is written (HSET, PEXPIRE ceil((maxTokens -
--         remaining) / refillRate) * interval ms when > 0), and TypeScript's success is
--         remaining >= 0: a request larger than the tokens left (but with tokens != 0) is
--         denied AFTER the bucket was charged, leaving it negative (check writes here, as
--         upstream's script does); a bucket below 0 is charged again by every request,
--         since only tokens == 0 is refused outright.
--         remaining   = max(0, remaining).
--         retry_after (denied) = upstream's `reset` = refilledAt + interval, less now; never
--                     -1.
--         reset_after = the same `reset` less now whenever the key holds a bucket that is
--                     not full (upstream always returns a `reset`; the contract's 0 means
--                     "already empty").
--         A peek (cost 0) is upstream's getRemaining (tokenBucketRemainingTokensScript): the
--         stored tokens as they are, not refilled, and no write.
-- precision: milliseconds (Date.now()); refills in steps of `interval`.
-- TTL:    upstream's PEXPIRE ceil((maxTokens - remaining) / refillRate) * interval ms from
--         now, not from refilledAt.
-- Plumbing: `now` is the dispatcher's µs floored to ms (Date.now()); the dynamic-limit key
--         is "" and the ephemeral in-process cache is off: only the Redis script is ported.

params = {'pos', 'pos', 'pos'} -- maxTokens, refillRate, interval (µs)

function validate(p)
  if p[3] % 1000 ~= 0 then
    return 'upstash_token_bucket: the interval is a whole number of milliseconds upstream'
  end
end

function check(key, now_us, cost, p)
  local maxTokens, refillRate, interval = p[1], p[2], idiv(p[3], 1000)
  local now = idiv(now_us, 1000)
  local bucket = call('HMGET', key, 'refilledAt', 'tokens')

  if cost == 0 then
    -- getRemaining: the stored tokens, not refilled
    if not bucket[1] then
      return 1, maxTokens, 0, 0, maxTokens
    end
    local stored, at = tonumber(bucket[2]), tonumber(bucket[1])
    local reset = nonneg((at + interval) * 1000 - now_us)
    if stored >= 0 then
      return 1, stored, 0, reset, maxTokens
    end
    return 0, 0, reset, reset, maxTokens
  end

  local refilledAt, tokens
  if not bucket[1] then
    refilledAt = now
    tokens = maxTokens
  else
    refilledAt = tonumber(bucket[1])
    tokens = tonumber(bucket[2])
  end
  if now >= refilledAt + interval then
    local numRefills = math.floor((now - refilledAt) / interval)
    tokens = math.min(maxTokens, tokens + numRefills * refillRate)
    refilledAt = refilledAt + numRefills * interval
  end
  local to_reset = (refilledAt + interval) * 1000 - now_us

  if tokens == 0 then
    return 0, 0, to_reset, to_reset, maxTokens
  end

  local remaining = tokens - cost
  local expireAt = math.ceil((maxTokens - remaining) / refillRate) * interval
  local w = {refilledAt, remaining, expireAt}
  if remaining >= 0 then
    local reset = 0
    if remaining < maxTokens then
      reset = to_reset
    end
    return 1, remaining, 0, reset, maxTokens, w
  end
  commit(key, w) -- upstream has written the negative bucket already
  return 0, 0, to_reset, to_reset, maxTokens
end

function commit(key, w)
  call('HSET', key, 'refilledAt', w[1], 'tokens', w[2])
  if w[3] > 0 then
    call('PEXPIRE', key, w[3])
  end
end
