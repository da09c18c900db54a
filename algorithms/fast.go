package algorithms

import (
	"fmt"
	"strconv"
	"strings"
)

// A compiled rule of gcra, token_bucket, leaky_bucket, fixed_window or sliding_window,
// with nothing varying per request and no override, gets a check and commit of its own: straight-line Lua
// of its algorithm, made by a factory (one per algorithm in a script, fast_<name>) from the
// rule's parameters and what the algorithm derives from them, held as upvalues. They do the
// same reads and writes and return the same results as the algorithm's check(key, now,
// cost, p) and commit(key, pending) in lua/, without their helper calls and without a table
// for the pending write: a 3-rule stack spent about a third of its time on that structure
// (BENCHMARKS.md). TestFastRulesMatchTheirAlgorithms holds each to its algorithm's Lua:
// every reply, and every key's value and TTL afterwards.
//
// The record keeps them at c[12] (check) and c[13] (commit), which rule_at makes the
// record's check and commit. Such a check returns the pending write as values, not a
// table: ok, remaining, retry, reset, limit, then, when it allows, the first pending value,
// the peek's remaining and reset (as every built-in's check), and the other pending values;
// the dispatcher passes commit the first pending value and the three after the peek's, as
// it does for every rule (an algorithm's commit takes its table and ignores the rest).

// fastCall returns the factory that makes c's check and commit and its arguments, or "" and
// nil when c gets none.
func fastCall(c *Compiled) (factory string, args []int64) {
	if !IsBuiltin(c.Algorithm) || len(c.Vary) > 0 || c.Overridable || c.Calendar || c.Algorithm.Validate(c.Params) != nil {
		return "", nil
	}
	p := c.Params
	switch c.Algorithm.Name {
	case "gcra":
		rate, period := p[0], p[1]
		if rate != 1 && period%rate == 0 { // as gcra.lua's whole
			rate, period = 1, period/rate
		}
		return "fast_gcra", []int64{rate, period, p[2], p[2] * period}
	case "token_bucket":
		return "fast_token_bucket", []int64{p[0], p[1], p[2], p[0] * p[2]}
	case "leaky_bucket":
		return "fast_leaky_bucket", []int64{p[0], p[1], p[2], p[0] * p[2]}
	case "fixed_window":
		return "fast_fixed_window", []int64{p[0], p[1]}
	case "sliding_window":
		return "fast_sliding_window", []int64{p[0], p[1], 2 * p[1], p[0] * p[1]}
	}
	return "", nil
}

// fastRule returns the statement that sets c[12] and c[13] of c's record (and for gcra
// and fixed_window c.try and c.undo), or "".
func fastRule(c *Compiled) string {
	f, args := fastCall(c)
	if f == "" {
		return ""
	}
	vals := make([]string, len(args))
	for i, v := range args {
		vals[i] = strconv.FormatInt(v, 10)
	}
	if f == "fast_fixed_window" || f == "fast_gcra" {
		return fmt.Sprintf("c[12], c[13], c.try, c.undo = %s(%s)\n", f, strings.Join(vals, ", "))
	}
	return fmt.Sprintf("c[12], c[13] = %s(%s)\n", f, strings.Join(vals, ", "))
}

// fastFactories returns the factories rules' fast rules use, each once.
func fastFactories(rules []*Compiled) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, c := range rules {
		f, _ := fastCall(c)
		if f == "" || seen[f] {
			continue
		}
		seen[f] = true
		b.WriteString(fastSources[f])
	}
	return b.String()
}

var fastSources = map[string]string{
	"fast_gcra":           fastGCRA,
	"fast_token_bucket":   fastTokenBucket + fastEnd,
	"fast_leaky_bucket":   fastLeakyBucket + fastEnd,
	"fast_fixed_window":   fastFixedWindow,
	"fast_sliding_window": fastSlidingWindow + fastEnd,
}

// FastSource returns the Lua of the factory that makes a's compiled rules' own check and
// commit (see fastCall), or "" when a has none: what a lint of a's commands reads beside
// its algorithm's Lua.
func FastSource(a *Algorithm) string {
	if !IsBuiltin(a) {
		return ""
	}
	return fastSources["fast_"+a.Name]
}

// fastEnd ends a factory that makes a check and a commit; fast_gcra and
// fast_fixed_window, which also make a try and an undo, end themselves.
const fastEnd = "return check, commit\nend\n\n"

// fastExpire ends the commits that set a hash's TTL: expire_us(key, ttl), with its call
// written out (the prelude's ttl_ms is the one place a TTL is rounded).
const fastExpire = `call('PEXPIRE', key, ttl_ms(ttl))
end
`

