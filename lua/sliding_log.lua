-- sliding_log: at most `limit` cost in every window-long interval (exact).
--
-- KEYS:   the rule's key, a sorted set with one entry per instant charged, scored by the
--         instant in microseconds. An entry's member is "<before>+<cost>": cost is the units
--         charged at that instant, before the running total of the older entries' costs, so
--         the entry holds units before+1 .. before+cost, numbered oldest first. Entries are
--         contiguous (each one's before is the previous one's before + cost), so the cost of
--         a run of entries is the last's before + cost less the first's before: the log is a
--         prefix sum that the sorted set keeps in time order. The numbering starts at 0 when
--         the log is empty and is renumbered from 0 when it would pass 2^52, so every
--         number stays exact.
-- params: limit (count >= 1), window (microseconds >= 1).
-- check:  count = the cost of the entries inside (now - window, now], and of any later
--         instant a caller with a clock ahead charged: newest.before + newest.cost less
--         first.before, for the first entry in the window. Allowed iff count + cost <= limit.
--         remaining = limit - count (after the charge when allowed).
--         retry_after (denied) = the instant the oldest (count + cost - limit) units have
--         left the window, exact to the microsecond: the instant of the entry holding unit
--         first.before + count + cost - limit, plus window, less now; -1 when cost > limit.
--         reset_after = until the newest entry leaves the window, 0 when the log is empty.
--         Work: two O(log n) reads for n entries in the key; a denial that the first entry
--         does not answer finds the entry holding that unit by rank, O(log d) reads for the
--         d-th entry of the window.
-- writes: commit drops the entries that left the window, then adds the charge as a new
--         newest entry, or as more cost on the entry at its instant; it sets the TTL to
--         reset_after. refund takes up to its cost off the entry at its own instant and
--         removes the entry if nothing is left. Both are O(log n) at the newest instant; a
--         charge behind the newest (a client clock that runs behind another's) or a refund
--         of an older charge also renumbers the k entries after it, O(k log n), k at most
--         the entries charged since.
-- memory: O(entries) = O(instants charged in the window), whatever the cost; at most one
--         member per request.
-- older layout: a key written with one member "<time>:<k>" per unit of cost is read member
--         by member, O(members), while its first or newest member in the window is one of
--         those; the first charge rewrites the whole key as entries (O(members), once), and a
--         refund removes units of that layout as it always did. The two layouts do not share
--         keys safely while the earlier script still runs: it counts each entry as one unit.

params = {'pos', 'pos'}

-- RENUMBER bounds the running total: past it, commit numbers the log from 0 again.
local RENUMBER = 4503599627370496 -- 2^52

function validate(p)
  if p[1] > 1000000 then
    return 'sliding_log limit above 1000000'
  end
end

-- entry reads a member: its before and cost, or nil for a member of the older layout.
local function entry(m)
  local i = string.find(m, '+', 1, true)
  if i then
    return tonumber(string.sub(m, 1, i - 1)), tonumber(string.sub(m, i + 1))
  end
  return nil
end

local function member(before, cost)
  return string.format('%.0f+%.0f', before, cost)
end

-- units is a member's cost: an entry's, or 1 for a member of the older layout.
local function units(m)
  local _, c = entry(m)
  return c or 1
end

-- scan reads the window member by member, for a log holding members of the older layout:
-- it returns count and the members with their scores.
local function scan(key, lo)
  local log = call('ZRANGEBYSCORE', key, lo, '+inf', 'WITHSCORES')
  local count = 0
  for i = 1, #log, 2 do
    count = count + units(log[i])
  end
  return count, log
end

-- scanned returns the score of the member of a scanned log that holds its unit x.
local function scanned(log, x)
  local sum = 0
  for i = 1, #log, 2 do
    sum = sum + units(log[i])
    if sum >= x then
      return tonumber(log[i + 1])
    end
  end
end

-- holding returns the score of the entry that holds unit x, searching by rank from r0,
-- the rank of an entry that ends before x: galloping, then bisecting. A rank past the last
-- member reads as ending at or after x (the newest entry does). It returns nil if it meets
-- a member of the older layout.
local function holding(key, r0, x)
  local function probe(r)
    local e = call('ZRANGE', key, r, r, 'WITHSCORES')
    if not e[1] then
      return true, nil
    end
    local b, c = entry(e[1])
    if not b then
      return nil
    end
    return b + c >= x, e[2]
  end
  local lo, hi, score = r0, nil, nil
  local d = 1
  while not hi do
    local ok, s = probe(r0 + d)
    if ok == nil then
      return nil
    end
    if ok then
      hi, score = r0 + d, s
    else
      lo, d = r0 + d, d * 2
    end
  end
  while hi - lo > 1 do
    local mid = lo + floor((hi - lo) / 2)
    local ok, s = probe(mid)
    if ok == nil then
      return nil
    end
    if ok then
      hi, score = mid, s
    else
      lo = mid
    end
  end
  return tonumber(score)
end

function check(key, now, cost, p)
  local limit, window = p[1], p[2]
  local lo = now - window + 1
  local first = call('ZRANGEBYSCORE', key, lo, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local count, reset, last, log = 0, 0, nil, nil
  local fb, lb, lc, lt
  if first[1] then
    last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
    lt = tonumber(last[2])
    reset = lt + window - now
    lb, lc = entry(last[1])
    local i = string.find(first[1], '+', 1, true)
    fb = i and tonumber(string.sub(first[1], 1, i - 1))
    if fb and lb then
      count = lb + lc - fb
    else
      count, log = scan(key, lo)
    end
  end
  if cost > limit then
    return 0, nonneg(limit - count), -1, reset, limit
  end
  if count + cost <= limit then
    local peek = reset
    if cost > 0 and reset < window then
      reset = window
    end
    return 1, limit - count - cost, 0, reset, limit, {now, window, cost, reset, last, log ~= nil, lb, lc, lt}, limit - count, peek
  end
  local need = count + cost - limit
  local at
  if not log then
    local _, fc = entry(first[1])
    if need <= fc then
      at = tonumber(first[2])
    else
      at = holding(key, call('ZCOUNT', key, '-inf', lo - 1), fb + need)
    end
    if not at then
      -- Members of the older layout amid entries: the entries alone undercount, so the
      -- full count is larger still and the request stays denied.
      count, log = scan(key, lo)
      need = count + cost - limit
    end
  end
  if not at then
    at = scanned(log, need)
  end
  return 0, nonneg(limit - count), at + window - now, reset, limit
end

-- put writes entries given as flat {score, before, cost, ...}, in ZADD calls of at most
-- 500 members.
local function put(key, es)
  local args = {}
  for i = 1, #es, 3 do
    args[#args + 1] = es[i]
    args[#args + 1] = member(es[i + 1], es[i + 2])
    if #args >= 1000 or i + 2 == #es then
      call('ZADD', key, unpack(args))
      args = {}
    end
  end
end

-- drop removes the members of a flat {member, score, ...} reply from index i to j, in ZREM
-- calls of at most 1000 members.
local function drop(key, ms, i, j)
  local args = {}
  for k = i, j, 2 do
    args[#args + 1] = ms[k]
    if #args >= 1000 or k + 1 >= j then
      call('ZREM', key, unpack(args))
      args = {}
    end
  end
end

-- renumber rewrites the whole log as entries numbered from 0, one per instant, members of
-- the older layout counting one unit each, and returns the newest member and its score as
-- a ZRANGE reply (empty when the log is). The key is recreated without a TTL: commit sets
-- it after.
local function renumber(key)
  local es = {}
  local before, from = 0, 0
  -- Read in pages of 10000 members: a key of the older layout may hold a million.
  repeat
    local page = call('ZRANGE', key, from, from + 9999, 'WITHSCORES')
    for i = 1, #page, 2 do
      local s, c = tonumber(page[i + 1]), units(page[i])
      if es[#es - 2] == s then
        es[#es] = es[#es] + c
      else
        es[#es + 1], es[#es + 2], es[#es + 3] = s, before, c
      end
      before = before + c
    end
    from = from + 10000
  until #page < 20000
  if #es > 0 then
    call('ZREMRANGEBYSCORE', key, '-inf', '+inf')
    put(key, es)
  end
  return call('ZRANGE', key, -1, -1, 'WITHSCORES')
end

-- insert adds cost at now, behind the newest entry: onto the entry at now, or as a new
-- entry in the place of the first entry after now; every later entry moves up by cost.
-- It returns false, writing nothing, if a member there is of the older layout. The key
-- may be recreated without a TTL: commit sets it after.
local function insert(key, now, cost)
  local after = call('ZRANGEBYSCORE', key, now, '+inf', 'WITHSCORES')
  local es = {}
  local b1, c1 = entry(after[1])
  if not b1 then
    return false
  end
  if tonumber(after[2]) == now then
    es[1], es[2], es[3] = now, b1, c1 + cost
  else
    es[1], es[2], es[3] = now, b1, cost
    es[4], es[5], es[6] = tonumber(after[2]), b1 + cost, c1
  end
  for i = 3, #after, 2 do
    local b, c = entry(after[i])
    if not b then
      return false
    end
    es[#es + 1], es[#es + 2], es[#es + 3] = tonumber(after[i + 1]), b + cost, c
  end
  drop(key, after, 1, #after)
  put(key, es)
  return true
end

-- commit's w, from check: now, window, cost, reset_after, the newest member as a ZRANGE
-- reply (nil when the window is empty), whether the window holds members of the older
-- layout, and the newest entry's before, cost and instant.
function commit(key, w)
  local now, window, cost, last = w[1], w[2], w[3], w[5]
  call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local b, c, t = w[7], w[8], w[9]
  if w[6] or (b and b + c + cost > RENUMBER) then
    last = renumber(key)
    b, c, t = nil, nil, nil
    if last[1] then
      b, c = entry(last[1])
      t = tonumber(last[2])
    end
  end
  if not t then
    call('ZADD', key, now, member(0, cost))
  elseif t < now then
    call('ZADD', key, now, member(b + c, cost))
  elseif t == now then
    call('ZADD', key, now, member(b, c + cost))
    call('ZREM', key, last[1])
  elseif not insert(key, now, cost) then
    renumber(key)
    insert(key, now, cost)
  end
  expire_us(key, w[4])
end

-- refund takes up to `cost` units off the entry charged at `now`; the entries after it
-- move down by what it took. A log of the older layout loses the newest `cost` members
-- charged at `now`, as that layout's refund did.
function refund(key, now, cost, p)
  local after = call('ZRANGEBYSCORE', key, now, '+inf', 'WITHSCORES')
  if not after[1] or tonumber(after[2]) ~= now then
    return
  end
  local b, c = entry(after[1])
  if not b then
    local k = call('ZCOUNT', key, now, now)
    for i = k, math.max(k - cost + 1, 1), -1 do
      call('ZREM', key, string.format('%.0f:%.0f', now, i))
    end
    return
  end
  local took = math.min(cost, c)
  local es = {}
  if took < c then
    es[1], es[2], es[3] = now, b, c - took
  end
  local moved = {after[1], after[2]}
  for i = 3, #after, 2 do
    local eb, ec = entry(after[i])
    if eb then
      es[#es + 1], es[#es + 2], es[#es + 3] = tonumber(after[i + 1]), eb - took, ec
      moved[#moved + 1], moved[#moved + 2] = after[i], after[i + 1]
    end
  end
  -- A refund sets no TTL, so the key must not be emptied on the way: the newest moved
  -- member goes last. No new member equals it (each has a lower before, or is the entry
  -- at now with less cost), and a new member can equal only an older moved member, which
  -- is gone by then.
  drop(key, moved, 1, #moved - 2)
  put(key, es)
  drop(key, moved, #moved - 1, #moved)
end

-- retune (an override's change; see prelude.lua's OVR): what the key counted carries as it
-- is, against the new limit. The window is the key's clock and does not change.
function retune(key, at, p, q, now)
  if p[2] ~= q[2] then
    return 'an override of sliding_log keeps its window'
  end
end
