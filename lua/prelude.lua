-- rlctl engine script: prelude.
--
-- The engine script is this prelude, then a function that instantiates an algorithm by
-- name, with every algorithm file of the script as one branch:
--   local function load_algorithm(name)
--     if name == '<name>' then
--       local params, validate, check, commit, refund, retune
--       <algorithm file: assigns those six names; refund and retune optional>
--       return params, validate or false, check, commit, refund or false, retune or false
--     end
--     ...
--   end
-- then compiled_rule(name), which returns the compiled rule a call names "@k" (its algorithm's
-- name, shadow flag and parameters, written in as constants), and finally dispatch.lua,
-- which defines main(KEYS, ARGV). Only the algorithms a call uses are instantiated, so the
-- cost of a call does not grow with the number of algorithms in the script, and an
-- algorithm is six values rather than a table (a string-keyed table costs a hash map on
-- every call). A built-in is instantiated once per load of the script's library form; a
-- plugin on every call. Everything is a local: the script creates no globals.
--
-- Units and precision: time is an integer count of microseconds, counts are integers.
-- Lua 5.1 numbers are IEEE doubles, exact for integers up to 2^53; the registry keeps every
-- product an algorithm forms below that bound. Numbers never pass through tostring or `..`
-- (Lua 5.1 prints them with %.14g); they reach Redis only as redis.call arguments, which
-- Redis formats exactly.

-- PROTOCOL is the version of the ARGV contract (dispatch.lua): its layout and the values
-- each parameter kind takes. A caller of another version gets an error, never a misparse.
-- 5: a parameter of kind 'nat' (fixed_window's and sliding_window's limit) may be 0.
-- 6: a rule written out may carry a penalty box (flags bit 2, then its two values).
-- 7: a rule written out may be overridable (flags bit 3); op "override" sets or clears
--    a key's override.
local PROTOCOL = "7"
local MAX_INT = 9007199254740992 -- 2^53
-- call and redis_pcall are redis.call and redis.pcall; tonumber, type, floor and ceil the
-- standard functions (math.floor, math.ceil): locals, which cost one register read where a
-- global costs a table lookup. main binds them (bind) on the first call of a run of the
-- script's text, since a library's top level runs before Redis lets it reach any of them.
local call, redis_pcall, tonumber, type, floor, ceil

local function bind()
  call, redis_pcall, tonumber, type = redis.call, redis.pcall, _G.tonumber, _G.type
  floor, ceil = math.floor, math.ceil
end

-- Division: floor(a / b) and ceil(a / b) are exact for integers |a| <= 2^53 and
-- 1 <= b <= 2^53, and the algorithms divide so. The quotient of two doubles is correctly
-- rounded, and a quotient q that is not whole stays strictly between the integers n < q < n + 1
-- around it: n + 1 - a / b >= 1 / b and a / b - n >= 1 / b, while rounding moves q by at
-- most half its ulp, less than q / 2^53 = a / (b * 2^53) <= 1 / b (half an ulp reaches
-- q / 2^53 only at a power of two, which is whole). Negative a: the same, mirrored.
-- math.floor and math.ceil rather than x - x % 1: on luahost (gopher-lua) % is Go's
-- math.Mod, whose time grows with the quotient (for a microsecond timestamp, a loop of ~50
-- steps), where math.floor is one library call; on Redis both are cheap.

-- int_arg returns the integer in [min, 2^53] that the ARGV value s spells, or nil.
local function int_arg(s, min)
  local v = tonumber(s)
  if v == nil or floor(v) ~= v or v < min or v > MAX_INT then
    return nil
  end
  return v
end

-- cost_arg is int_arg(s, 0) for the cost a call sends, with a request's usual "1" and a
-- peek's "0" told without parsing.
local function cost_arg(s)
  if s == '1' then
    return 1
  elseif s == '0' then
    return 0
  end
  return int_arg(s, 0)
end

-- idiv and cdiv are floor(a / b) and ceil(a / b) under a name (for plugins; see Division).
local function idiv(a, b)
  return floor(a / b)