// fastGCRA is gcra's check, commit, try and undo. RATE is 1 when a cell is a whole
// number of microseconds (as gcra.lua's whole makes it): the TAT is then stored as an
// integer; else times are scaled by the rate and a TAT that is not whole is stored as
// "t:r". Pending: now, d2, the TTL.
//
// try(key, now, cost) decides as check does and, where it can, charges in the same
// command (t true in its twelfth value: the caller commits nothing, and undo takes the
// charge back if the call it is part of is denied). A key that holds no TAT, the usual
// state of a key whose traffic stays within its rate (a TAT that has passed expires with
// its key), takes the charge a fresh key takes: try sets it with SET ... NX GET, one
// command where check and commit are two. A key that holds one is left as it is, and its
// TAT, which GET's part of the reply brings, is checked as check checks it (commit then
// writes, as after check). A key of another type, which SET ... GET refuses with an
// error (having written nothing), reads as one without a TAT, as check's GET reads it,
// and commit overwrites it. Without SET's NX with GET (Redis before 7.0, which sets no
// REDIS_VERSION_NUM in scripts) there is no try.
const fastGCRA = `local function fast_gcra(RATE, PERIOD, BURST, CAP)
local function after(now, cost, v)
local d = 0
if v then
local t, r = tonumber(v), 0
if t == nil and type(v) == 'string' then
local a, b = string.match(v, '^(%d+):(%d+)$')
t, r = tonumber(a), tonumber(b)
end
if t ~= nil and r ~= nil and t >= now then
d = (t - now) * RATE + r
end
end
local reset = d
if RATE ~= 1 then
reset = ceil(d / RATE)
end
if cost <= BURST then
local d2 = d + cost * PERIOD
if d2 <= CAP then
local reset2 = d2
if RATE ~= 1 then
reset2 = ceil(d2 / RATE)
end
local remaining = floor((CAP - d2) / PERIOD)
return 1, remaining, 0, reset2, BURST, now, remaining + cost, reset, d2, reset2
end
local retry = d2 - CAP
if RATE ~= 1 then
retry = ceil(retry / RATE)
end
return 0, nonneg(floor((CAP - d) / PERIOD)), retry, reset, BURST
end
return 0, nonneg(floor((CAP - d) / PERIOD)), -1, reset, BURST
end
local function check(key, now, cost)
return after(now, cost, redis_pcall('GET', key))
end
local function tat(now, d)
local v = now + d
if RATE ~= 1 then
local w = floor(d / RATE)
local r = d - w * RATE
v = now + w
if r ~= 0 then
v = string.format('%.0f:%.0f', v, r)
end
end
return v
end
local function commit(key, now, d, ttl)
call('SET', key, tat(now, d), 'PX', ttl_ms(ttl))
end
if (redis.REDIS_VERSION_NUM or 0) < 0x070000 then
return check, commit
end
local function try(key, now, cost)
if cost < 1 or cost > BURST then
return check(key, now, cost)
end
local d2 = cost * PERIOD
local reset2 = d2
if RATE ~= 1 then
reset2 = ceil(d2 / RATE)
end
local v = redis_pcall('SET', key, tat(now, d2), 'NX', 'GET', 'PX', ttl_ms(reset2))
if v == false then
local remaining = floor((CAP - d2) / PERIOD)
return 1, remaining, 0, reset2, BURST, now, remaining + cost, 0, d2, reset2, false, true
end
return after(now, cost, v)
end
local function undo(key)
call('DEL', key)
end
return check, commit, try, undo
end

`

// fastTokenBucket is token_bucket's check and commit. Pending: l2, t, reset.
const fastTokenBucket = `local function fast_token_bucket(CAPACITY, RATE, PERIOD, FULL)
local function check(key, now, cost)
local st = call('HMGET', key, 'l', 't')
local l, t = tonumber(st[1]), tonumber(st[2])
if l == nil or t == nil then
l, t = FULL, now
elseif now > t then
if now - t >= ceil((FULL - l) / RATE) then
l = FULL
else
l = l + (now - t) * RATE
end
t = now
end
local skew = t - now
if cost > CAPACITY then
return 0, nonneg(floor(l / PERIOD)), -1, skew + ceil((FULL - l) / RATE), CAPACITY
end
local c = cost * PERIOD
if l >= c then
local l2 = l - c
local reset = skew + ceil((FULL - l2) / RATE)
local remaining = floor(l2 / PERIOD)
return 1, remaining, 0, reset, CAPACITY, l2, remaining + cost, skew + ceil((FULL - l) / RATE), t, reset
end
return 0, nonneg(floor(l / PERIOD)), skew + ceil((c - l) / RATE), skew + ceil((FULL - l) / RATE), CAPACITY
end
local function commit(key, l2, t, ttl)
call('HSET', key, 'l', l2, 't', t)
` + fastExpire

