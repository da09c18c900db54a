-- base: two_window
-- bug: a request that fits only in the next window is told to retry at the end of the current one, where the current count still weighs almost fully (the retry-after of many published sliding-window scripts).
-- caught-by: retry-after

params = {'pos', 'pos'}

function validate(p)
  if p[1] * p[2] > MAX_INT / 4 then
    return 'two_window limit*window exceeds 2^51'
  end
end

-- counts returns the window index at now, the time elapsed in it, and (cur, prev) there.
local function counts(key, now, window)
  local n = idiv(now, window)
  local e = now - n * window
  local st = call('HMGET', key, 'k', 'cur', 'prev')
  local k = tonumber(st[1])
  if k == n then
    return n, e, tonumber(st[2]) or 0, tonumber(st[3]) or 0
  elseif k == n - 1 then
    return n, e, 0, tonumber(st[2]) or 0
  end
  return n, e, 0, 0
end

function check(key, now, cost, p)
  local limit, window = p[1], p[2]
  local n, e, cur, prev = counts(key, now, window)
  local weight = prev * (window - e)
  local fits = weight + (cur + cost) * window <= limit * window
  if fits then
    cur = cur + cost
  end
  local remaining = nonneg(limit - cur - cdiv(weight, window))
  local reset = 0
  if cur > 0 then
    reset = 2 * window - e
  elseif weight > 0 then
    reset = window - e
  end
  if fits then
    return 1, remaining, 0, reset, limit, {n, cur, prev, reset}
  end
  if cost > limit then
    return 0, remaining, -1, reset, limit
  end
  -- Later in this window: prev's weight must fall to room * W.
  local room = limit - cur - cost
  if room >= 0 then
    local at = window - idiv(room * window, prev)
    if at < window then
      return 0, remaining, at - e, reset, limit
    end
  end
  -- In the next window cur weighs as prev did; by its end nothing weighs.
  local at = 0
  if cur > 0 then
    at = math.min(window, nonneg(window - idiv((limit - cost) * window, cur)))
  end
  return 0, remaining, window - e, reset, limit
end

function commit(key, w)
  call('HSET', key, 'k', w[1], 'cur', w[2], 'prev', w[3])
  expire_us(key, w[4])
end