end

local function cdiv(a, b)
  return ceil(a / b)
end

-- nonneg clamps x below at 0.
local function nonneg(x)
  if x < 0 then
    return 0
  end
  return x
end

-- expire_us makes a key outlive the next us microseconds. Redis keeps expiry instants in
-- milliseconds and truncates the current time to its millisecond, hence the extra one: a key
-- never disappears while its state still means something.
--
-- With client clocks the dispatcher sets TTL_SLACK to how far apart callers' clocks may
-- be (ARGV[5]): a caller whose clock runs behind sees the state as meaning something that
-- much longer, so the key must live that much longer too.
local TTL_SLACK = 0

-- ttl_ms is the PEXPIRE / PX argument that makes a key outlive the next us microseconds:
-- ceil((nonneg(us) + TTL_SLACK) / 1000) + 1, with nonneg written out (a TTL is set on most
-- calls).
local function ttl_ms(us)
  if us < 0 then
    us = 0
  end
  return ceil((us + TTL_SLACK) / 1000) + 1
end

local function expire_us(key, us)
  call('PEXPIRE', key, ttl_ms(us))
end

-- subkey_of returns a plugin's subkey(key, name): the further key `name` of the rule whose
-- key is `key`, key .. ':' .. name, for a name among `names`, the keys its algorithm block
-- declares. The engine renders such a rule's key with a hash tag around it, so its further
-- keys hash to its slot: one script call reaches them on Redis Cluster too.
local function subkey_of(names)
  local declared = {}
  for i = 1, #names do
    declared[names[i]] = true
  end
  return function(key, name)
    if not declared[name] then
      error('RLCTL subkey: "' .. tostring(name) .. '" is not among the keys the algorithm declares')
    end
    return key .. ':' .. name
  end
end

-- set_us sets the string key to value and makes it outlive the next us microseconds, as
-- expire_us does, in one SET … PX.
local function set_us(key, value, us)
  call('SET', key, value, 'PX', ttl_ms(us))
end

