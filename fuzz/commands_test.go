package fuzz

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// maxCommands bounds the trace an input decodes into.
const maxCommands = 40

// evalScript runs one command given in ARGV, as an engine script's redis.call would: the
// command's reply goes through Redis's Lua conversion both ways, and its error becomes a
// script error.
const evalScript = "return redis.call(unpack(ARGV))"

// command is one command of a trace.
type command struct {
	args []string
	eval bool // run through EVAL (evalScript) on luahost and Redis
	// keepsExpire is set by runHost: c is an EXPIRE-family command with GT or LT that
	// would set its key's expire time to the one the key has.
	keepsExpire bool
}

func (c command) String() string {
	if c.eval {
		return fmt.Sprintf("EVAL %q", c.args)
	}
	return fmt.Sprintf("%q", c.args)
}

// decoder reads a trace from fuzz input bytes. Each choice takes one byte; once the
// input is used up every choice reads 0 and the trace ends.
type decoder struct {
	data []byte
	pos  int
}

func (d *decoder) next() int {
	if d.pos >= len(d.data) {
		return 0
	}
	d.pos++
	return int(d.data[d.pos-1])
}

func (d *decoder) done() bool { return d.pos >= len(d.data) }

func (d *decoder) pick(pool ...string) string { return pool[d.next()%len(pool)] }

// draw returns one of usual, or for one byte value in eight one of edge.
func (d *decoder) draw(usual, edge []string) string {
	if b := d.next(); b >= 224 {
		return edge[b%len(edge)]
	} else {
		return usual[b%len(usual)]
	}
}

// keys are every key a trace uses: two of each type. No value, field or member in the
// pools below equals one, so a command's keys are the arguments that are in keys.
var keys = []string{"s1", "s2", "h1", "h2", "z1", "z2", "l1", "l2"}

// key returns a key of kind ('s', 'h', 'z' or 'l'), or for one byte value in four a key
// of any type, to reach WRONGTYPE.
func (d *decoder) key(kind byte) string {
	b := d.next()
	if b%4 == 3 {
		return keys[b/4%len(keys)]
	}
	return string(kind) + strconv.Itoa(1+b/4%2)
}

// opts returns up to three options from pool, each present for one byte value in three.
func (d *decoder) opts(pool ...string) []string {
	var out []string
	for len(out) < 3 && !d.done() {
		b := d.next()
		if b%3 != 0 {
			break
		}
		out = append(out, pool[b/3%len(pool)])
	}
	return out
}

// Argument pools: usual values, and edge cases drawn one time in eight.
var (
	values     = []string{"0", "1", "-1", "10", "abc", "", "3.5", "2.5e3"}
	edgeValues = []string{"007", "9223372036854775807", "-9223372036854775808", "+1", " 5", "1e3", "-0", "12345678901234567890", "0x10"}
	ints       = []string{"1", "-1", "0", "5", "100", "-100"}
	edgeInts   = []string{"9223372036854775807", "-9223372036854775808", "+1", " 1", "x", "1.5", "", "01"}
	floats     = []string{"1", "-1", "0.5", "1.5", "-2.5", "10", "0", "3e3"}
	edgeFloats = []string{"inf", "-inf", "nan", "x", "", "0x10", "1e5000", "5e-324", "1e300", " 1", "0.1"}
	// edgeHashFloats has no 1e300, whose sum is hundreds of digits long: a hash holding a
	// value over 64 bytes is no longer kept in insertion order by Redis, and luahost
	// follows insertion order (see the luahost package doc).
	edgeHashFloats = []string{"inf", "-inf", "nan", "x", "", "0x10", "1e5000", "5e-324", " 1", "0.1"}
	scores         = []string{"0", "1", "-1", "2.5", "2", "3", "+inf", "-inf", "1.5"}
	edgeScores     = []string{"nan", "inf", "x", "(1", "", "1e400", "-0", " 1", "0x10", "5e-324", "1.7976931348623157e308"}
	bounds         = []string{"-inf", "+inf", "0", "1", "(1", "2.5", "(2.5", "3", "-1"}
	edgeBounds     = []string{"x", "(", "", " 1", "nan", "1e400", "((1", "0x2", "(-inf"}
	indexes        = []string{"0", "1", "-1", "2", "-2", "3", "10", "-100"}
	edgeIndexes    = []string{"x", "9223372036854775807", "-9223372036854775808", "1.0", ""}
	fields         = []string{"f1", "f2", "f3"}
	members        = []string{"m1", "m2", "m3", "m4"}
	elems          = []string{"a", "b", "c", "1"}
	empty          = []string{""}
	// TTLs are long (days) or non-positive (delete), so that nothing expires during a
	// trace on any of the three servers; absolute times are in 2100 and 2101, or long
	// past.
	relSeconds     = []string{"1000000", "2000000", "0", "-1"}
	edgeRelSeconds = []string{"x", "9223372036854775807", "9223372036854775", "-9223372036854775808"}
	relMillis      = []string{"1000000000", "2000000000", "0", "-5"}
	edgeRelMillis  = []string{"x", "9223372036854775807", "1.5"}
	absSeconds     = []string{"4102444800", "4102444801", "4133980800", "1", "0"}
	absMillis      = []string{"4102444800000", "4102444801000", "4133980800000", "1", "0"}
	edgeAbs        = []string{"x", "-1", "9223372036854775807"}
)

