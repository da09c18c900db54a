-- base: two_keys
-- bug: expires the current window's key at the end of its own window, as if it stopped counting there: renamed to prev it is already gone, and the previous window weighs nothing
-- caught-by: reset-after

params = {'pos', 'pos'}

function validate(p)
  if p[1] * p[2] > MAX_INT / 4 then
    return 'two_keys limit*window exceeds 2^51'
  end
end

-- counts returns the window index at now, the time elapsed in it, (cur, prev) there, and
-- whether cur's key holds the previous window (to be renamed when this window charges).
local function counts(key, now, window)
  local n = idiv(now, window)
  local e = now - n * window
  local c = call('HMGET', subkey(key, 'cur'), 'k', 'n')
  local ck = tonumber(c[1])
  if ck == n then
    local p = call('HMGET', subkey(key, 'prev'), 'k', 'n')
    local prev = 0
    if tonumber(p[1]) == n - 1 then
      prev = tonumber(p[2])
    end
    return n, e, tonumber(c[2]), prev, false
  elseif ck == n - 1 then
    return n, e, 0, tonumber(c[2]), true
  end
  local p = call('HMGET', subkey(key, 'prev'), 'k', 'n')
  if tonumber(p[1]) == n - 1 then
    return n, e, 0, tonumber(p[2]), false
  end
  return n, e, 0, 0, false
end

function check(key, now, cost, p)
  local limit, window = p[1], p[2]
  local n, e, cur, prev, rotate = counts(key, now, window)
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
    return 1, remaining, 0, reset, limit, {n, cur, rotate, window - e, window}
  end
  if cost > limit then
    return 0, remaining, -1, reset, limit
  end
  local room = limit - cur - cost
  if room >= 0 then
    local at = window - idiv(room * window, prev)
    if at < window then
      return 0, remaining, at - e, reset, limit
    end
  end
  local at = 0
  if cur > 0 then
    at = math.min(window, nonneg(window - idiv((limit - cost) * window, cur)))
  end
  return 0, remaining, window - e + at, reset, limit
end

-- commit renames cur to prev when this is the first charge of a new window, then charges
-- the current window, whose key lives to the end of the next (w[4] to this window's end,
-- w[5] one more window).
function commit(key, w)
  local cur = subkey(key, 'cur')
  if w[3] then
    call('RENAME', cur, subkey(key, 'prev'))
  end
  call('HSET', cur, 'k', w[1], 'n', w[2])
  expire_us(cur, w[4])
end
