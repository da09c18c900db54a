-- two_window: the sliding-window estimate over two aligned windows: the previous window's
-- cost counts for the part of it the sliding window still covers, as if it had been spread
-- evenly.
--
-- KEYS:   the rule's key, a hash {k = index of the window `cur` belongs to, cur = cost
--         charged in window k, prev = cost charged in window k - 1}.
-- params: limit (count >= 1), window W (µs >= 1); limit * W <= 2^51.
-- check:  at now, in window n = floor(now / W) with e = now - n*W elapsed in it, the
--         counts are (cur, prev) when k = n, (0, cur) when k = n - 1, else (0, 0), and
--           estimate = prev * (W - e) / W + cur.
--         A request of cost c is allowed iff estimate + c <= limit, compared exactly in
--         integers: prev * (W - e) + (cur + c) * W <= limit * W.
--         remaining = limit - cur - ceil(prev * (W - e) / W), the largest cost that fits
--         now (after the charge when allowed), never below 0.
--         retry_after (denied) = the first microsecond at which the same request fits:
--         later in this window as prev's weight decays, else in the next window as cur's
--         does (cur becomes prev there), else at the start of the window after (nothing
--         weighs); -1 when c > limit.
--         reset_after = until the estimate is 0: 2W - e when cur > 0, W - e when only prev
--         weighs, else 0.
-- precision: exact, to the microsecond.
-- bound:  2: the estimate takes prev as spread evenly, so `limit` spent at the very end of
--         one window still lets nearly `limit` more through at the start of the next.
-- TTL:    reset_after (expire_us): until cur stops weighing, at the end of the next window.

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
  return 0, remaining, window - e + at, reset, limit
end

function commit(key, w)
  call('HSET', key, 'k', w[1], 'cur', w[2], 'prev', w[3])
  expire_us(key, w[4])
end
