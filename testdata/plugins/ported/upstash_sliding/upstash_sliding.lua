-- upstash_sliding: @upstash/ratelimit's slidingWindow (src/single.ts, which runs
-- slidingWindowLimitScript of src/lua-scripts/single.ts), ported to the plugin contract.
-- Upstream's arithmetic is kept as it is, floats, floor and all; only how the keys, the
-- time and the parameters arrive, and how the answers leave, is plumbing.
--
-- KEYS:   the rule's key, a hash standing for upstream's two string keys
--         "<identifier>:<n>": one field per window index n (decimal), holding INCRBY's
--         count for window n. Upstream reads only the fields of the current window k and
--         the previous one k-1; commit keeps only those two (upstream's older keys are
--         never read again and expire on their own).
-- params: tokens (count: the limit per window), window (µs, a whole number of ms:
--         upstream's `ms(window)`).
-- check:  as upstream, in milliseconds (upstream's Date.now()):
--           now = floor(now_us / 1000);  k = floor(now / window)  (computed in TypeScript)
--           cur = field k or 0;  prev = field k-1 or 0
--           prevW = math.floor((1 - (now % window) / window) * prev)   (a float product)
--         A request of cost c (upstream's `rate`, incrementBy) is refused outright iff
--         prevW + cur >= tokens: the test ignores c. Otherwise upstream INCRBYs c and
--         returns tokens - (cur + c + prevW), and TypeScript's success is that >= 0: a
--         request whose c does not fit is denied AFTER it was charged (here: check writes,
--         as upstream's script does).
--         remaining   = max(0, tokens - (cur + c + prevW)) when it passed the test, else 0.
--         retry_after (denied) = upstream's `reset` = (k + 1) * window, the end of the
--                     current window (in ms), less now_us; never -1.
--         reset_after = the same `reset` less now_us while the key holds a count for
--                     window k or k-1 (upstream returns `reset` always; with nothing stored
--                     the contract's 0 means "already empty").
--         A peek (cost 0) is upstream's getRemaining (slidingWindowRemainingTokensScript):
--         no write, remaining = max(0, tokens - (cur + prevW)).
-- precision: upstream's: milliseconds (Date.now()), a float weight floored.
-- TTL:    upstream's PEXPIRE window * 2 + 1000 ms, set when the current window's count is
--         first created (INCRBY's result equals c), "enough time to overlap with a new
--         window + 1 second".
-- Plumbing: upstream's TypeScript reads Date.now() and names the two keys; here `now`
--         is the dispatcher's µs, floored to ms, and the keys are two fields of one hash.
--         The dynamic-limit key (KEYS[3]) is "" (dynamicLimits off) and the ephemeral
--         in-process cache (ephemeralCache) is off: only the Redis script is ported.

params = {'pos', 'pos'} -- tokens, window (µs)

local function decimal(n)
  return string.format('%.0f', n)
end

function validate(p)
  if p[2] % 1000 ~= 0 then
    return 'upstash_sliding: the window is a whole number of milliseconds upstream'
  end
end

-- state returns the window index k, upstream's ms now, cur, the raw prev count and prevW.
local function state(key, now_us, window)
  local now = idiv(now_us, 1000)
  local k = idiv(now, window)
  local st = call('HMGET', key, decimal(k), decimal(k - 1))
  local cur = tonumber(st[1]) or 0
  local prev = tonumber(st[2]) or 0
  local percentageInCurrent = (now % window) / window
  local prevW = math.floor((1 - percentageInCurrent) * prev)
  return k, now, cur, prev, prevW
end

-- charge is upstream's INCRBY (and PEXPIRE on the first count of the window) on the
-- field of window k; the hash keeps window k-1's count beside it and nothing older.
local function charge(key, k, cur, prev, cost, window)
  if cur == 0 then
    call('DEL', key)
    if prev > 0 then
      call('HSET', key, decimal(k - 1), prev)
    end
  end
  local newValue = call('HINCRBY', key, decimal(k), cost)
  if newValue == cost then
    call('PEXPIRE', key, window * 2 + 1000)
  end
end

function check(key, now_us, cost, p)
  local tokens, window = p[1], idiv(p[2], 1000)
  local k, now, cur, prev, prevW = state(key, now_us, window)
  local to_reset = (k + 1) * window * 1000 - now_us
  local reset = 0
  if cur > 0 or prev > 0 then
    reset = to_reset
  end
  if cost == 0 then
    local rem = tokens - (cur + prevW)
    if rem >= 0 then
      return 1, rem, 0, reset, tokens
    end
    return 0, 0, to_reset, reset, tokens
  end
  if prevW + cur >= tokens then
    return 0, 0, to_reset, reset, tokens
  end
  local rem = tokens - (cur + cost + prevW)
  if rem >= 0 then
    return 1, rem, 0, to_reset, tokens, {k, cur, prev, cost, window}
  end
  -- Upstream's script has already INCRBY'd: the TypeScript denies a request it charged.
  charge(key, k, cur, prev, cost, window)
  return 0, 0, to_reset, to_reset, tokens
end

function commit(key, w)
  charge(key, w[1], w[2], w[3], w[4], w[5])
end