// fastLeakyBucket is leaky_bucket's check and commit. Pending: l2, t, reset.
const fastLeakyBucket = `local function fast_leaky_bucket(CAPACITY, RATE, PERIOD, FULL)
local function check(key, now, cost)
local st = call('HMGET', key, 'l', 't')
local l, t = tonumber(st[1]), tonumber(st[2])
if l == nil or t == nil then
l, t = 0, now
elseif now > t then
if now - t >= ceil(l / RATE) then
l = 0
else
l = l - (now - t) * RATE
end
t = now
end
local skew = t - now
if cost > CAPACITY then
return 0, nonneg(floor((FULL - l) / PERIOD)), -1, skew + ceil(l / RATE), CAPACITY
end
local l2 = l + cost * PERIOD
if l2 <= FULL then
local reset = skew + ceil(l2 / RATE)
local remaining = floor((FULL - l2) / PERIOD)
return 1, remaining, 0, reset, CAPACITY, l2, remaining + cost, skew + ceil(l / RATE), t, reset
end
return 0, nonneg(floor((FULL - l) / PERIOD)), skew + ceil((l2 - FULL) / RATE), skew + ceil(l / RATE), CAPACITY
end
local function commit(key, l2, t, ttl)
call('HSET', key, 'l', l2, 't', t)
` + fastExpire

// fastFixedWindow is fixed_window's check and commit, and its try and undo. Pending: the
// window (for a key that holds its window and no debt, the field its count is kept in),
// n + cost, the TTL (false for a key that holds its window and no debt: it keeps the TTL
// the window's first write gave it), then for such a key the cost, which commit adds to
// the count with HINCRBY (a cost of 1 sent as the string "1"); for any other, how the key
// is written: 'w' for one that holds its window with a debt (the full form, which gets
// its count), else whether the key exists (and is deleted before the compact form of the
// new window is written). See fixed_window.lua's Forms.
//
// try(key, now, cost) is check and, when it allows a cost of at least 1, commit: it
// returns check's values and a twelfth, t, which is 1 or 2 when the charge is written
// (the caller then commits nothing, and calls undo(key, w, cost, t), w the sixth value,
// if the call it is part of is denied) and nil when it is not (the caller commits as
// after check). It charges first, HINCRBY of the field named by the window of now, which
// in a key that holds that window compact (see fixed_window.lua's Forms) finds its count:
// a charge the limit allows is then that one command, and one over the limit a second
// that takes it back (t 1). A field the charge made (its count is the cost) is a key of
// its own when it is the only one (HLEN): its TTL is set (t 2); else it is deleted and try
// checks. A key the charge fails on (another type, a field that is not a whole number:
// nothing rlctl writes) makes try return nil, having written nothing: its caller undoes
// what it tried before and leaves the call to the general path, which reports the error.
// The dispatcher's quick path uses try (see stacks.go). The field's name is the window as
// redis.call writes a number (the same digits as string.format's %d, for the whole
// numbers windows are), formatted once per window and kept between calls of a library.
const fastFixedWindow = `local function fast_fixed_window(LIMIT, WINDOW)
local function check(key, now, cost)
local win, n, held = floor(now / WINDOW), 0, false
local st = call('HGETALL', key)
local w, c, f, io, d, l
if #st == 2 then
w, c, f = tonumber(st[1]), st[2], st[1]
elseif #st > 0 then
local o
f = 'n'
for i = 1, #st - 1, 2 do
local k, v = st[i], st[i + 1]
if k == 'w' then
w = tonumber(v)
elseif k == 'n' then
c = v
elseif k == 'o' then
o = tonumber(v)
elseif k == 'd' then
d = tonumber(v)
elseif k == 'l' then
l = tonumber(v)
end
end
if w ~= nil and o == w then
d, l = d or 0, l or 0
if d > 0 and l > 0 then
io = w
end
end
end
if w ~= nil and w >= win then
win, n, held = w, tonumber(c) or 0, true
elseif io ~= nil then
n = d - (win - io - 1) * l
if n <= 0 then
n, io = 0, nil
end
end
local to_end = (win + 1) * WINDOW - now
local reset = 0
if n > 0 then
reset = to_end
if io ~= nil then
reset = (io + 1 + ceil(d / l)) * WINDOW - now
end
end
if cost > LIMIT then
return 0, nonneg(LIMIT - n), -1, reset, LIMIT
end
if n + cost <= LIMIT then
local peek, ttl = reset, to_end
if io == win then
ttl = reset
end
if cost > 0 then
reset = ttl
end
if held and io == nil then
return 1, LIMIT - n - cost, 0, reset, LIMIT, f, LIMIT - n, peek, n + cost, false, cost
end
local how = f ~= nil
if held then
how = 'w'
end
return 1, LIMIT - n - cost, 0, reset, LIMIT, win, LIMIT - n, peek, n + cost, ttl, how
end
if io ~= nil then
local after = io + 1 + ceil(nonneg(d + cost - LIMIT) / l)
if after > win + 1 then
return 0, nonneg(LIMIT - n), after * WINDOW - now, reset, LIMIT
end
end
return 0, nonneg(LIMIT - n), to_end, reset, LIMIT
end
local function commit(key, win, n, ttl, how)
if not ttl then
if how == 1 then
call('HINCRBY', key, win, '1')
else
call('HINCRBY', key, win, how)
end
return
end
if how == 'w' then
call('HSET', key, 'w', win, 'n', n)
else
if how then
call('DEL', key)
end
call('HSET', key, win, n)
end
call('PEXPIRE', key, ttl_ms(ttl))
end
local last, name
local function try(key, now, cost)
if cost < 1 or cost > LIMIT then
return check(key, now, cost)
end
local win = floor(now / WINDOW)
if win ~= last then
last, name = win, string.format('%d', win)
end
local r
if cost == 1 then
r = redis_pcall('HINCRBY', key, name, '1')
else
r = redis_pcall('HINCRBY', key, name, cost)
end
if type(r) ~= 'number' then
return nil
end
local to_end = (win + 1) * WINDOW - now
if r > cost then
if r <= LIMIT then
return 1, LIMIT - r, 0, to_end, LIMIT, name, LIMIT - r + cost, to_end, r, false, cost, 1
end
call('HINCRBY', key, name, -cost)
return 0, nonneg(LIMIT - r + cost), to_end, to_end, LIMIT
end
if call('HLEN', key) == 1 then
call('PEXPIRE', key, ttl_ms(to_end))
return 1, LIMIT - cost, 0, to_end, LIMIT, name, LIMIT, 0, cost, to_end, false, 2
end
call('HDEL', key, name)
return check(key, now, cost)
end
local function undo(key, name, cost, t)
if t == 2 then
call('DEL', key)
else
call('HINCRBY', key, name, -cost)
end
end
return check, commit, try, undo
end

`

