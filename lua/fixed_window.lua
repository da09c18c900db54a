-- fixed_window: at most `limit` cost per aligned window [k*window, (k+1)*window).
--
-- KEYS:   the rule's key, a hash {w = window index k, n = cost charged in window k}.
-- params: limit (count >= 0), window (microseconds >= 1). With a calendar (window =
--         "calendar_month" and the like; see prelude.lua's window_at) the window is the
--         calendar period that holds now, and w its first instant. A limit of 0 admits nothing:
--         every cost above 0 is over it (retry_after -1, nothing written) and a peek
--         (cost 0) of a key nothing was charged to is allowed, with remaining 0.
-- check:  allowed iff n + cost <= limit, where n counts only the current window.
--         remaining = limit - n (after the charge when allowed), never below 0.
--         retry_after = the end of the current window (the next window is empty), -1 when
--         cost > limit. reset_after = the end of the current window when n > 0, else 0.
-- Clocks: with client clocks, a request whose clock is in an earlier window than the key's
--         (a caller whose clock runs behind) counts in the key's window: a key's window
--         never moves back, so callers whose clocks disagree cannot reopen a window.
-- TTL:    until the end of the window, rounded up to a millisecond; an expired key and a
--         key from an older window mean the same thing, so expiry never changes a decision.
-- Known:  a client can spend `limit` at the end of one window and `limit` again at the start
--         of the next: up to 2*limit in any window-long interval. verify reports this.

params = {'nat', 'pos'}


-- used returns the window a request at now counts in (the key's, when that is later), its
-- end, and the cost charged in it (see window_at: an aligned window, or a calendar period).
local function used(key, now, p)
  local win, ends = window_at(now, p)
  local st = call('HMGET', key, 'w', 'n')
  local w = tonumber(st[1])
  if w ~= nil and w >= win then
    if w > win then
      ends = window_end(w, p)
    end
    return w, ends, tonumber(st[2]) or 0
  end
  return win, ends, 0
end

function check(key, now, cost, p)
  local limit = p[1]
  local win, ends, n = used(key, now, p)
  local to_end = ends - now
  local reset = 0
  if n > 0 then
    reset = to_end
  end
  if cost > limit then
    return 0, nonneg(limit - n), -1, reset, limit
  end
  if n + cost <= limit then
    local peek = reset
    if cost > 0 then
      reset = to_end
    end
    return 1, limit - n - cost, 0, reset, limit, {win, n + cost, to_end}, limit - n, peek
  end
  return 0, nonneg(limit - n), to_end, reset, limit
end

function commit(key, w)
  call('HSET', key, 'w', w[1], 'n', w[2])
  expire_us(key, w[3])
end

function refund(key, now, cost, p)
  local _, _, n = used(key, now, p)
  if n > 0 then
    call('HSET', key, 'n', nonneg(n - cost))
  end
end

-- owe counts cost in the window without a check (the overdraft of a settled reservation):
-- the count goes past the limit and the window denies until it ends. The count is held
-- at most 2^52.
function owe(key, now, cost, p)
  local win, ends, n = used(key, now, p)
  local n2 = n + cost
  if n2 > MAX_INT / 2 then
    n2 = MAX_INT / 2
  end
  call('HSET', key, 'w', win, 'n', n2)
  expire_us(key, ends - now)
end

-- retune (an override's change; see prelude.lua's OVR): what the key counted carries as it
-- is, against the new limit. The window is the key's clock and does not change.
function retune(key, at, p, q, now)
  if p[2] ~= q[2] then
    return 'an override of fixed_window keeps its window'
  end
end
