-- fixed_window: at most `limit` cost per aligned window [k*window, (k+1)*window).
--
-- KEYS:   the rule's key, a hash in one of two forms (see Forms): compact, one field named
--         by the window w whose value is the cost n charged in it; or full, {w = window w,
--         n = cost charged in window w; and o, d, l for a debt (see Debts)}.
-- params: limit (count >= 0), window (microseconds >= 1). With a calendar (window =
--         "calendar_month" and the like; see prelude.lua's window_at) the window is the
--         calendar period that holds now, and w its first instant. A limit of 0 admits nothing:
--         every cost above 0 is over it (retry_after -1, nothing written) and a peek
--         (cost 0) of a key nothing was charged to is allowed, with remaining 0.
-- check:  allowed iff n + cost <= limit, where n counts only the current window (and what
--         is left of a debt, see owe).
--         remaining = limit - n (after the charge when allowed), never below 0.
--         retry_after = the end of the current window (the next window is empty), or in
--         debt the end of the window that earns enough of it back; -1 when cost > limit.
--         reset_after = when n weighs nothing (the end of the current window, or of the
--         window that earns a debt back) when n > 0, else 0.
-- Clocks: with client clocks, a request whose clock is in an earlier window than the key's
--         (a caller whose clock runs behind) counts in the key's window: a key's window
--         never moves back, so callers whose clocks disagree cannot reopen a window.
-- TTL:    until the end of the window (of a debt's last window), rounded up to a
--         millisecond, set by the write that opens a window (or owes); the later writes of
--         that window keep it (and add to n: HINCRBY). An expired key and a key whose
--         count weighs nothing mean the same thing, so expiry never changes a decision.
-- Known:  a client can spend `limit` at the end of one window and `limit` again at the start
--         of the next: up to 2*limit in any window-long interval. verify reports this.

params = {'nat', 'pos'}

-- Forms: a key is written compact, its one field named by its window (the number w as
-- redis.call writes it) and holding its count, when the count is at least 1 and no debt
-- weighs on it; else full, fields w and n (and o, d, l; see Debts). Both hold the same
-- state, read alike. The compact form lets a usual charge be one command: HINCRBY of the
-- field named by the caller's window, which finds the count of a key that holds that
-- window and nothing else (fast.go's try; a count of at least 1 is what tells it from a
-- field it has just made). A key that goes from one form to the other is rewritten whole.

-- read returns what key holds: its window w (nil for none), its count n, the field n is
-- kept in (the compact form's own name; 'n' in the full form; nil for no key), and in the
-- full form the window owe wrote o, the debt d and the limit l.
local function read(key)
  local st = call('HGETALL', key)
  if #st == 0 then
    return nil, 0
  end
  if #st == 2 then
    return tonumber(st[1]), tonumber(st[2]) or 0, st[1]
  end
  local w, n, o, d, l
  for i = 1, #st - 1, 2 do
    local f, v = st[i], st[i + 1]
    if f == 'w' then
      w = tonumber(v)
    elseif f == 'n' then
      n = tonumber(v)
    elseif f == 'o' then
      o = tonumber(v)
    elseif f == 'd' then
      d = tonumber(v)
    elseif f == 'l' then
      l = tonumber(v)
    end
  end
  return w, n or 0, 'n', o, d, l
end


-- Debts: owe (a settled reservation's overdraft) may take a window's count past the limit.
-- What it passes the limit by then is a debt d, which each later window earns back `limit`
-- (as it was then, l) of: the next window starts with d, the one after with d - l, and so
-- on, so a key in debt is denied, whole windows, until the debt is earned back. The key
-- holds o = the window owe wrote, d and l; a charge in a later window leaves o behind, and
-- with it the debt (what was left of it is in that charge's count). A count past a limit an
-- override lowered, in a window owe did not write, is no debt: it ends with its window.

-- index returns window w's position: an aligned window's is its own index; a calendar
-- period's is its bound's among p.cal (1 to CAL_BOUNDS), or -CAL_BOUNDS for one before
-- them all (more periods ago than any debt lasts: see owe).
local function index(w, p)
  local cal = p.cal
  if not cal then
    return w
  end
  for i = CAL_BOUNDS, 1, -1 do
    if w >= cal[i] then
      return i
    end
  end
  return -CAL_BOUNDS
end

-- start_at returns the first instant of the window at position i (see index), a later
-- window than the call's; a calendar's last bound when the call carries none further.
local function start_at(i, p)
  local cal = p.cal
  if not cal then
    return i * p[2]
  end
  if i > CAL_BOUNDS then
    i = CAL_BOUNDS
  end
  return cal[i]
end

-- used returns the window a request at now counts in (the key's, when that is later), its
-- end, and the cost it holds (see window_at: an aligned window, or a calendar period): the
-- key's count in its own window, or what is left of a debt in a later one; for a key
-- whose debt weighs on later windows, the position of the window owe wrote, the debt and
-- the limit that earns it back (nil when there is none); whether the key holds the
-- window returned (its TTL then set by the write that opened it); and the field its count
-- is kept in (see read; nil for no key).
local function used(key, now, p)
  local win, ends = window_at(now, p)
  local w, n, f, o, d, l = read(key)
  if w == nil then
    return win, ends, 0, nil, nil, nil, false, f
  end
  local io
  if o == w then
    -- A key owe wrote in its window: its debt weighs on later windows.
    d, l = d or 0, l or 0
    if d > 0 and l > 0 then
      io = index(w, p)
    end
  end
  if w >= win then
    if w > win then
      ends = window_end(w, p)
    end
    return w, ends, n, io, d, l, true, f
  end
  if io == nil then
    return win, ends, 0, nil, nil, nil, false, f
  end
  local left = d - (index(win, p) - io - 1) * l
  if left <= 0 or (p.cal and win >= p.cal[CAL_BOUNDS]) then
    return win, ends, 0, nil, nil, nil, false, f
  end
  return win, ends, left, io, d, l, false, f
end

-- clears returns the position of the first window after the one at position iw in which
-- a key with a debt d, earned back l a window from the window after position io (nil:
-- none), has room for cost more, up to limit: the next window, or the one that has earned
-- enough of the debt back (with cost and limit 0, the one from which it weighs nothing).
local function clears(iw, io, d, l, cost, limit)
  local i = iw + 1
  if io ~= nil then
    local after = io + 1 + ceil(nonneg(d + cost - limit) / l)
    if after > i then
      i = after
    end
  end
  return i
end

function check(key, now, cost, p)
  local limit = p[1]
  local win, ends, n, io, d, l, held, f = used(key, now, p)
  local to_end = ends - now
  local reset = 0
  if n > 0 then
    reset = to_end
    if io ~= nil then
      reset = start_at(clears(index(win, p), io, d, l, 0, 0), p) - now
    end
  end
  if cost > limit then
    return 0, nonneg(limit - n), -1, reset, limit
  end
  if n + cost <= limit then
    local peek, ttl = reset, to_end
    if io ~= nil and io == index(win, p) then
      ttl = reset -- the debt of owe's window still weighs on later ones
    end
    if cost > 0 then
      reset = ttl
    end
    -- A key that holds this window, without a debt, keeps the TTL the window's first
    -- write gave it (its end): one command fewer; and only its count changes (commit).
    return 1, limit - n - cost, 0, reset, limit, {win, n + cost, ttl, held and io == nil, cost, f, held}, limit - n, peek
  end
  local retry = to_end
  if io ~= nil then
    -- In debt: the windows until what is left of it leaves room for cost.
    retry = start_at(clears(index(win, p), io, d, l, cost, limit), p) - now
  end
  return 0, nonneg(limit - n), retry, reset, limit
end

-- commit, in a key that holds the window and no debt, adds the cost to its count
-- (HINCRBY of the count's field: the same state, without a number for the server to
-- format, the usual cost of 1 sent as the string "1"). A key that holds the window with a
-- debt (the full form) gets its count; any other is rewritten compact for the new window,
-- what it held before deleted. The dispatcher commits only a cost above 0, so the count
-- written is at least 1 (see Forms).
function commit(key, w)
  if w[4] then
    if w[5] == 1 then
      call('HINCRBY', key, w[6], '1')
    else
      call('HINCRBY', key, w[6], w[5])
    end
    return
  end
  if w[7] then
    call('HSET', key, 'w', w[1], 'n', w[2])
  else
    if w[6] then
      call('DEL', key)
    end
    call('HSET', key, w[1], w[2])
  end
  expire_us(key, w[3])
end

-- refund takes cost off what the key counts in the window of now (never below 0), and
-- off a debt it carries. A compact key whose count goes to 0 is written full (see Forms),
-- its TTL kept.
function refund(key, now, cost, p)
  local win, _, n, io, d, l, _, f = used(key, now, p)
  if n <= 0 then
    return
  end
  if io == nil then
    if f == 'n' then
      call('HSET', key, 'w', win, 'n', nonneg(n - cost))
    elseif n > cost then
      call('HINCRBY', key, f, -cost)
    else
      call('HSET', key, 'w', win, 'n', 0)
      call('HDEL', key, f)
    end
  elseif io == index(win, p) then
    call('HSET', key, 'n', nonneg(n - cost), 'd', nonneg(d - cost))
  else
    -- What is left of a debt, refunded in a later window: the rest weighs on the windows
    -- after this one as a debt from it.
    call('HSET', key, 'w', win, 'n', nonneg(n - cost), 'o', win, 'd', nonneg(n - cost - l))
  end
end

-- owe counts cost in the window without a check (the overdraft of a settled reservation):
-- the count goes past the limit into a debt that later windows earn back (see Debts), and
-- the key lives until they have. The count is held at most 2^52; a calendar rule's at what
-- the periods its call carries earn back (up to three limits: the current period's and the
-- next two's), so that its debt ends within periods it knows the bounds of.
function owe(key, now, cost, p)
  local limit = p[1]
  local win, _, n, _, _, _, _, f = used(key, now, p)
  local n2 = n + cost
  if n2 > MAX_INT / 2 then
    n2 = MAX_INT / 2
  end
  local iw = index(win, p)
  if p.cal and n2 > (CAL_BOUNDS - iw) * limit then
    n2 = nonneg((CAL_BOUNDS - iw) * limit)
  end
  if n2 <= 0 then
    return
  end
  local d = 0
  if limit > 0 then
    d = nonneg(n2 - limit) -- a limit of 0 earns nothing back: its count ends with its window
  end
  if f and f ~= 'n' then
    call('DEL', key) -- the compact form: the key is written full
  end
  call('HSET', key, 'w', win, 'n', n2, 'o', win, 'd', d, 'l', limit)
  local ends = start_at(iw + 1, p)
  if d > 0 then
    ends = start_at(clears(iw, iw, d, limit, 0, 0), p)
  end
  expire_us(key, ends - now)
end

-- retune (an override's change; see prelude.lua's OVR): what the key counted carries as it
-- is, against the new limit. The window is the key's clock and does not change.
function retune(key, at, p, q, now)
  if p[2] ~= q[2] then
    return 'an override of fixed_window keeps its window'
  end
end