// fastSlidingWindow is sliding_window's check and commit. Pending: win, cur + cost, prev,
// the TTL (false for a key that holds its window: it keeps the TTL the window's first write
// gave it).
const fastSlidingWindow = `local function fast_sliding_window(LIMIT, WINDOW, WINDOW2, LIMIT_WINDOW)
local function check(key, now, cost)
local win = floor(now / WINDOW)
local st = call('HMGET', key, 'w', 'c', 'p')
local w = tonumber(st[1])
local e, cur, prev, shift, held = now - win * WINDOW, 0, 0, 0, false
if w == win then
cur, prev, held = tonumber(st[2]) or 0, tonumber(st[3]) or 0, true
elseif w == win - 1 then
prev = tonumber(st[2]) or 0
elseif w ~= nil and w > win then
win, e, cur, prev, shift, held = w, 0, tonumber(st[2]) or 0, tonumber(st[3]) or 0, w * WINDOW - now, true
end
local weight = prev * (WINDOW - e)
local te = e - shift
local used = ceil(weight / WINDOW)
local reset = 0
if cur > 0 then
reset = WINDOW2 - te
elseif weight > 0 then
reset = WINDOW - te
end
if cost > LIMIT then
return 0, nonneg(LIMIT - cur - used), -1, reset, LIMIT
end
if weight + (cur + cost) * WINDOW <= LIMIT_WINDOW then
local peek = reset
if cost > 0 then
reset = WINDOW2 - te
end
local ttl = WINDOW2 - te
if held then
ttl = false
end
return 1, LIMIT - cur - cost - used, 0, reset, LIMIT, win, LIMIT - cur - used, peek, cur + cost, prev, ttl
end
local room = LIMIT - cur - cost
if room >= 0 then
local e2 = WINDOW - floor(room * WINDOW / prev)
if e2 < WINDOW then
return 0, nonneg(LIMIT - cur - used), e2 - te, reset, LIMIT
end
end
local e3 = 0
if cur > 0 then
e3 = nonneg(WINDOW - floor((LIMIT - cost) * WINDOW / cur))
end
return 0, nonneg(LIMIT - cur - used), WINDOW - te + e3, reset, LIMIT
end
local function commit(key, win, c, prev, ttl)
call('HSET', key, 'w', win, 'c', c, 'p', prev)
if ttl then
call('PEXPIRE', key, ttl_ms(ttl))
end
end
`