func (d *decoder) value() string  { return d.draw(values, edgeValues) }
func (d *decoder) incr() string   { return d.draw(ints, edgeInts) }
func (d *decoder) float() string  { return d.draw(floats, edgeFloats) }
func (d *decoder) score() string  { return d.draw(scores, edgeScores) }
func (d *decoder) bound() string  { return d.draw(bounds, edgeBounds) }
func (d *decoder) index() string  { return d.draw(indexes, edgeIndexes) }
func (d *decoder) field() string  { return d.draw(fields, empty) }
func (d *decoder) member() string { return d.draw(members, empty) }
func (d *decoder) elem() string   { return d.draw(elems, empty) }

// expiry returns an expiry option of SET or GETEX and its argument.
func (d *decoder) expiry() []string {
	switch d.next() % 4 {
	case 0:
		return []string{"EX", d.draw(relSeconds, edgeRelSeconds)}
	case 1:
		return []string{"PX", d.draw(relMillis, edgeRelMillis)}
	case 2:
		return []string{"EXAT", d.draw(absSeconds, edgeAbs)}
	default:
		return []string{"PXAT", d.draw(absMillis, edgeAbs)}
	}
}

// setOpts returns up to three options of SET or GETEX: flags or expiries.
func (d *decoder) setOpts(flags ...string) []string {
	var out []string
	for i := 0; i < 3 && !d.done(); i++ {
		b := d.next()
		if b%3 != 0 {
			break
		}
		if b%2 == 0 {
			out = append(out, d.expiry()...)
		} else {
			out = append(out, flags[b/6%len(flags)])
		}
	}
	return out
}

// pairs returns one to three pairs from a and b, and now and then one item fewer (odd
// arguments).
func (d *decoder) pairs(a, b func() string) []string {
	var out []string
	n := d.next()
	for i := 0; i <= n%3; i++ {
		out = append(out, a(), b())
	}
	if n >= 224 {
		out = out[:len(out)-1]
	}
	return out
}

func cat(parts ...[]string) []string { return slices.Concat(parts...) }

