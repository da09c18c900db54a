-- rlctl engine script: dispatcher (the script's main body).
--
-- main(KEYS, ARGV) runs one call, or a batch of calls (below). The script calls it with its KEYS and ARGV (EVAL); the
-- library form of the same text registers it as a function (FUNCTION LOAD, then FCALL).
--
-- KEYS: one key per rule, in rule order. Keys must be distinct.
-- ARGV: [1] protocol version (prelude.lua's PROTOCOL)
--       [2] op: "check" (decide and charge, all or nothing), "refund" (undo a charge),
--           "owe" (charge every rule's cost without a check, the overdraft of a settled
--           reservation: a key may go past its limit, into a debt it earns back before it
--           admits again; every rule charged must be of a built-in that carries a debt,
--           else the call is an error and writes nothing; an exempt key is charged nothing),
--           "most:N" (partial admission: decide and charge, all or nothing, the largest
--           number of units g <= N that every enforcing rule allows, each rule's cost being
--           then its cost per unit; see most below), "delay:M" (decide and charge, all or
--           nothing, at the earliest instant within M microseconds at which every
--           enforcing rule allows the call, a reservation of that slot; see delay below),
--           or "override" (set or clear the
--           override of the call's one rule, an overridable one, for its key: the rule's
--           values are followed by one more, the override (prelude.lua's OVR), "" to
--           clear it or "?" to read it; see set_override), "list" (change or read the
--           membership of the call's one rule's key in one of its lists: the rule's values
--           are followed by the list's name and "+", "-" or "?"; see list_member), or
--           "inspect" (read what the call's one rule keeps beside its key; see inspect)
--       [3] now in microseconds, or "" to read the server clock (TIME)
--       [4] deadline: the server-clock instant in microseconds after which the caller no
--           longer waits for this call, or "" for none
--       [5] clock skew: with client clocks, how far apart callers' clocks may be, in
--           microseconds, added to every TTL set through expire_us; "" for none
--       [6] number of rules n (= #KEYS)
--       then per rule, either
--         a rule written out: algorithm name, cost (integer >= 0), flags (bit 1: shadow,
--         bit 2: a penalty box, whose block length in microseconds (>= 1) and ceiling
--         (>= 0; 0 or <= the length: no escalation) follow the flags; see boxed below;
--         bit 3: overridable, see overridden below; bit 4: lists, whose exempt list name,
--         deny list name ("" for none) and deny retry in microseconds (>= 1 with a deny
--         list) follow the box's values; see listed below),
--         and the algorithm's parameters (a fixed count per algorithm, each of the kind
--         its params table declares: 'pos' an integer >= 1, 'nat' an integer >= 0, such
--         as a limit of 0 that admits nothing, 'str' a non-empty string); or
--         a compiled rule: "@k" (the script's k-th compiled rule, whose algorithm, shadow
--         flag and constant parameters the script holds), cost, then only the values of
--         the parameters the rule leaves to each request, in wire order.
-- A batch: ARGV [1] protocol, [2] "batch", [3] the number of calls m (>= 1), then per
--   call its key count, its ARGV count and that many values, its own ARGV as above; KEYS
--   holds the calls' keys one call after another. Each call runs as it would alone, in
--   order, and is charged all or nothing on its own; the reply is an array of the m calls'
--   replies, an error reply among them for a call that failed (see batch below). The
--   server clock is read once, when the batch starts: a call on it is decided at that
--   instant, and its deadline checked against it.
-- Reply (check): {allowed, deciding rule (1-based, 0 when allowed), now_us, server_us,
--                 then per rule: allowed, remaining, retry_after_us, reset_after_us, limit}
--   now_us is the instant the rules were decided at (ARGV[3], or the server clock);
--   server_us is the server clock (TIME), which callers use to place their deadlines.
--   retry_after_us is 0 for a rule that allows and -1 when the cost can never fit.
--   Per-rule values describe the key after this call: charged when the call is allowed,
--   untouched (as if peeked) when it is denied; a boxed rule's values describe its block too.
-- Reply (most): the reply of a check of g units (when g is 0, of one unit), then g.
-- Reply (delay): the reply of the check that decided (per-rule values as seen at now +
--   wait when the call waits, reset-after counted from now), then the wait in
--   microseconds: 0 when allowed at once, -1 when denied.
-- Reply (owe): a check's, allowed, each rule's values those of a peek (cost 0) at its key
--   after the charge, as its algorithm sees it (without lists or box): a key in debt is
--   denied, retry_after_us until the debt is earned back.
-- Reply (refund, override): {1, 0, now_us, server_us}; reading an override, then the
--   override in force or "".
-- Reply (list): {1, 0, now_us, server_us, member (1 or 0)}.
-- Reply (inspect): {1, 0, now_us, server_us, block end (µs, 0: no block running),
--   override in force or "", on the exempt list (1 or 0), on the deny list (1 or 0)}.
-- Errors: an error reply starting with "RLCTL" for any malformed ARGV, and
--   "RLCTL deadline passed at <seconds> <microseconds>" (the server's TIME) when the server
--   runs the call after its deadline (a call that waited in a stalled server's queue while
--   its caller gave up): nothing is written, so a call nobody waits for any more charges
--   nothing. The deadline is checked when the call starts and, on the general path (below),
--   once more between checking its rules and charging them, since TIME advances while a
--   script runs (Redis 7 freezes only the clock that expires keys): a call whose checks
--   ran past its deadline charges nothing either. A call of one rule or an unrolled stack
--   (at most four built-in rules, microseconds of work) is checked when it starts only.
--
-- Cost: linear in the rules. A call of n rules parses, checks and charges each once; the
-- check that no key repeats compares each key with the earlier ones while n is small
-- (DISTINCT_SCAN) and looks it up in a set beyond.
--
-- State between calls: none. Under FUNCTION LOAD the library's locals live as long as the
-- library, so main resets what a call sets (TTL_SLACK), caches only what never changes
-- (built-in algorithms, compiled rules), and a plugin's file runs afresh on every call as
-- under EVAL, so nothing a plugin keeps outlives its call.

-- further_ready holds the complete records (see ready) of compiled rules with further
-- keys of the dispatcher's (a penalty box, an override), which the unrolled stacks (which
-- find their rules in ready) leave to the general path.
local further_ready = {}

-- rule_at parses the rule whose values start at ARGV[a], rule r of the call, using
-- `loaded` for the algorithms the call instantiates (eight values each at i .. i+7: name,
-- params, validate, check, commit, refund, retune, owe). It returns the rule's check, commit
-- and refund functions (refund false when the algorithm has none), cost, shadow flag,
-- parameters, the position of the next rule's values, its penalty box ({length, ceiling},
-- or nil), for an overridable rule, what reading its override takes ({parameter
-- kinds, validate, retune}, or nil) and its lists ({exempt name or false, deny name or
-- false, deny retry}, or nil) and its owe function (false when the algorithm has none);
-- or nil and an error message. A compiled rule of a
-- built-in keeps its algorithm's functions in its record (c[7] .. c[11]), so under FCALL a
-- call finds everything in one table lookup; a rule with a check and commit of its own
-- (c[12], c[13], algorithms/fast.go) keeps those instead of its algorithm's.
--
-- commit is always called as commit(key, pending, w2, w3, w4): pending is check's sixth
-- value and w2 .. w4 its ninth to eleventh. An algorithm's check returns its pending write
-- as one value (a table) and its commit takes that; a fast rule's check returns the write's
-- values and its commit takes them, with no table between.
local function rule_at(ARGV, r, a, loaded, now)
  local name = ARGV[a]
  local c, kinds, validate, check, commit, refund, retune, owe
  if type(name) == 'string' and string.byte(name) == 64 then
    c = compiled_rule(name)
    if c == nil then
      return nil, 'rule ' .. r .. ': unknown compiled rule ' .. name
    end
    kinds, validate, check, commit, refund, owe = c[7], c[8], c[9], c[10], c[11], c.owe
    name = c[1]
  end
  if check == nil then
    local base = 0
    for i = 1, #loaded, 8 do
      if loaded[i] == name then
        base = i
      end
    end
    if base == 0 then
      local params, v, ch, co, re, rt, ow = load_algorithm(name)
      if params == nil then
        return nil, 'rule ' .. r .. ': unknown algorithm ' .. tostring(name)
      end
      base = #loaded + 1
      loaded[base], loaded[base + 1], loaded[base + 2] = name, params, v
      loaded[base + 3], loaded[base + 4], loaded[base + 5], loaded[base + 6] = ch, co, re, rt
      loaded[base + 7] = ow
    end
    kinds, validate, check, commit, refund = loaded[base + 1], loaded[base + 2], loaded[base + 3], loaded[base + 4], loaded[base + 5]
    retune, owe = loaded[base + 6], loaded[base + 7]
    if c and c[6] then
      -- A rule with a check and commit of its own (c[12], c[13]: see algorithms/fast.go)
      -- decides with those.
      check, commit = c[12] or check, c[13] or commit
      c[7], c[8], c[9], c[10], c[11], c.owe = kinds, validate, check, commit, refund, owe
      if c.ovr == true then
        c.ovr = {kinds, validate, retune}
      end
    end
  end
  local cost = cost_arg(ARGV[a + 1])
  local shadow, p, width, sent, box, ovr, lists, cal, err
  if c then
    shadow, width, box, ovr, lists = c[2], 2, c.box, c.ovr, c.lists
    if c.cal then
      cal, err = cal_span(ARGV, a + 2, now)
      if cal == nil then
        return nil, 'rule ' .. r .. ': ' .. err
      end
      width = 2 + CAL_BOUNDS
    end
    if c[5] then
      p, sent = c[3], c[4]
    else
      p, sent = {}, c[4]
      for j = 1, #kinds do
        p[j] = c[3][j]
      end
    end
  else
    local flags = int_arg(ARGV[a + 2], 0)
    if flags == nil or flags > 31 then
      return nil, 'rule ' .. r .. ': bad cost or flags'
    end
    shadow, p, width, sent = flags % 2 == 1, {}, 3, nil
    local has_cal = flags >= 16
    if has_cal then
      if not CALENDARED[name] then
        return nil, 'rule ' .. r .. ': ' .. name .. ' takes no calendar'
      end
      flags = flags - 16
    end
    local has_lists = flags >= 8
    if has_lists then
      flags = flags - 8
    end
    if flags >= 4 then
      if not retune then
        return nil, 'rule ' .. r .. ': ' .. name .. ' takes no override'
      end
      flags = flags - 4
      ovr = {kinds, validate, retune}
    end
    if flags >= 2 then
      box = {int_arg(ARGV[a + 3], 1), int_arg(ARGV[a + 4], 0)}
      if box[1] == nil or box[2] == nil then
        return nil, 'rule ' .. r .. ': bad penalty box'
      end
      width = 5
    end
    if has_lists then
      lists = {list_name(ARGV[a + width]), list_name(ARGV[a + width + 1]), int_arg(ARGV[a + width + 2], 0)}
      if lists[1] == nil or lists[2] == nil or lists[3] == nil or not (lists[1] or lists[2]) or (lists[2] and lists[3] < 1) then
        return nil, 'rule ' .. r .. ': bad lists'
      end
      width = width + 3
    end
    if has_cal then
      cal, err = cal_span(ARGV, a + width, now)
      if cal == nil then
        return nil, 'rule ' .. r .. ': ' .. err
      end
      width = width + CAL_BOUNDS
    end
  end
  if cost == nil then
    return nil, 'rule ' .. r .. ': bad cost or flags'
  end
  -- The values this call carries: every parameter of a rule written out, the varying
  -- ones of a compiled rule.
  local m = sent and #sent or #kinds
  for i = 1, m do
    local j = sent and sent[i] or i
    local s = ARGV[a + width - 1 + i]
    local v, kind = nil, kinds[j]
    if kind == 'str' then
      if s ~= nil and s ~= '' then
        v = s
      end
    elseif kind == 'nat' then
      v = int_arg(s, 0)
    else
      v = int_arg(s, 1)
    end
    if v == nil then
      return nil, 'rule ' .. r .. ': parameter ' .. j .. ' of ' .. name .. ' is not valid'
    end
    p[j] = v
  end
  -- A shared record's constants are validated once, the first time it is used; it is then
  -- complete, and kept in ready under its name.
  if validate and not (ready[ARGV[a]] or further_ready[ARGV[a]]) then
    local err = validate(p)
    if err then
      return nil, 'rule ' .. r .. ': ' .. err
    end
  end
  if cal then
    -- The parameters this call decides with: the rule's and the calendar's bounds (a
    -- table of its own, as a shared record's parameters are every call's).
    if c then
      local q = {}
      for j = 1, #kinds do
        q[j] = p[j]
      end
      p = q
    end
    p.cal = cal
  elseif c and c[5] then
    if box or ovr or lists then
      further_ready[ARGV[a]] = c
    else
      ready[ARGV[a]] = c
    end
  end
  if ovr == true then
    return nil, 'rule ' .. r .. ': ' .. name .. ' takes no override'
  end
  return check, commit, refund, cost, shadow, p, a + width + m, box, ovr, lists, owe
end

-- overridden returns the parameters an overridable rule (ovr: {parameter kinds, validate,
-- retune}) whose own are p decides with at now for the key key, its override's figures
-- while one is in force, else p, and, while one that ends is in force, the instant until
-- which a write must keep the key (its end plus its keep; see OVR); or nil and an error
-- message when the override is malformed. An override whose end has come is ended here:
-- the key's state is converted at its end from the override's figures to p (retune; the
-- state means what it meant, so no decision changes) and the override deleted, so the
-- state is in p's figures again.
local function overridden(key, now, p, ovr, r)
  local v = redis_pcall('GET', key .. OVR)
  if type(v) ~= 'string' then
    return p
  end
  local ends, keep, q = override_parse(v, ovr[1], ovr[2], p)
  if ends == nil then
    return nil, 'rule ' .. r .. ': malformed override at ' .. key .. OVR
  end
  if ends == 0 then
    return q
  elseif now < ends then
    if keep > 0 then
      return q, ends + keep
    end
    return q
  end
  ovr[3](key, ends, q, p, now)
  call('DEL', key .. OVR)
  return p
end

-- set_override runs op "override" for the overridable rule whose key is key and whose own
-- parameters are p: s is the override (see OVR), "" to clear it, or "?" to read it. The
-- key's state is converted at now from the figures in force to the new ones (retune),
-- then the override is written (with no expiry: its end is read by overridden) or deleted.
-- A read ends an override whose end has come, as a decision would, and replies with the
-- one in force ("" for none) after the usual four values.
local function set_override(key, s, now, server_now, p, ovr)
  local cur, err = overridden(key, now, p, ovr, 1)
  if cur == nil then
    return redis.error_reply('RLCTL ' .. err)
  end
  if s == '?' then
    local v = ''
    if cur ~= p then
      v = call('GET', key .. OVR)
    end
    return {1, 0, now, server_now, v}
  end
  local q, ends, keep = p, 0, 0
  if s ~= '' then
    ends, keep, q = override_parse(s, ovr[1], ovr[2], p)
    if ends == nil then
      return redis.error_reply('RLCTL rule 1: override "' .. s .. '" is not valid for its algorithm')
    end
  end
  err = ovr[3](key, now, cur, q, now)
  if err then
    return redis.error_reply('RLCTL rule 1: ' .. err)
  end
  if s == '' then
    call('DEL', key .. OVR)
  else
    call('SET', key .. OVR, s)
    if ends > now and keep > 0 then
      expire_us(key, ends + keep - now)
    end
  end
  return {1, 0, now, server_now}
end

-- listed returns which of a rule's lists (lists: {exempt list or false, deny list or
-- false, deny retry}) its key key is on: 'deny', else 'exempt', else false. A key K is on
-- list L while the key K .. LIST .. L exists. It reads one key per list (EXISTS).
local function listed(key, lists)
  if lists[2] and call('EXISTS', key .. LIST .. lists[2]) == 1 then
    return 'deny'
  end
  if lists[1] and call('EXISTS', key .. LIST .. lists[1]) == 1 then
    return 'exempt'
  end
  return false
end

-- list_verdict is the verdict of a rule whose key is on list on ('deny' or 'exempt', see
-- listed), from its check (ok, remaining, retry, as check returned them; an exempt key's
-- check is a peek, of cost 0). On the deny list: denied, remaining 0, retry-after at least
-- the deny retry (-1, a cost that can never fit, stays -1). On the exempt list: allowed,
-- retry-after 0, remaining as the peek saw it. Either way the rule charges nothing and its
-- box does not apply: a denial by the list is no offence.
local function list_verdict(on, lists, ok, remaining, retry)
  if on == 'exempt' then
    return 1, remaining, 0
  end
  if retry ~= -1 and retry < lists[3] then
    retry = lists[3]
  end
  return 0, 0, retry
end

-- list_member runs op "list" for the rule whose key is key and whose lists are lists:
-- action "+" puts the key on list name, "-" takes it off, "?" reads; the reply is the
-- usual four values, then 1 when the key is on the list after the call, else 0. A member
-- is a key with no expiry (LIST), so a list lives until changed.
local function list_member(key, name, action, now, server_now, lists)
  if name ~= lists[1] and name ~= lists[2] then
    return redis.error_reply('RLCTL rule 1: list ' .. tostring(name) .. ' is not one of the rule\'s')
  end
  local k = key .. LIST .. name
  if action == '+' then
    call('SET', k, '1')
    return {1, 0, now, server_now, 1}
  elseif action == '-' then
    call('DEL', k)
    return {1, 0, now, server_now, 0}
  elseif action == '?' then
    return {1, 0, now, server_now, call('EXISTS', k)}
  end
  return redis.error_reply('RLCTL bad list action ' .. tostring(action))
end

-- inspect runs op "inspect" for the rule whose key is key, own parameters p, penalty box,
-- override reading and lists box, ovr and lists (each nil when the rule has none): the end
-- of the block running at now (0: none), the override in force ("": none; one whose end
-- has come is ended first, as a decision would), and whether the key is on each list.
local function inspect(key, now, server_now, p, box, ovr, lists)
  local ends, o, ex, dn = 0, '', 0, 0
  if box then
    local u = box_read(key)
    if now < u then
      ends = u
    end
  end
  if ovr then
    local cur, err = overridden(key, now, p, ovr, 1)
    if cur == nil then
      return redis.error_reply('RLCTL ' .. err)
    end
    if cur ~= p then
      o = call('GET', key .. OVR)
    end
  end
  if lists then
    if lists[1] then
      ex = call('EXISTS', key .. LIST .. lists[1])
    end
    if lists[2] then
      dn = call('EXISTS', key .. LIST .. lists[2])
    end
  end
  return {1, 0, now, server_now, ends, o, ex, dn}
end

-- boxed applies a penalty box (box: {length, ceiling} in microseconds) to the verdict of
-- its rule's check of cost at now (ok, remaining, retry, reset, as check returned them).
--   A key whose block has not ended (now < its end) is denied: remaining 0, retry_after
--   and reset_after at least the block's end, and blocked is true (the rule is not charged,
--   and no new block starts: a block is never extended by the requests it refuses).
--   Otherwise the verdict stands, and len is the block a denial starts: the rule denied a
--   cost above 0 that can fit (retry not -1). len is the box's length, or with a ceiling
--   above it, twice the last block's (at least the length, at most the ceiling) when the
--   key offends again before the ceiling has passed since its last block ended; else 0.
-- It reads one key (box_read); the block is written by box_offend when the call ends.
local function boxed(key, now, cost, box, ok, remaining, retry, reset)
  local u, b = box_read(key)
  if now < u then
    local wait = u - now
    if retry ~= -1 and retry < wait then
      retry = wait
    end
    if reset < wait then
      reset = wait
    end
    return 0, 0, retry, reset, 0, true
  end
  if ok == 1 or cost == 0 or retry == -1 then
    return ok, remaining, retry, reset, 0, false
  end
  local len, ceiling = box[1], box[2]
  if ceiling > len and u > 0 and now < u + ceiling then
    len = b * 2
    if len < box[1] then
      len = box[1]
    elseif len > ceiling then
      len = ceiling
    end
  end
  return ok, remaining, retry, reset, len, false
end

-- box_offend starts a block of len microseconds at now for the rule whose key is key and
-- whose box is box, and makes out's values of rule r (out[5r] .. out[5r+4]) describe it.
-- The box's key lives ends the block ends, or with a ceiling, that much longer, so that
-- a repeat offence is recognised.
local function box_offend(key, now, len, box, out, r)
  local keep = len
  if box[2] > box[1] then
    keep = keep + box[2]
  end
  set_us(key .. BOX, string.format('%.0f %.0f', now + len, len), keep)
  local o = 5 * r
  out[o + 1] = 0
  if out[o + 2] < len then
    out[o + 2] = len
  end
  if out[o + 3] < len then
    out[o + 3] = len
  end
end

-- check_rules is phase 1 of a call on the general path: every rule's check at units times
-- its cost (st[5r-4]), and its penalty box (boxed), no writes. It keeps each rule's pending
-- write in st (see main) and its five reply values in out, and returns allowed (1 or 0),
-- the deciding rule (0 when allowed) and the blocks the call starts if it ends here (a
-- list of rule, length pairs; nil for none).
local function check_rules(KEYS, rs, st, out, n, now, units)
  local allowed, decider, offences = 1, 0, nil
  for r = 1, n do
    local c = rs[r]
    local cost = st[5 * r - 4] * units
    local on = c.lists and listed(KEYS[r], c.lists)
    if on == 'exempt' then
      cost = 0
    end
    local ok, remaining, retry, reset, limit, write, _, _, w2, w3, w4 = c[9](KEYS[r], now, cost, c[3])
    local box = c.box
    if on then
      ok, remaining, retry = list_verdict(on, c.lists, ok, remaining, retry)
      write = false
    end
    if box and not on then
      local len, blocked
      ok, remaining, retry, reset, len, blocked = boxed(KEYS[r], now, cost, box, ok, remaining, retry, reset)
      if blocked then
        write = false
      elseif len > 0 then
        offences = offences or {}
        offences[#offences + 1], offences[#offences + 2] = r, len
      end
    end
    if ok == 0 and not c[2] and allowed == 1 then
      allowed, decider = 0, r
    end
    local o = 5 * r
    st[o - 3], st[o - 2], st[o - 1], st[o] = write or false, w2, w3, w4
    out[o], out[o + 1], out[o + 2], out[o + 3], out[o + 4] = ok, remaining, retry, reset, limit
  end
  return allowed, decider, offences
end

-- fewer returns g, or fewer units when remaining (a denying rule's, the largest cost it
-- allows now) holds fewer of per (its cost per unit); per 0 bounds nothing.
local function fewer(g, remaining, per)
  if per > 0 then
    local fits = floor(remaining / per)
    if fits < g then
      return fits
    end
  end
  return g
end

-- most decides a partial admission of up to units (op "most:N"): the call's rules are
-- checked at units; when an enforcing rule denies, its remaining (the largest cost it
-- allows now, by the check contract) bounds the grant g to floor(remaining / its cost per
-- unit), and the rules are checked again at g, or at one unit when g is 0 so that the
-- denial's retry-after is the wait for one unit. A rule that breaks the contract (denies
-- g) makes the call a denial, never a larger charge. It returns allowed, decider, g (0
-- when denied) and the blocks of the last check, with st and out as check_rules leaves
-- them.
local function most(KEYS, rs, st, out, n, now, units)
  local allowed, decider, offences = check_rules(KEYS, rs, st, out, n, now, units)
  if allowed == 1 then
    return allowed, decider, units, offences
  end
  local g = units
  for r = 1, n do
    if out[5 * r] == 0 and not rs[r][2] then
      g = fewer(g, out[5 * r + 1], st[5 * r - 4])
    end
  end
  if g < 1 then
    g = 1
  end
  allowed, decider, offences = check_rules(KEYS, rs, st, out, n, now, g)
  if allowed == 0 then
    return allowed, decider, 0, offences
  end
  return allowed, decider, g, offences
end

-- delay decides a call that may wait for its slot (op "delay:M"): the call's rules are
-- checked at now; when enforcing rules deny it, each with a retry-after, and the longest
-- of those, d, is at most M, the rules are checked again at now + d, as if the request came
-- then, and the call is charged there (a reservation) when every enforcing rule allows it.
-- A cost that never fits, a wait longer than M, a denial that starts a penalty box's
-- block, or a denial at now + d (a list, a rule whose retry-after did not hold) leaves
-- the call the denial it was at now. It
-- returns allowed, decider, the blocks, and the wait d (0: none; nil: denied), with st
-- and out as the deciding check left them (out: the rules as seen at now + d, their
-- reset-after counted from now).
local function delay(KEYS, rs, st, out, n, now, most)
  local allowed, decider, offences = check_rules(KEYS, rs, st, out, n, now, 1)
  if allowed == 1 then
    return allowed, decider, offences, 0
  end
  if offences then
    -- A denial that starts a penalty box's block is an offence, never a wait.
    return allowed, decider, offences, nil
  end
  local d = 0
  for r = 1, n do
    local o = 5 * r
    if out[o] == 0 and not rs[r][2] then
      local retry = out[o + 2]
      if retry < 0 or retry > most then
        return allowed, decider, offences, nil
      end
      if retry > d then
        d = retry
      end
    end
  end
  local later = {}
  local ok, _, later_offences = check_rules(KEYS, rs, st, later, n, now + d, 1)
  if ok == 0 then
    return allowed, decider, offences, nil
  end
  for i = 5, 5 * n + 4 do
    out[i] = later[i]
  end
  -- Reset-after counts from the call's instant, as every reply's does.
  for r = 1, n do
    out[5 * r + 3] = out[5 * r + 3] + d
  end
  return 1, 0, later_offences, d
end

-- one_further is one (below) for a rule with further keys of the dispatcher's: its
-- override read first (overridden), then the rule's check, its lists (listed) and its box
-- (boxed), charged
-- when allowed, the block an offence starts written when the call ends (box_offend), as
-- the general path decides a call of one rule.
local function one_further(key, op, units, now, server_now, check, commit, refund, cost, shadow, p, box, ovr, lists)
  local hold
  if ovr then
    p, hold = overridden(key, now, p, ovr, 1)
    if p == nil then
      return redis.error_reply('RLCTL ' .. hold)
    end
  end
  if op == 'refund' then
    if refund and cost > 0 then
      refund(key, now, cost, p)
      if hold then
        expire_us(key, hold - now)
      end
    end
    return {1, 0, now, server_now}
  end
  local g = units or 1
  if cost * g > MAX_INT then
    return redis.error_reply('RLCTL rule 1: cost per unit times ' .. g .. ' units is above 2^53')
  end
  -- A key on a list (listed) is checked as the list says: an exempt key is peeked at.
  local on = lists and listed(key, lists)
  local per = cost
  if on == 'exempt' then
    per = 0
  end
  local ok, remaining, retry, reset, limit, write, _, _, w2, w3, w4 = check(key, now, per * g, p)
  local len, blocked = 0, on and true or false
  if on then
    ok, remaining, retry = list_verdict(on, lists, ok, remaining, retry)
  elseif box then
    ok, remaining, retry, reset, len, blocked = boxed(key, now, cost * g, box, ok, remaining, retry, reset)
  end
  if units and ok == 0 and not shadow then
    -- most, for one rule: the grant the rule's remaining allows, or one unit.
    g = fewer(units, remaining, cost)
    if g < 1 then
      g = 1
    end
    ok, remaining, retry, reset, limit, write, _, _, w2, w3, w4 = check(key, now, per * g, p)
    if on then
      ok, remaining, retry = list_verdict(on, lists, ok, remaining, retry)
    elseif box then
      ok, remaining, retry, reset, len, blocked = boxed(key, now, cost * g, box, ok, remaining, retry, reset)
    end
  end
  local out = {1, 0, now, server_now, ok, remaining, retry, reset, limit}
  if ok == 0 and not shadow then
    out[1], out[2], g = 0, 1, 0
  end
  if len > 0 then
    box_offend(key, now, len, box, out, 1)
  end
  if out[1] == 1 and write and not blocked and cost > 0 then
    commit(key, write, w2, w3, w4)
    if hold then
      expire_us(key, hold - now)
    end
  end
  if units then
    out[10] = g
  end
  return out
end

-- check_one decides a check of one rule without further keys (check, commit, cost, shadow
-- flag and parameters p) for key at now: charged when allowed, the reply of a call of one
-- rule. one and quick end here; quick's check may be a fast rule's try (algorithms/fast.go),
-- whose twelfth value says it has charged already.
local function check_one(key, now, server_now, check, commit, cost, shadow, p)
  local ok, remaining, retry, reset, limit, write, _, _, w2, w3, w4, t = check(key, now, cost, p)
  if ok == nil then
    return nil -- a try that takes no such key (quick then declines the call)
  end
  if ok == 0 and not shadow then
    return {0, 1, now, server_now, ok, remaining, retry, reset, limit}
  end
  if write and cost > 0 and not t then
    commit(key, write, w2, w3, w4)
  end
  return {1, 0, now, server_now, ok, remaining, retry, reset, limit}
end

-- one decides a call of one rule (op "check", "refund" or most when units is set) without
-- the general path's tables, and returns its reply (one_further's for a rule with a
-- penalty box or an override; op "override": set_override's).
local function one(KEYS, ARGV, op, units, now, server_now)
  local key = KEYS[1]
  local check, commit, refund, cost, shadow, p
  -- A compiled rule whose record is complete (a built-in's, nothing varying per
  -- request, validated on its first call) is found in one lookup, under FCALL where
  -- the records outlive a call.
  local c = ready[ARGV[7]] or further_ready[ARGV[7]]
  local box, ovr
  local lists
  if c and #ARGV == 8 and op ~= 'override' and op ~= 'list' and op ~= 'inspect' then
    cost = cost_arg(ARGV[8])
    if cost then
      check, commit, refund, shadow, p, box, ovr, lists = c[9], c[10], c[11], c[2], c[3], c.box, c.ovr, c.lists
    end
  end
  if check == nil then
    local a
    check, commit, refund, cost, shadow, p, a, box, ovr, lists = rule_at(ARGV, 1, 7, {}, now)
    if check == nil then
      return redis.error_reply('RLCTL ' .. commit)
    end
    if op == 'override' then
      -- The override follows the rule.
      if not ovr then
        return redis.error_reply('RLCTL rule 1: the rule is not overridable')
      end
      if a ~= #ARGV then
        return redis.error_reply('RLCTL ARGV has ' .. #ARGV .. ' entries, the rule and its override describe ' .. a)
      end
      return set_override(key, ARGV[a], now, server_now, p, ovr)
    end
    if op == 'list' then
      -- The list's name and the action follow the rule.
      if not lists then
        return redis.error_reply('RLCTL rule 1: the rule has no lists')
      end
      if a + 1 ~= #ARGV then
        return redis.error_reply('RLCTL ARGV has ' .. #ARGV .. ' entries, the rule and its list change describe ' .. (a + 1))
      end
      return list_member(key, ARGV[a], ARGV[a + 1], now, server_now, lists)
    end
    if op == 'inspect' then
      if a - 1 ~= #ARGV then
        return redis.error_reply('RLCTL ARGV has ' .. #ARGV .. ' entries, the rule describes ' .. (a - 1))
      end
      return inspect(key, now, server_now, p, box, ovr, lists)
    end
    if a - 1 ~= #ARGV then
      return redis.error_reply('RLCTL ARGV has ' .. #ARGV .. ' entries, rules describe ' .. (a - 1))
    end
  end
  if box or ovr or lists then
    return one_further(key, op, units, now, server_now, check, commit, refund, cost, shadow, p, box, ovr, lists)
  end
  if op == 'refund' then
    if refund and cost > 0 then
      refund(key, now, cost, p)
    end
    return {1, 0, now, server_now}
  end
  if units then
    -- most (above), for one rule.
    if cost * units > MAX_INT then
      return redis.error_reply('RLCTL rule 1: cost per unit times ' .. units .. ' units is above 2^53')
    end
    local ok, remaining, retry, reset, limit, write, _, _, w2, w3, w4 = check(key, now, cost * units, p)
    local g = units
    if ok == 0 and not shadow then
      g = fewer(units, remaining, cost)
      if g < 1 then
        g = 1
      end
      ok, remaining, retry, reset, limit, write, _, _, w2, w3, w4 = check(key, now, cost * g, p)
      if ok == 0 then
        return {0, 1, now, server_now, ok, remaining, retry, reset, limit, 0}
      end
    end
    if write and cost > 0 then
      commit(key, write, w2, w3, w4)
    end
    return {1, 0, now, server_now, ok, remaining, retry, reset, limit, g}
  end
  return check_one(key, now, server_now, check, commit, cost, shadow, p)
end

-- usual tells whether the call whose ARGV are ARGV[a + 1] .. is what the engine sends
-- most: a check of k rules (COUNTS[k], written with stacks) on the server clock, with no
-- clock skew, and no deadline or a well-formed one that server_now has not passed. quick
-- decides it (or declines it, for decide to parse); any other call is decide's, which also
-- says what is wrong with a malformed one.
local function usual(ARGV, a, k, server_now)
  if ARGV[a + 2] ~= 'check' or ARGV[a + 6] ~= COUNTS[k] or ARGV[a + 3] ~= '' or ARGV[a + 5] ~= '' or ARGV[a + 1] ~= PROTOCOL then
    return false
  end
  local dl = ARGV[a + 4]
  if dl ~= '' then
    local d = tonumber(dl)
    if d == nil or d < server_now or floor(d) ~= d or d > MAX_INT then
      return false
    end
  end
  return true
end

-- quick decides a usual call (see usual) of k keys, KEYS[ki + 1] .. KEYS[ki + k], whose
-- ARGV are ARGV[a + 1] .. ARGV[a + 6 + 2k], where they lie (a batch copies nothing), at
-- now, the server clock: a call of one compiled rule whose record is complete (ready) as
-- one decides it (with the rule's try where it has one: see algorithms/fast.go), a stack
-- as stacks[k] does; the same reply, and the keys left as one leaves them. It returns
-- nil, having touched nothing, for a call they do not take.
local function quick(KEYS, ARGV, ki, a, k, now)
  TTL_SLACK = 0
  if k > 1 then
    return stacks[k](KEYS, ARGV, now, now, ki, a)
  end
  local c, cost = ready[ARGV[a + 7]], ARGV[a + 8]
  if cost == '1' then
    cost = 1
  else
    cost = cost_arg(cost)
  end
  if c == nil or cost == nil then
    return nil
  end
  return check_one(KEYS[ki + 1], now, now, c.try or c[9], c[10], cost, c[2], c[3])
end

-- first: this is the first call of this run of the script's text, which binds the
-- prelude's locals (bind) and calls redis.replicate_commands. Under EVAL the text runs
-- afresh on every call; a library (FUNCTION LOAD: Redis 7, which replicates effects
-- anyway) does both once.
local first = true

-- RULE_COUNTS reads the usual stacks' rule counts (ARGV[6]) without parsing.
local RULE_COUNTS = {['2'] = 2, ['3'] = 3, ['4'] = 4}

-- DISTINCT_SCAN is the largest call whose keys are checked distinct by comparing each with
-- the earlier ones (n(n-1)/2 string compares, no table); a larger call keeps a set of its
-- keys (n lookups, one table).
local DISTINCT_SCAN = 8

-- mismatch is the reply to a call whose protocol (ARGV[1]) is not the script's.
local function mismatch(sent)
  return redis.error_reply('RLCTL protocol mismatch: script speaks ' .. PROTOCOL .. ', caller sent ' .. tostring(sent))
end

-- decide runs one call (main binds the library's locals first). t is the server clock
-- as TIME answers it, read by a batch once for its calls; nil: decide reads it.
local function decide(KEYS, ARGV, t)
  TTL_SLACK = 0
  if ARGV[1] ~= PROTOCOL then
    return mismatch(ARGV[1])
  end
  local op = ARGV[2]
  local units -- op "most:N": N
  local wait -- op "delay:M": M
  if op ~= 'check' and op ~= 'refund' and op ~= 'owe' and op ~= 'override' and op ~= 'list' and op ~= 'inspect' then
    if type(op) == 'string' and string.sub(op, 1, 5) == 'most:' then
      units = int_arg(string.sub(op, 6), 1)
    elseif type(op) == 'string' and string.sub(op, 1, 6) == 'delay:' then
      wait = int_arg(string.sub(op, 7), 0)
    end
    if units == nil and wait == nil then
      return redis.error_reply('RLCTL unknown op ' .. tostring(op))
    end
  end

  -- The server clock is read once, before any write.
  t = t or call('TIME')
  local server_now = t[1] * 1000000 + t[2] -- TIME's strings, as numbers by arithmetic
  local now = server_now
  if ARGV[3] ~= '' then
    now = int_arg(ARGV[3], 0)
    if now == nil then
      return redis.error_reply('RLCTL bad now_us ' .. tostring(ARGV[3]))
    end
  end
  if ARGV[4] ~= '' then
    local deadline = tonumber(ARGV[4])
    if deadline == nil or floor(deadline) ~= deadline or deadline < 0 or deadline > MAX_INT then
      return redis.error_reply('RLCTL bad deadline ' .. tostring(ARGV[4]))
    end
    if server_now > deadline then
      -- The server time (TIME's two strings, so no number is formatted) lets a caller that
      -- still waits correct its estimate of this server's clock.
      return redis.error_reply('RLCTL deadline passed at ' .. t[1] .. ' ' .. t[2] .. ': the caller stopped waiting before the server ran the call; nothing was charged')
    end
  end

  if ARGV[5] ~= '' then
    TTL_SLACK = int_arg(ARGV[5], 0)
    if TTL_SLACK == nil then
      return redis.error_reply('RLCTL bad clock skew ' .. tostring(ARGV[5]))
    end
  end

  local n = 1
  if ARGV[6] ~= '1' then
    n = RULE_COUNTS[ARGV[6]] or int_arg(ARGV[6], 0)
  end
  if n == nil or n ~= #KEYS then
    return redis.error_reply('RLCTL rule count ' .. tostring(ARGV[6]) .. ' does not match ' .. #KEYS .. ' keys')
  end

  -- A call of one rule, the common case, needs none of the tables of a stack (below).
  if n == 1 and not wait and op ~= 'owe' then
    return one(KEYS, ARGV, op, units, now, server_now)
  elseif op == 'override' or op == 'list' or op == 'inspect' then
    return redis.error_reply('RLCTL op ' .. op .. ' takes one rule')
  end

  -- A check of a few compiled rules whose records are all complete, the engine's usual
  -- stack, is decided with every value in a local (stacks[n], written with the compiled
  -- rules); any other call, or one it does not take, goes the general way below.
  local unrolled = stacks[n]
  if unrolled and op == 'check' and #ARGV == 6 + 2 * n then
    local out = unrolled(KEYS, ARGV, now, server_now, 0, 0)
    if out then
      return out
    end
  end

  -- Parse every rule before touching any key. rs[r] is rule r's record: a complete
  -- compiled record (found in one lookup), or one made for this call from what rule_at
  -- parsed, with the same fields (shadow flag, parameters, check, commit, refund).
  -- st[5r-4] is rule r's cost and st[5r-3] .. st[5r] its pending write, commit's arguments
  -- after the key (st[5r-3] false: none).
  local rs, st = {}, {}
  local loaded
  local a = 7
  for r = 1, n do
    local c = ready[ARGV[a]] or further_ready[ARGV[a]]
    if c and op == 'owe' and c.owe == nil then
      c = nil -- a plugin's record, which has no owe: parsed below, which finds out
    end
    if c then
      local cost = cost_arg(ARGV[a + 1])
      if cost == nil then
        return redis.error_reply('RLCTL rule ' .. r .. ': bad cost or flags')
      end
      st[5 * r - 4] = cost
      a = a + 2
    else
      loaded = loaded or {}
      local check, commit, refund, cost, shadow, p, next_a, box, ovr, lists, owe = rule_at(ARGV, r, a, loaded, now)
      if check == nil then
        return redis.error_reply('RLCTL ' .. commit)
      end
      c = {false, shadow, p, false, false, false, false, false, check, commit, refund, box = box, ovr = ovr, lists = lists, owe = owe}
      st[5 * r - 4] = cost
      a = next_a
    end
    rs[r] = c
  end
  if a - 1 ~= #ARGV then
    return redis.error_reply('RLCTL ARGV has ' .. #ARGV .. ' entries, rules describe ' .. (a - 1))
  end
  -- No key repeats (see DISTINCT_SCAN).
  if n <= DISTINCT_SCAN then
    for r = 2, n do
      local key = KEYS[r]
      for i = 1, r - 1 do
        if KEYS[i] == key then
          return redis.error_reply('RLCTL rule ' .. r .. ': key repeats rule ' .. i)
        end
      end
    end
  else
    local seen = {}
    for r = 1, n do
      local key = KEYS[r]
      local i = seen[key]
      if i then
        return redis.error_reply('RLCTL rule ' .. r .. ': key repeats rule ' .. i)
      end
      seen[key] = r
    end
  end

  -- An overridable rule decides with the figures in force for its key (overridden): a
  -- record of this call's own holds them.
  -- A write under an override that ends keeps the key until holds[r] (see OVR).
  local holds
  for r = 1, n do
    local c = rs[r]
    if c.ovr then
      local p, hold = overridden(KEYS[r], now, c[3], c.ovr, r)
      if p == nil then
        return redis.error_reply('RLCTL ' .. hold)
      end
      if p ~= c[3] then
        rs[r] = {c[1], c[2], p, c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], box = c.box, lists = c.lists, owe = c.owe}
      end
      if hold then
        holds = holds or {}
        holds[r] = hold
      end
    end
  end

  if op == 'refund' then
    for r = 1, n do
      local refund, cost = rs[r][11], st[5 * r - 4]
      if refund and cost > 0 then
        refund(KEYS[r], now, cost, rs[r][3])
        if holds and holds[r] then
          expire_us(KEYS[r], holds[r] - now)
        end
      end
    end
    return {1, 0, now, server_now}
  end

  if op == 'owe' then
    -- Every rule charged must carry a debt before any is.
    for r = 1, n do
      if not rs[r].owe and st[5 * r - 4] > 0 then
        return redis.error_reply('RLCTL rule ' .. r .. ': its algorithm carries no debt (owe)')
      end
    end
    local out = {1, 0, now, server_now}
    for r = 1, n do
      local c, cost = rs[r], st[5 * r - 4]
      -- An exempt key is charged nothing, as a check peeks at it.
      if cost > 0 and not (c.lists and listed(KEYS[r], c.lists) == 'exempt') then
        c.owe(KEYS[r], now, cost, c[3])
        if holds and holds[r] then
          expire_us(KEYS[r], holds[r] - now)
        end
      end
      local o = 5 * r
      out[o], out[o + 1], out[o + 2], out[o + 3], out[o + 4] = c[9](KEYS[r], now, 0, c[3])
    end
    return out
  end

  -- Phase 1: check every rule; no writes.
  local out = {0, 0, 0, 0}
  local allowed, decider, granted, offences
  if units then
    for r = 1, n do
      if st[5 * r - 4] * units > MAX_INT then
        return redis.error_reply('RLCTL rule ' .. r .. ': cost per unit times ' .. units .. ' units is above 2^53')
      end
    end
    allowed, decider, granted, offences = most(KEYS, rs, st, out, n, now, units)
    out[5 * n + 5] = granted
  elseif wait then
    allowed, decider, offences, wait = delay(KEYS, rs, st, out, n, now, wait)
    out[5 * n + 5] = wait or -1
  else
    allowed, decider, offences = check_rules(KEYS, rs, st, out, n, now, 1)
  end

  -- A call whose checks ran past its deadline charges nothing (see Errors above).
  if allowed == 1 and ARGV[4] ~= '' then
    t = call('TIME')
    if t[1] * 1000000 + t[2] > tonumber(ARGV[4]) then
      return redis.error_reply('RLCTL deadline passed at ' .. t[1] .. ' ' .. t[2] .. ': the server checked the call past its deadline; nothing was charged')
    end
  end

  -- Phase 2: all or nothing; and every block the call starts (a denial by a boxed rule,
  -- enforcing or shadow).
  local at = now
  if wait and wait > 0 then
    -- A reservation: its writes are the state at now + wait, kept that much longer.
    at = now + wait
    TTL_SLACK = TTL_SLACK + wait
  end
  if offences then
    for i = 1, #offences, 2 do
      local r = offences[i]
      box_offend(KEYS[r], at, offences[i + 1], rs[r].box, out, r)
    end
  end
  if allowed == 1 then
    for r = 1, n do
      local o = 5 * r
      if st[o - 3] and st[o - 4] > 0 then
        rs[r][10](KEYS[r], st[o - 3], st[o - 2], st[o - 1], st[o])
        if holds and holds[r] then
          expire_us(KEYS[r], holds[r] - now)
        end
      end
    end
  else
    -- Rules that would have allowed were not charged: report their state as a peek.
    for r = 1, n do
      if out[r * 5] == 1 and st[5 * r - 4] > 0 then
        local c = rs[r]
        local _, remaining, _, reset = c[9](KEYS[r], now, 0, c[3])
        out[r * 5 + 1], out[r * 5 + 3] = remaining, reset
      end
    end
  end
  out[1], out[2], out[3], out[4] = allowed, decider, now, server_now
  return out
end

-- BATCH_UNPACK is the most values a call of a batch may have for batch to copy its KEYS
-- and ARGV with unpack (a call has fewer keys than values).
local BATCH_UNPACK = 64

-- batch runs the calls of a batch (see "batch" atop this file) one after another, each as
-- decide runs it alone, so each is charged all or nothing on its own. A call that fails
-- (an error reply, or an error raised by a command or a plugin) is answered with its error
-- and the calls after it still run: an error raised in one call never takes the replies of
-- the calls before it, which are charged, with it.
local function batch(KEYS, ARGV)
  local m = int_arg(ARGV[3], 1)
  if m == nil then
    return redis.error_reply('RLCTL bad batch size ' .. tostring(ARGV[3]))
  end
  local out = {}
  local ki, a, nk, na = 0, 4, #KEYS, #ARGV
  -- One clock read for the batch: its calls are decided at the instant it starts, as
  -- one call's rules are, and each call's deadline is checked against it.
  local t = call('TIME')
  local server_now = t[1] * 1000000 + t[2]
  for i = 1, m do
    local k, v = ARGV[a], ARGV[a + 1]
    if k == '1' and v == '8' then
      k, v = 1, 8
    else
      k, v = int_arg(k, 0), int_arg(v, 1)
    end
    if k == nil or v == nil or ki + k > nk or a + 1 + v > na then
      return redis.error_reply('RLCTL batch call ' .. i .. ': bad key or value count')
    end
    a = a + 1
    local ok, reply
    if COUNTS[k] and v == 6 + 2 * k and usual(ARGV, a, k, server_now) then
      -- The usual call, decided where it lies (quick).
      ok, reply = pcall(quick, KEYS, ARGV, ki, a, k, server_now)
    end
    if ok == nil or ok and reply == nil then
      -- The call's own KEYS and ARGV: copied by unpack (one call) while they are small,
      -- element by element beyond (unpack's results live on Lua's stack, which is bounded).
      local keys, argv
      if v <= BATCH_UNPACK then
        keys, argv = {unpack(KEYS, ki + 1, ki + k)}, {unpack(ARGV, a + 1, a + v)}
      else
        keys, argv = {}, {}
        for j = 1, k do
          keys[j] = KEYS[ki + j]
        end
        for j = 1, v do
          argv[j] = ARGV[a + j]
        end
      end
      ok, reply = pcall(decide, keys, argv, t)
    end
    if not ok then
      -- Redis's pcall gives a failed command's error as its message, code first ("OOM
      -- ..."), luahost's too; any other error gets the code a script's error has alone.
      local msg = tostring(reply)
      if not string.find(msg, '^%u+ ') then
        msg = 'ERR ' .. msg
      end
      reply = redis.error_reply(msg)
    end
    out[i] = reply
    ki, a = ki + k, a + v + 1
  end
  if ki ~= nk or a - 1 ~= na then
    return redis.error_reply('RLCTL batch of ' .. m .. ' calls leaves keys or values over')
  end
  return out
end

local function main(KEYS, ARGV)
  if first then
    first = false
    bind()
    -- The server clock is read before any write (scripts that read TIME must replicate
    -- their effects, which Redis >= 5 does by default and older servers do on request).
    if redis.replicate_commands then
      redis.replicate_commands()
    end
  end
  if ARGV[2] == 'batch' then
    if ARGV[1] ~= PROTOCOL then
      return mismatch(ARGV[1])
    end
    return batch(KEYS, ARGV)
  end
  local k = #KEYS
  if COUNTS[k] and ARGV[6 + 2 * k] ~= nil and ARGV[7 + 2 * k] == nil then
    local t = call('TIME')
    local now = t[1] * 1000000 + t[2]
    if usual(ARGV, 0, k, now) then
      local reply = quick(KEYS, ARGV, 0, 0, k, now)
      if reply then
        return reply
      end
    end
    return decide(KEYS, ARGV, t)
  end
  return decide(KEYS, ARGV)
end
