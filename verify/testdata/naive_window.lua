-- naive_window: lua/sliding_window.lua's estimate, with a flawed retry-after: the end
-- of the current window. Then the current window's count becomes the previous one and
-- still weighs almost fully, so the request retried as advised is denied again.
--
-- KEYS:   a hash {w = window index, c = current count, p = previous count}.
-- params: limit (count), window (µs).

params = {'pos', 'pos'}

local function view(key, now, window)
  local win = idiv(now, window)
  local st = call('HMGET', key, 'w', 'c', 'p')
  local w = tonumber(st[1])
  if w == win then
    return win, now - win * window, tonumber(st[2]) or 0, tonumber(st[3]) or 0
  elseif w == win - 1 then
    return win, now - win * window, 0, tonumber(st[2]) or 0
  end
  return win, now - win * window, 0, 0
end

function check(key, now, cost, p)
  local limit, window = p[1], p[2]
  local win, e, cur, prev = view(key, now, window)
  local weight = prev * (window - e)
  local used = cdiv(weight, window)
  local reset = 0
  if cur > 0 then
    reset = 2 * window - e
  elseif weight > 0 then
    reset = window - e
  end
  if cost > limit then
    return 0, nonneg(limit - cur - used), -1, reset, limit
  end
  if weight + (cur + cost) * window <= limit * window then
    if cost > 0 then
      reset = 2 * window - e
    end
    return 1, nonneg(limit - cur - cost - used), 0, reset, limit, {win, cur + cost, prev, 2 * window - e}
  end
  -- The flaw: "try again when this window ends".
  return 0, nonneg(limit - cur - used), window - e, reset, limit
end

function commit(key, w)
  call('HSET', key, 'w', w[1], 'c', w[2], 'p', w[3])
  expire_us(key, w[4])
end