// forms are the command shapes a trace draws from, a family per group. Each returns one
// command; the name is chosen among commands of the same shape.
var forms = []func(d *decoder) []string{
	// keys and expiry
	func(d *decoder) []string {
		return []string{d.pick("DEL", "UNLINK", "EXISTS", "TOUCH"), d.key('s'), d.key('h')}
	},
	func(d *decoder) []string {
		return []string{d.pick("TYPE", "TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME", "PERSIST"), d.key('s')}
	},
	func(d *decoder) []string {
		return []string{d.pick("RENAME", "RENAMENX"), d.key(d.pick("s", "h", "z")[0]), d.key(d.pick("s", "l")[0])}
	},
	func(d *decoder) []string {
		return cat([]string{"EXPIRE", d.key('z'), d.draw(relSeconds, edgeRelSeconds)}, d.opts("NX", "XX", "GT", "LT"))
	},
	func(d *decoder) []string {
		return cat([]string{"PEXPIRE", d.key('h'), d.draw(relMillis, edgeRelMillis)}, d.opts("NX", "XX", "GT", "LT"))
	},
	func(d *decoder) []string {
		return cat([]string{"EXPIREAT", d.key('s'), d.draw(absSeconds, edgeAbs)}, d.opts("NX", "XX", "GT", "LT", "gt"))
	},
	func(d *decoder) []string {
		return cat([]string{"PEXPIREAT", d.key('l'), d.draw(absMillis, edgeAbs)}, d.opts("NX", "XX", "GT", "LT"))
	},
	func(d *decoder) []string {
		return []string{d.pick("TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"), d.key('z')}
	},
	// strings
	func(d *decoder) []string {
		return []string{d.pick("GET", "STRLEN", "GETDEL", "INCR", "DECR"), d.key('s')}
	},
	func(d *decoder) []string {
		return cat([]string{"SET", d.key('s'), d.value()}, d.setOpts("NX", "XX", "GET", "KEEPTTL", "nx", "bogus"))
	},
	func(d *decoder) []string {
		return cat([]string{"GETEX", d.key('s')}, d.setOpts("PERSIST", "persist", "NX", "bogus"))
	},
	func(d *decoder) []string {
		return []string{"SETEX", d.key('s'), d.draw(relSeconds, edgeRelSeconds), d.value()}
	},
	func(d *decoder) []string {
		return []string{"PSETEX", d.key('s'), d.draw(relMillis, edgeRelMillis), d.value()}
	},
	func(d *decoder) []string { return []string{d.pick("SETNX", "GETSET", "APPEND"), d.key('s'), d.value()} },
	func(d *decoder) []string { return []string{"MGET", d.key('s'), d.key('s')} },
	func(d *decoder) []string {
		return cat([]string{d.pick("MSET", "MSETNX")}, d.pairs(func() string { return d.key('s') }, d.value))
	},
	func(d *decoder) []string { return []string{d.pick("INCRBY", "DECRBY"), d.key('s'), d.incr()} },
	func(d *decoder) []string { return []string{"INCRBYFLOAT", d.key('s'), d.float()} },
	// hashes
	func(d *decoder) []string {
		return []string{d.pick("HGET", "HEXISTS", "HSTRLEN"), d.key('h'), d.field()}
	},
	func(d *decoder) []string { return []string{d.pick("HMGET", "HDEL"), d.key('h'), d.field(), d.field()} },
	func(d *decoder) []string {
		return cat([]string{d.pick("HSET", "HMSET"), d.key('h')}, d.pairs(d.field, d.value))
	},
	func(d *decoder) []string { return []string{"HSETNX", d.key('h'), d.field(), d.value()} },
	func(d *decoder) []string {
		return []string{d.pick("HGETALL", "HKEYS", "HVALS", "HLEN"), d.key('h')}
	},
	func(d *decoder) []string { return []string{"HINCRBY", d.key('h'), d.field(), d.incr()} },
	func(d *decoder) []string {
		return []string{"HINCRBYFLOAT", d.key('h'), d.field(), d.draw(floats, edgeHashFloats)}
	},
	// lists
	func(d *decoder) []string {
		// RPUSH twice as often, so that lists fill up
		return cat([]string{d.pick("LPUSH", "RPUSH", "LPUSHX", "RPUSHX", "RPUSH"), d.key('l'), d.elem()}, d.opts(elems...))
	},
	func(d *decoder) []string {
		c := []string{d.pick("LPOP", "RPOP"), d.key('l')}
		if d.next()%2 == 1 {
			c = append(c, d.index())
		}
		return c
	},
	func(d *decoder) []string { return []string{"LLEN", d.key('l')} },
	func(d *decoder) []string {
		// LRANGE twice as often as LTRIM, which empties lists
		return []string{d.pick("LRANGE", "LTRIM", "LRANGE"), d.key('l'), d.index(), d.index()}
	},
	func(d *decoder) []string { return []string{"LINDEX", d.key('l'), d.index()} },
	func(d *decoder) []string { return []string{d.pick("LSET", "LREM"), d.key('l'), d.index(), d.elem()} },
	func(d *decoder) []string {
		return []string{"LINSERT", d.key('l'), d.pick("BEFORE", "AFTER", "after", "middle"), d.elem(), d.elem()}
	},
	// sorted sets
	func(d *decoder) []string {
		return cat([]string{"ZADD", d.key('z')}, d.opts("NX", "XX", "GT", "LT", "CH", "INCR"), d.pairs(d.score, d.member))
	},
	func(d *decoder) []string { return []string{"ZINCRBY", d.key('z'), d.score(), d.member()} },
	func(d *decoder) []string {
		return []string{d.pick("ZREM", "ZMSCORE"), d.key('z'), d.member(), d.member()}
	},
	func(d *decoder) []string {
		return []string{d.pick("ZSCORE", "ZRANK", "ZREVRANK"), d.key('z'), d.member()}
	},
	func(d *decoder) []string { return []string{"ZCARD", d.key('z')} },
	func(d *decoder) []string {
		return []string{d.pick("ZCOUNT", "ZREMRANGEBYSCORE"), d.key('z'), d.bound(), d.bound()}
	},
	func(d *decoder) []string {
		return []string{d.pick("ZREVRANGE", "ZREMRANGEBYRANK"), d.key('z'), d.index(), d.index()}
	},
	func(d *decoder) []string {
		c := []string{"ZRANGE", d.key('z')}
		switch d.next() % 3 {
		case 0:
			c = append(c, d.index(), d.index())
		case 1:
			c = append(c, d.bound(), d.bound(), "BYSCORE")
		default:
			c = append(c, d.bound(), d.bound())
		}
		c = append(c, d.opts("WITHSCORES", "REV", "BYSCORE", "withscores")...)
		if d.next()%3 == 1 {
			c = append(c, "LIMIT", d.index(), d.index())
		}
		return c
	},
	func(d *decoder) []string {
		c := cat([]string{d.pick("ZRANGEBYSCORE", "ZREVRANGEBYSCORE"), d.key('z'), d.bound(), d.bound()}, d.opts("WITHSCORES"))
		if d.next()%3 == 1 {
			c = append(c, "LIMIT", d.index(), d.index())
		}
		return c
	},
	func(d *decoder) []string {
		c := []string{d.pick("ZPOPMIN", "ZPOPMAX"), d.key('z')}
		if d.next()%2 == 1 {
			c = append(c, d.index())
		}
		return c
	},
	// fill a sorted set, so that ranges have something to work on
	func(d *decoder) []string {
		return []string{"ZADD", d.key('z'), d.score(), d.member(), d.score(), d.member()}
	},
	// server, errors
	func(d *decoder) []string { return []string{d.pick("PING", "ECHO"), d.value()} },
	func(d *decoder) []string {
		// wrong arity
		return []string{d.pick("GET", "HGET", "ZSCORE", "INCRBY", "TTL", "SETEX", "LINDEX", "LSET", "PING"), d.key('s'), "a", "b", "c"}
	},
	func(d *decoder) []string { return []string{"NOSUCHCMD", d.key('s')} },
}