-- Penalty box (a rule's block_for; see dispatch.lua's boxed). A boxed rule's key K has a
-- further key K .. BOX, a string "<end> <length>": the instant (µs) its current or last
-- block ends and that block's length. The rule's key is rendered with a hash tag around
-- it (as for a plugin's further keys), so the box lives in its slot, and the name is no
-- identifier, so no plugin's further key can take it.
local BOX = ':!box'

-- box_read returns the end and length of the last block of the rule whose key is key, or
-- 0, 0 when it has none (no key, or a value of another layout, which the next block
-- overwrites).
local function box_read(key)
  local v = redis_pcall('GET', key .. BOX)
  if type(v) ~= 'string' then
    return 0, 0
  end
  local u, b = string.match(v, '^(%d+) (%d+)$')
  return tonumber(u) or 0, tonumber(b) or 0
end

-- Overrides (an overridable rule; see dispatch.lua's overridden). An overridable rule's
-- key K has a further key K .. OVR, a string "<ends> <keep> <v1> … <vm>": the figures the
-- rule takes for this key instead of its own, the values of its algorithm's parameters
-- other than a lease, in order, in force until the instant ends (µs; 0: until cleared).
-- The key's state is in the figures in force: every change converts it (the algorithm's
-- retune), the end too, when the next call finds it has come. So that the state is still
-- there to convert, every write under an override that ends keeps K at least keep
-- microseconds past the end (the longest any state lives under either figures; 0 when
-- the override does not end or its end converts nothing). The rule's key is rendered with a hash tag around it, as
-- for a box.
local OVR = ':!ovr'

-- LIST: a rule with lists (dispatch.lua's listed) has its key K on list L while the key
-- K .. LIST .. L exists (a string "1", with no expiry).
local LIST = ':!in:'

-- list_name returns a list's name as ARGV carries it: false for "" (none), the name when
-- it is letters, digits, '_', '-' and '.' (at most 64), else nil.
local function list_name(s)
  if s == '' then
    return false
  end
  if type(s) ~= 'string' or #s > 64 or string.find(s, '[^%w_%.%-]') then
    return nil
  end
  return s
end

-- Calendars (a window algorithm's rule whose window is a calendar period: a day, a week,
-- a month or a year in a time zone). The call carries the bounds of six consecutive
-- periods around its caller's clock, b1 < ... < b6 in microseconds (the caller's clock is
-- in [b3, b4)); the window a request at now counts in is the period [b(i), b(i+1)) that
-- holds now, whose id is its first instant b(i). The rule's parameters p carry them as
-- p.cal; a clock outside [b1, b6) (a server clock more than a period from its caller's)
-- is refused when the call is parsed (see cal_span).
local CAL_BOUNDS = 6

-- CALENDARED names the algorithms whose rules take a calendar.
local CALENDARED = {fixed_window = true}

-- cal_span returns the CAL_BOUNDS bounds ARGV carries from position i on, as a table, or
-- nil and what is wrong with them: each an integer, in increasing order, with now within
-- [b1, b6).
local function cal_span(ARGV, i, now)
  local b = {}
  for j = 1, CAL_BOUNDS do
    local v = int_arg(ARGV[i + j - 1], 0)
    if v == nil or (j > 1 and v <= b[j - 1]) then
      return nil, 'bad calendar bounds'
    end
    b[j] = v
  end
  if now < b[1] or now >= b[CAL_BOUNDS] then
    return nil, string.format('the clock (%.0f µs) is outside the calendar periods the call carries [%.0f, %.0f): the caller\'s and the server\'s clocks are more than a period apart', now, b[1], b[CAL_BOUNDS])
  end
  return b
end

-- window_at returns the window a request at now counts in under a window algorithm's
-- parameters p (limit, window): its id and end. Without a calendar the window is the
-- aligned floor(now / window), whose id is that index; with one (p.cal) it is the period
-- that holds now, whose id is its first instant.
local function window_at(now, p)
  local cal = p.cal
  if cal then
    for i = 2, CAL_BOUNDS - 1 do
      if now < cal[i] then
        return cal[i - 1], cal[i]
      end
    end
    return cal[CAL_BOUNDS - 1], cal[CAL_BOUNDS]
  end
  local k = floor(now / p[2])
  return k, (k + 1) * p[2]
end

-- window_end returns the end of the window whose id is w (a later window than the clock's,
-- a key's whose caller's clock ran ahead; see window_at).
local function window_end(w, p)
  local cal = p.cal
  if cal then
    for i = 2, CAL_BOUNDS do
      if w < cal[i] then
        return cal[i]
      end
    end
    return cal[CAL_BOUNDS]
  end
  return (w + 1) * p[2]
end

-- override_parse returns the instant the override ends, its keep and the parameters (a
-- copy of p with s's figures in place) that the override string s spells, or nil when s
-- is not one that the rule's algorithm (its parameter kinds and validate) accepts.
local function override_parse(s, kinds, validate, p)
  local q, j, ends, keep = {cal = p.cal}, 0, nil, nil
  for i = 1, #kinds do
    q[i] = p[i]
  end
  for f in string.gmatch(s, '[^ ]+') do
    if ends == nil then
      ends = int_arg(f, 0)
      if ends == nil then
        return nil
      end
    elseif keep == nil then
      keep = int_arg(f, 0)
      if keep == nil then
        return nil
      end
    else
      j = j + 1
      while kinds[j] == 'str' do
        j = j + 1
      end
      local kind = kinds[j]
      if kind == nil then
        return nil
      end
      local v = int_arg(f, 1)
      if kind == 'nat' then
        v = int_arg(f, 0)
      end
      if v == nil then
        return nil
      end
      q[j] = v
    end
  end
  j = j + 1
  while kinds[j] == 'str' do
    j = j + 1
  end
  if keep == nil or kinds[j] ~= nil or (validate and validate(q)) then
    return nil
  end
  return ends, keep, q
end
