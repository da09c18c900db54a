-- sliding_window: the two-window estimate. The previous window's count is weighted by the
-- part of it that still overlaps the sliding window [now - window, now).
--
-- KEYS:   the rule's key, a hash {w = current window index k, c = cost charged in window k,
--         p = cost charged in window k - 1}.
-- params: limit (count >= 0), window (microseconds >= 1); limit * window <= 2^51. A limit
--         of 0 admits nothing: every cost above 0 is over it (retry_after -1, nothing
--         written) and a peek (cost 0) of a key nothing was charged to is allowed, with
--         remaining 0.
-- check:  with e = now - k*window (elapsed in the current window),
--           estimate = p * (window - e) / window + c
--         allowed iff estimate + cost <= limit, compared exactly in integers:
--           p * (window - e) + (c + cost) * window <= limit * window.
--         remaining = the largest cost that would fit now (after the charge when allowed).
--         retry_after (denied) = the exact first microsecond at which the same request fits
--         as the previous window's weight decays, or in the next window, or the one after
--         (never just "the end of the window"); -1 when cost > limit.
--         reset_after = until the estimate reaches 0 (2 windows after a charge at most).
-- Bound:  the estimate assumes the previous window's traffic was spread evenly; in any
--         window-long interval at most 2*limit can pass (all of p at the very end of the
--         previous window). verify checks the documented bound.
-- Clocks: with client clocks, a request whose clock is in an earlier window than the key's
--         (a caller whose clock runs behind) is decided as at the start of the key's window,
--         where everything stored weighs fully, and its times are counted from its own
--         clock: the key's window never moves back, so callers whose clocks disagree cannot
--         reopen a window.
-- TTL:    until the current window's count stops weighing, i.e. the end of the next window,
--         set by the write that opens a window; the later writes of that window keep it.

params = {'nat', 'pos'}


function validate(p)
  if p[1] * p[2] > MAX_INT / 4 then
    return 'sliding_window limit*window exceeds 2^51'
  end
end

-- view returns the window index, the elapsed time in it, and the counts (c, p) as seen at
-- now, the time from now to the instant they are seen at (> 0 only when now is in an
-- earlier window than the key's: then they are seen at the start of the key's window), and
-- whether the key holds that window (its TTL then set by the write that opened it).
local function view(key, now, window)
  local win = floor(now / window)
  local st = call('HMGET', key, 'w', 'c', 'p')
  local w = tonumber(st[1])
  if w == win then
    return win, now - win * window, tonumber(st[2]) or 0, tonumber(st[3]) or 0, 0, true
  elseif w == win - 1 then
    return win, now - win * window, 0, tonumber(st[2]) or 0, 0
  elseif w ~= nil and w > win then
    return w, 0, tonumber(st[2]) or 0, tonumber(st[3]) or 0, w * window - now, true
  end
  return win, now - win * window, 0, 0, 0
end

function check(key, now, cost, p)
  local limit, window = p[1], p[2]
  local win, e, cur, prev, shift, held = view(key, now, window)
  local weight = prev * (window - e)
  -- te is e as a time offset from now: times below are window instants less te.
  local te = e - shift
  local used = ceil(weight / window)
  local reset = 0
  if cur > 0 then
    reset = 2 * window - te
  elseif weight > 0 then
    reset = window - te
  end
  if cost > limit then
    return 0, nonneg(limit - cur - used), -1, reset, limit
  end
  if weight + (cur + cost) * window <= limit * window then
    local peek = reset
    if cost > 0 then
      reset = 2 * window - te
    end
    -- Allowed: used <= limit - cur - cost, so the counts below are not negative.
    -- A key that holds this window keeps the TTL its first write gave it: one command fewer.
    return 1, limit - cur - cost - used, 0, reset, limit, {win, cur + cost, prev, 2 * window - te, held}, limit - cur - used, peek
  end
  -- Denied. First try later in this window: prev's weight must fall to (limit - cur - cost).
  local room = limit - cur - cost
  if room >= 0 then
    local e2 = window - floor(room * window / prev)
    if e2 < window then
      return 0, nonneg(limit - cur - used), e2 - te, reset, limit
    end
  end
  -- Next window: c becomes the previous count and decays; when even that is too much the
  -- request fits when the next window ends (e3 = window), where nothing weighs any more.
  local e3 = 0
  if cur > 0 then
    e3 = nonneg(window - floor((limit - cost) * window / cur))
  end
  return 0, nonneg(limit - cur - used), window - te + e3, reset, limit
end

function commit(key, w)
  call('HSET', key, 'w', w[1], 'c', w[2], 'p', w[3])
  if not w[5] then
    expire_us(key, w[4])
  end
end

function refund(key, now, cost, p)
  local window = p[2]
  local win = floor(now / window)
  local st = call('HMGET', key, 'w', 'c', 'p')
  local w = tonumber(st[1])
  if w == win then
    call('HSET', key, 'c', nonneg((tonumber(st[2]) or 0) - cost))
  elseif w == win + 1 then
    call('HSET', key, 'p', nonneg((tonumber(st[3]) or 0) - cost))
  end
end

-- retune (an override's change; see prelude.lua's OVR): what the key counted carries as it
-- is, against the new limit. The window is the key's clock and does not change.
function retune(key, at, p, q, now)
  if p[2] ~= q[2] then
    return 'an override of sliding_window keeps its window'
  end
end