// decodeTrace decodes data into at most maxCommands commands. A command's first byte b
// chooses its form (b mod the number of forms) and, when b / the number of forms is 1,
// runs it through EVAL; each argument takes a byte or two after it. One byte value in
// sixteen also lower-cases the command name.
func decodeTrace(data []byte) []command {
	d := &decoder{data: data}
	var tr []command
	for len(tr) < maxCommands && !d.done() {
		tr = append(tr, d.command())
	}
	return tr
}

// command decodes one command of a trace.
func (d *decoder) command() command {
	b := d.next()
	c := command{args: forms[b%len(forms)](d), eval: b/len(forms) == 1}
	if d.next()%16 == 15 {
		c.args[0] = strings.ToLower(c.args[0])
	}
	if !slices.Contains(luahost.Commands(), c.name()) {
		// luahost's error names the unknown command, which Redis's does not (see the
		// luahost package doc): it is compared only outside scripts.
		c.eval = false
	}
	return c
}

// epilogue reads every key back after a trace, so that a command whose reply agreed
// but whose effect did not is caught: its type, its TTL and, for the type its name says,
// its contents (hash fields by name: miniredis lists them in another order).
var epilogue = func() []command {
	var tr []command
	for _, k := range keys {
		tr = append(tr, command{args: []string{"TYPE", k}}, command{args: []string{"PTTL", k}})
		switch k[0] {
		case 's':
			tr = append(tr, command{args: []string{"GET", k}})
		case 'h':
			tr = append(tr, command{args: append([]string{"HMGET", k}, append(fields, "")...)})
		case 'z':
			tr = append(tr, command{args: []string{"ZRANGE", k, "0", "-1", "WITHSCORES"}})
		case 'l':
			tr = append(tr, command{args: []string{"LRANGE", k, "0", "-1"}})
		}
	}
	return tr
}()

// keysOf returns the keys cmd names.
func keysOf(args []string) []string {
	var out []string
	for _, a := range args[1:] {
		if slices.Contains(keys, a) {
			out = append(out, a)
		}
	}
	return out
}

// A divergence is a command form on which miniredis is known to answer otherwise than
// Redis 7.0 does. Real Redis is the reference, and luahost follows it; miniredis is a
// second opinion, so these are not failures of ours.
type divergence struct {
	form   string // the commands it covers, as a reader would search for them
	reason string // what miniredis does instead
	effect effect
	// match reports whether c, to which Redis replied reply, is of the form.
	match func(c command, reply string) bool
}

// effect is what a divergence leaves behind on miniredis.
type effect int

const (
	replyOnly effect = iota // only the reply differs
	state                   // miniredis's keys may hold other values afterwards
	notSent                 // miniredis panics on it, so it is not sent
)

// miniredisDivergences lists every command form where miniredis departs from Redis. A
// command that matches one is not compared on miniredis; when miniredis's state may then
// differ (state, notSent), neither is any later command touching the same keys. Every
// other reply is compared three ways.
var miniredisDivergences = []divergence{
	// every command
	{"EVAL replying an error or an integer beyond 2^53", "miniredis's Lua wraps every error as \"ERR Error compiling script\" with a traceback, so the command runs plainly on miniredis instead, with the same effect and the same reply except for those that Redis's Lua conversion changed: errors gain the script's name, integers pass through a double",
		replyOnly, func(c command, reply string) bool {
			if !c.eval {
				return false
			}
			n, err := strconv.ParseInt(reply, 10, 64)
			return strings.HasPrefix(reply, "(error)") || err == nil && (n > 1<<53 || n < -1<<53)
		}},
	{"an unknown command", "miniredis quotes the name with backticks and ends the message with \", \"",
		replyOnly, func(c command, _ string) bool { return !slices.Contains(luahost.Commands(), c.name()) }},
	{"PING \"\"", "miniredis answers PONG; Redis echoes the empty argument",
		replyOnly, func(c command, _ string) bool { return c.is("PING") && len(c.args) == 2 && c.args[1] == "" }},
	{"an argument \"+1\", \"01\", \"007\", \" 5\", \" 1\", \"-0\" or \"0x10\"", "miniredis reads the first six as integers, as increments or as stored values, where Redis's string2ll refuses them, and refuses hex floats, which Redis's strtold reads",
		state, func(c command, _ string) bool { return c.hasArg(oddNumbers...) }},
	{"INCR, DECR, INCRBY, DECRBY, HINCRBY that overflow", "miniredis wraps around",
		state, func(_ command, reply string) bool { return strings.Contains(reply, "would overflow") }},
	// keys and expiry
	{"EXPIREAT, PEXPIREAT with GT or LT and the key's own expire time", "miniredis's GT and LT take an equal time as greater or less",
		replyOnly, func(c command, _ string) bool { return c.keepsExpire }},
	{"EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with two of NX XX GT LT, or a time whose milliseconds overflow", "miniredis parses the time before checking the flags, words the conflicts otherwise, and accepts times past 2^63 ms",
		state, func(c command, _ string) bool {
			return c.is("EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT") && (len(c.args) > 4 || overflows(c.args[2]))
		}},
	// strings
	{"SET, GETEX, SETEX, PSETEX with a TTL that is not a positive integer, an expire time in the past, or one whose milliseconds overflow", "miniredis says \"invalid expire time in set\" unquoted, checks GETEX's TTL before the key, keeps a key set to expire in the past (with a negative TTL) and accepts TTLs past 2^63 ms",
		state, func(c command, _ string) bool { return slices.ContainsFunc(ttlArgs(c), badTTL) }},
	{"SET, GETEX with an option twice or two expiries, SET with NX and XX or with KEEPTTL and an expiry", "miniredis refuses a repeated option (EX EX, PERSIST PERSIST) that Redis takes, and takes KEEPTTL with EX, which Redis refuses",
		state, func(c command, _ string) bool {
			if !c.is("SET", "GETEX") {
				return false
			}
			seen := map[string]bool{}
			for _, a := range c.args[2:] {
				a = strings.ToUpper(a)
				if seen[a] && isSetFlag(a) {
					return true
				}
				seen[a] = true
			}
			ttls := len(ttlArgs(c))
			return ttls > 1 || seen["NX"] && seen["XX"] || seen["KEEPTTL"] && ttls > 0
		}},
	{"GETEX on a key of another type", "miniredis sets the TTL before refusing the type",
		state, func(c command, reply string) bool {
			return c.is("GETEX") && strings.HasPrefix(reply, "(error) WRONGTYPE")
		}},
	{"MSET, MSETNX with odd arguments", "miniredis says \"wrong number of arguments for MSET\"",
		replyOnly, func(c command, _ string) bool { return c.is("MSET", "MSETNX") && len(c.args)%2 == 0 }},
	{"APPEND", "it can build a non-canonical integer (\"0\" then \"1\" is \"01\"), as above",
		state, func(c command, _ string) bool { return c.is("APPEND") }},
	{"INCRBYFLOAT, HINCRBYFLOAT with inf or -inf", "miniredis stores inf, which Redis refuses, and then panics adding -inf to it (math/big: addition of infinities with opposite signs)",
		notSent, func(c command, _ string) bool { return c.is("INCRBYFLOAT", "HINCRBYFLOAT") && c.hasArg("inf", "-inf") }},
	{"INCRBYFLOAT, HINCRBYFLOAT with an edge-case increment or a result of more than 15 digits", "miniredis adds in float64 (Redis in long double), accepts inf and refuses hex",
		state, func(c command, reply string) bool {
			return c.is("INCRBYFLOAT", "HINCRBYFLOAT") && (c.hasArg(edgeFloats...) || digits(reply) > 15)
		}},
	// hashes
	{"HGETALL, HKEYS, HVALS", "miniredis lists fields sorted; Redis in insertion order (small hashes)",
		replyOnly, func(c command, _ string) bool { return c.is("HGETALL", "HKEYS", "HVALS") }},
	{"HINCRBY, HINCRBYFLOAT on a field holding a non-number", "miniredis says \"value is not an integer or out of range\" and \"value is not a valid float\"; Redis \"hash value is not an integer\" and \"hash value is not a float\"",
		replyOnly, func(_ command, reply string) bool { return strings.Contains(reply, "ERR hash value is not") }},
	// lists
	{"LPOP, RPOP with a count <= 0, LINDEX, LSET with an edge-case index", "miniredis parses the index before looking up the key, and words a bad count \"index out of range\"",
		replyOnly, func(c command, _ string) bool {
			return c.is("LPOP", "RPOP") && len(c.args) == 3 && !positive(c.args[2]) ||
				c.is("LINDEX", "LSET") && c.hasArg(edgeIndexes...)
		}},
	{"LREM with a count of -2^63", "miniredis removes nothing; Redis removes from the tail",
		state, func(c command, _ string) bool { return c.is("LREM") && c.args[2] == "-9223372036854775808" }},
	// sorted sets
	{"ZADD, ZINCRBY with an edge-case score", "miniredis refuses \" 1\", accepts nan, turns -0 into 0 and formats 5e-324 shortest",
		state, func(c command, _ string) bool { return c.is("ZADD", "ZINCRBY") && c.hasArg(edgeScores...) }},
	{"ZADD with INCR and several pairs, or with a member twice", "miniredis takes INCR with several pairs, and applies GT, LT and CH to each pair against the score before the command",
		state, func(c command, _ string) bool {
			if !c.is("ZADD") {
				return false
			}
			seen := map[string]bool{}
			pairs := 0
			for i := len(c.args) - 1; i-1 >= 2 && !isZaddFlag(c.args[i-1]); i -= 2 {
				if seen[c.args[i]] {
					return true
				}
				seen[c.args[i]] = true
				pairs++
			}
			return pairs > 1 && c.hasArg("INCR")
		}},
	{"ZADD INCR, ZINCRBY whose result is NaN", "miniredis stores -nan; Redis refuses it",
		state, func(_ command, reply string) bool { return strings.Contains(reply, "resulting score is not a number") }},
	{"ZADD with INCR refused by GT, LT, NX or XX", "miniredis answers the new score where Redis answers nil",
		state, func(c command, reply string) bool { return c.is("ZADD") && c.hasArg("INCR") && reply == "nil" }},
	{"ZCOUNT, ZRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZREMRANGEBYSCORE with an edge-case bound", "miniredis refuses bounds Redis's strtod takes: \"(\" (exclusive 0), \" 1\", \"1e400\", \"0x2\"",
		state, func(c command, _ string) bool {
			return c.is("ZCOUNT", "ZRANGE", "ZRANGEBYSCORE", "ZREVRANGEBYSCORE", "ZREMRANGEBYSCORE") && c.hasArg(edgeBounds...)
		}},
	{"ZRANGE with an option twice", "miniredis accepts BYSCORE BYSCORE, REV REV; Redis 7.0 says \"syntax error\"",
		replyOnly, func(c command, _ string) bool {
			if !c.is("ZRANGE") {
				return false
			}
			seen := map[string]bool{}
			for _, a := range c.args[4:] {
				a = strings.ToUpper(a)
				if seen[a] && (a == "BYSCORE" || a == "REV" || a == "WITHSCORES") {
					return true
				}
				seen[a] = true
			}
			return false
		}},
	{"ZRANGE by rank with LIMIT", "miniredis refuses LIMIT before looking at the range; Redis answers [] for an empty range first",
		replyOnly, func(c command, _ string) bool { return c.is("ZRANGE") && c.hasArg("LIMIT") && !c.hasArg("BYSCORE") }},
	{"ZPOPMIN, ZPOPMAX with a count <= 0", "miniredis pops a member where Redis pops none or refuses the count",
		state, func(c command, _ string) bool {
			return c.is("ZPOPMIN", "ZPOPMAX") && len(c.args) == 3 && !positive(c.args[2])
		}},
}

// oddNumbers are the arguments in the pools that miniredis reads as integers and Redis
// does not, and "0x10", which Redis reads as a float and miniredis does not.
var oddNumbers = []string{"+1", "01", "007", " 5", " 1", "-0", "0x10"}

// isZaddFlag reports whether a is a ZADD flag.
func isZaddFlag(a string) bool {
	return slices.Contains([]string{"NX", "XX", "GT", "LT", "CH", "INCR"}, strings.ToUpper(a))
}

func (c command) name() string { return strings.ToUpper(c.args[0]) }

// is reports whether c is one of the commands names.
func (c command) is(names ...string) bool { return slices.Contains(names, c.name()) }

// hasArg reports whether an argument of c after its name is one of vals. A val with an
// upper-case letter (an option name) matches in any case.
func (c command) hasArg(vals ...string) bool {
	for _, a := range c.args[1:] {
		for _, v := range vals {
			if a == v || strings.EqualFold(a, v) && v != strings.ToLower(v) {
				return true
			}
		}
	}
	return false
}

// isSetFlag reports whether a is an option of SET or GETEX.
func isSetFlag(a string) bool {
	return slices.Contains([]string{"NX", "XX", "GET", "KEEPTTL", "PERSIST", "EX", "PX", "EXAT", "PXAT"}, strings.ToUpper(a))
}

// ttlArgs returns the TTLs and expire times of a SET, GETEX, SETEX or PSETEX, expire
// times ahead of 2100 (absolute).
func ttlArgs(c command) []string {
	switch c.name() {
	case "SETEX", "PSETEX":
		return c.args[2:3]
	case "SET", "GETEX":
		var out []string
		for i := 2; i+1 < len(c.args); i++ {
			switch strings.ToUpper(c.args[i]) {
			case "EX", "PX":
				out = append(out, c.args[i+1])
			case "EXAT", "PXAT":
				out = append(out, "@"+c.args[i+1])
			}
		}
		return out
	}
	return nil
}

// digits returns the number of digits in a reply.
func digits(reply string) int {
	n := 0
	for _, r := range reply {
		if r >= '0' && r <= '9' {
			n++
		}
	}
	return n
}

// overflows reports whether a time in seconds or milliseconds is out of range for Redis
// once turned into milliseconds from now.
func overflows(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && (n >= 9223372036854775 || n <= -9223372036854775)
}

// badTTL reports whether a TTL from ttlArgs is not an integer, not positive, overflows,
// or is an expire time in the past (every absolute time in the pools is 2100 or later, or past).
func badTTL(s string) bool {
	abs := strings.HasPrefix(s, "@")
	s = strings.TrimPrefix(s, "@")
	n, err := strconv.ParseInt(s, 10, 64)
	return err != nil || n <= 0 || overflows(s) || abs && n < 4102444800
}

func positive(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n > 0
}

// diverges returns the form of the first divergence c matches, or "", and the strongest
// effect of those it matches.
func diverges(c command, reply string) (form string, eff effect) {
	for _, dv := range miniredisDivergences {
		if dv.match(c, reply) {
			if form == "" {
				form = dv.form
			}
			eff = max(eff, dv.effect)
		}
	}
	return form, eff
}

// canon renders a reply canonically, so that go-redis's and luahost's replies compare as
// strings. A client-side error (not a reply) returns ok false.
func canon(v any, err error) (s string, ok bool) {
	if errors.Is(err, redis.Nil) {
		return "nil", true
	}
	if err != nil {
		var rerr redis.Error
		if errors.As(err, &rerr) {
			return "(error) " + err.Error(), true
		}
		return "(client error) " + err.Error(), false
	}
	return canonValue(v), true
}

func canonValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case int64:
		return strconv.FormatInt(v, 10)
	case string:
		return strconv.Quote(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = canonValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case error:
		return "(error) " + v.Error()
	}
	return fmt.Sprintf("(unexpected %T) %v", v, v)
}

// evalArgs returns the arguments of c as a Redis command: c itself, or EVAL of
// evalScript with c in ARGV.
func evalArgs(c command) []any {
	var out []any
	if c.eval {
		out = append(out, "EVAL", evalScript, "0")
	}
	for _, a := range c.args {
		out = append(out, a)
	}
	return out
}

// runRedis runs tr pipelined on rdb and returns the canonical replies.
func runRedis(ctx context.Context, rdb *redis.Client, tr []command) ([]string, error) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(tr))
	for i, c := range tr {
		cmds[i] = pipe.Do(ctx, evalArgs(c)...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		var rerr redis.Error
		if !errors.As(err, &rerr) {
			return nil, err
		}
	}
	out := make([]string, len(tr))
	for i, c := range cmds {
		s, ok := canon(c.Result())
		if !ok {
			return nil, errors.New(s)
		}
		out[i] = s
	}
	return out, nil
}

// runHost runs tr on h, whose clock reads nowMs, and returns the canonical replies. It
// sets keepsExpire on the commands of tr it applies to.
func runHost(ctx context.Context, h *luahost.Host, nowMs int64, tr []command) []string {
	out := make([]string, len(tr))
	for i, c := range tr {
		tr[i].keepsExpire = keepsExpire(ctx, h, nowMs, c)
		if c.eval {
			out[i], _ = canon(h.Eval(ctx, evalScript, nil, c.args))
		} else {
			out[i], _ = canon(h.Do(ctx, c.args...))
		}
	}
	return out
}

// keepsExpire reports whether c is an EXPIRE, PEXPIRE, EXPIREAT or PEXPIREAT with GT or
// LT that would set its key's expire time, on h, to the one the key has.
func keepsExpire(ctx context.Context, h *luahost.Host, nowMs int64, c command) bool {
	if !c.is("EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT") || !c.hasArg("GT", "LT") {
		return false
	}
	t, err := strconv.ParseInt(c.args[2], 10, 64)
	if err != nil || overflows(c.args[2]) {
		return false
	}
	switch c.name() {
	case "EXPIRE":
		t = nowMs + t*1000
	case "PEXPIRE":
		t += nowMs
	case "EXPIREAT":
		t *= 1000
	}
	at, err := h.Do(ctx, "PEXPIRETIME", c.args[1])
	return err == nil && at == t
}

// racesClock reports whether Redis's reply to c depends on how far its clock moved
// during the trace: c sets a relative TTL that ends at the key's expire time on luahost's
// clock, which stands still, but before or after it on Redis's, depending on whether a
// millisecond passed since the key's TTL was set.
func racesClock(c command) bool { return c.keepsExpire && c.is("EXPIRE", "PEXPIRE") }

// sameReply reports whether two replies to c agree. TTLs and expire times of keys given
// a relative TTL depend on when each server ran the command; they agree within two
// seconds plus span, the time the runs took.
func sameReply(c command, a, b string, span time.Duration) bool {
	if a == b {
		return true
	}
	var tolerance int64
	switch c.name() {
	case "TTL", "EXPIRETIME":
		tolerance = 2 + int64(span/time.Second) + 1
	case "PTTL", "PEXPIRETIME":
		tolerance = 2000 + span.Milliseconds() + 1
	default:
		return false
	}
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || x <= 0 || y <= 0 {
		return false
	}
	return max(x-y, y-x) <= tolerance
}

// servers are the two servers a trace runs on besides luahost.
type servers struct {
	rdb *redis.Client // real Redis
	mr  *miniredis.Miniredis
	mdb *redis.Client // miniredis
}

// startServers starts a private redis-server (each fuzzing worker process has its own,
// so FLUSHDB between inputs is safe) and miniredis.
func startServers(tb testing.TB) *servers {
	srv := redistest.Start(tb)
	s := &servers{rdb: redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2}), mr: miniredis.RunT(tb)}
	s.mdb = redis.NewClient(&redis.Options{Addr: s.mr.Addr(), Protocol: 2})
	tb.Cleanup(func() { s.rdb.Close(); s.mdb.Close() })
	return s
}

// mismatch is a reply that differs from real Redis's.
type mismatch struct {
	c         command
	server    string // "luahost" or "miniredis"
	want, got string
}

// run runs tr on an empty Redis database, an empty miniredis and a fresh luahost, and
// returns the replies that differ from Redis's and a listing of the whole run: every
// command with the three replies, !! marking those that differ, and why a miniredis
// reply was not compared.
func (s *servers) run(ctx context.Context, tr []command) ([]mismatch, string, error) {
	if err := s.rdb.FlushDB(ctx).Err(); err != nil {
		return nil, "", fmt.Errorf("redis: FLUSHDB: %v", err)
	}
	s.mr.FlushAll()
	// The clocks start together: Redis's is the machine's, which the others are set to.
	start := time.Now()
	now := start.Truncate(time.Millisecond)
	s.mr.SetTime(now)
	h := luahost.New(luahost.WithTimeout(0), luahost.WithInstructionLimit(1e9), luahost.WithClock(luahost.NewManualClock(now)), luahost.WithStrictKeys(false))
	want, err := runRedis(ctx, s.rdb, tr)
	if err != nil {
		return nil, "", fmt.Errorf("redis: %v", err)
	}
	got := runHost(ctx, h, now.UnixMilli(), tr)
	forms, effects := make([]string, len(tr)), make([]effect, len(tr))
	var sent []command
	for i, c := range tr {
		forms[i], effects[i] = diverges(c, want[i])
		if effects[i] != notSent {
			c.eval = false // see miniredisDivergences
			sent = append(sent, c)
		}
	}
	replies, err := runRedis(ctx, s.mdb, sent)
	if err != nil {
		return nil, "", fmt.Errorf("miniredis: %v", err)
	}
	span := time.Since(start)
	mini := make([]string, len(tr))
	for i := range tr {
		if effects[i] == notSent {
			mini[i] = "(not sent)"
		} else {
			mini[i], replies = replies[0], replies[1:]
		}
	}

	var diffs []mismatch
	var b strings.Builder
	tainted := map[string]bool{}
	for i, c := range tr {
		mark, note := "  ", ""
		if racesClock(c) {
			fmt.Fprintf(&b, "   %s\n     redis:     %s\n     luahost:   %s\n     miniredis: %s (not compared: the expire time it sets is the key's, so Redis's reply depends on its clock)\n", c, want[i], got[i], mini[i])
			continue
		}
		if !sameReply(c, want[i], got[i], span) {
			mark = "!!"
			diffs = append(diffs, mismatch{c, "luahost", want[i], got[i]})
		}
		ks := keysOf(c.args)
		taint := effects[i] != replyOnly
		touched := slices.ContainsFunc(ks, func(k string) bool { return tainted[k] })
		switch {
		case forms[i] != "":
			note = " (not compared: " + forms[i] + ")"
		case touched:
			note = " (not compared: after a divergence on its keys)"
		case !sameReply(c, want[i], mini[i], span):
			mark, note = "!!", " (later replies on its keys not compared)"
			diffs = append(diffs, mismatch{c, "miniredis", want[i], mini[i]})
			taint = true
		}
		if taint || touched {
			for _, k := range ks {
				tainted[k] = true
			}
		}
		fmt.Fprintf(&b, "%s %s\n     redis:     %s\n     luahost:   %s\n     miniredis: %s%s\n", mark, c, want[i], got[i], mini[i], note)
	}
	return diffs, b.String(), nil
}

// FuzzCommands runs each input's command trace on a real redis-server, on luahost (a
// fresh Host on a ManualClock) and on miniredis (its clock set to the same instant), on
// empty databases, and requires luahost's replies to equal Redis's, and miniredis's too
// except where miniredisDivergences says it differs. Without redis-server it skips, or
// fails under RLCTL_REQUIRE_REDIS=1.
func FuzzCommands(f *testing.F) {
	s := startServers(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := decodeTrace(data)
		if len(tr) == 0 {
			return
		}
		diffs, listing, err := s.run(ctx, append(tr, epilogue...))
		if err != nil {
			t.Fatal(err)
		}
		if len(diffs) > 0 {
			t.Errorf("replies differ (!!) from real Redis's:\n%s", listing)
		}
	})
}

// untraced are the luahost commands no trace draws, and why.
var untraced = map[string]string{
	"TIME": "it answers the machine's clock on Redis and the manual clock on luahost",
}

// TestTracesCoverLuahost requires the decoder to reach every command luahost implements
// (less untraced), so that a command added to luahost is fuzzed or listed there, and to
// stop at maxCommands.
func TestTracesCoverLuahost(t *testing.T) {
	reached := map[string]bool{}
	for b0 := range 256 {
		for b1 := range 256 {
			for _, c := range decodeTrace([]byte{byte(b0), byte(b1)}) {
				reached[c.name()] = true
			}
		}
	}
	for _, name := range luahost.Commands() {
		if _, ok := untraced[name]; !ok && !reached[name] {
			t.Errorf("no trace calls %s: add it to forms, or to untraced with the reason", name)
		}
	}
	for name := range untraced {
		if reached[name] {
			t.Errorf("%s is in untraced, but traces call it", name)
		}
	}
	long := make([]byte, 10_000)
	for i := range long {
		long[i] = byte(i * 7)
	}
	if n := len(decodeTrace(long)); n != maxCommands {
		t.Errorf("a long input decodes into %d commands, want maxCommands = %d", n, maxCommands)
	}
}
