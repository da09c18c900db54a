package luahost_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlctl/rlctl/luahost"
)

// traceGen generates random commands over a few keys, with arguments drawn
// from pools rich in edge cases. Keys are placeholders ("$s1", "$h1", "$z1",
// "$l1", ...) that a run replaces with its own prefixed names, so a trace can be
// replayed on fresh keys. Each command mostly uses keys meant for its type,
// and sometimes any key, to reach WRONGTYPE.
type traceGen struct {
	r *rand.Rand
	// absMs is a far-future instant (ms) for absolute expiry times, far
	// above any relative TTL the generator uses, so that GT/LT decisions do
	// not depend on how much real time passed.
	absMs int64
}

func (g *traceGen) pick(pool ...string) string { return pool[g.r.IntN(len(pool))] }

// key returns a key for a command on kind ('s', 'h', 'z', 'l'): one of two
// keys of that kind, or now and then any key.
func (g *traceGen) key(kind byte) string {
	if kind == 'a' || g.r.IntN(10) == 0 {
		kind = "shzl"[g.r.IntN(4)]
	}
	return "$" + string(kind) + strconv.Itoa(1+g.r.IntN(2))
}

// edge returns an edge case now and then, and otherwise a usual value.
func (g *traceGen) edge(usual, edge []string) string {
	if g.r.IntN(5) == 0 {
		return g.pick(edge...)
	}
	return g.pick(usual...)
}

func (g *traceGen) field() string { return g.pick("f1", "f2", "f3", "") }

func (g *traceGen) member() string { return g.pick("m1", "m2", "m3", "m4", "m5", "") }

func (g *traceGen) value() string {
	return g.pick("0", "1", "-1", "10", "abc", "", "9223372036854775807", "-9223372036854775808",
		"3.5", " 5", "007", "+1", "1e3", "-0", "12345678901234567890")
}

// elem is a list element: few distinct ones, so that LREM, LINSERT and
// LPOS-like scans find them.
func (g *traceGen) elem() string { return g.pick("a", "b", "c", "1", "-1", "") }

// float is an INCRBYFLOAT increment. Edge cases reach the limits of C's
// long double: overflow and underflow, subnormals, hex, infinities, and
// string2ld's 5120-byte limit.
func (g *traceGen) float() string { return g.edge(usualFloats, append(edgeFloats, hugeFloats...)) }

// hashFloat is a HINCRBYFLOAT increment: no huge ones, whose sums are
// hundreds of digits long. A hash holding a value over 64 bytes is no
// longer kept in insertion order by Redis (see the package doc), and
// HGETALL would then list it in an order the host does not follow.
func (g *traceGen) hashFloat() string { return g.edge(usualFloats, edgeFloats) }

var (
	usualFloats = []string{"1", "-1", "0.1", "1.5", "-2.5", "3.0e3", "1e-5", "0", "10", "-0", "0.3", "1e17", "-1e-18", "123456789.123456789"}
	edgeFloats  = []string{"inf", "-inf", "nan", "x", "", " 1", "1 ", "0x10", "0x1.8p1", "5e-324", "1e5000", "1e-5000",
		"1e-4940", "-1e-4950", "0x1p-16445", "0x1p-16446", "1.0000000000000000001", "1.8225e-4951", "0x1.0000001p-16446",
		"1\x00x", "0e99999999999", "-0x", ".e1", strings.Repeat("0", 5118) + "1", strings.Repeat("0", 5119) + "1", "Infinity", "1e"}
	hugeFloats = []string{"1e300", "1.18973149535723176502e+4932", "0x1p16383", "0x1.ffffffffffffffffp16383"}
)

func (g *traceGen) incr() string {
	return g.edge(
		[]string{"1", "-1", "0", "100", "-100", "9223372036854775807", "-9223372036854775808"},
		[]string{"x", "1.5", "", "9223372036854775808", " 1", "+1", "01"})
}

func (g *traceGen) score() string {
	return g.edge(
		[]string{"0", "1", "-1", "2.5", "1e-5", "0.1", "+inf", "-inf", "1764472786000000", "-0", "2", "3", "1.5", "1e300", "1764472786000001"},
		[]string{"inf", "nan", "3e400", "1e-400", "0x10", " 1", "1 ", "(1", "", "1e", "1.7976931348623157e308", "x", "5e-324"})
}

func (g *traceGen) bound() string {
	return g.edge(
		[]string{"-inf", "+inf", "(0", "(1", "0", "1", "2.5", "(2.5", "3", "(3", "-1", "(-inf", "1e400", "0.1", "(1764472786000000"},
		[]string{"x", "(", "", " 1", "nan", "0x2", "1e", "((1", "+inf "})
}

func (g *traceGen) index() string {
	return g.edge(
		[]string{"0", "1", "-1", "-2", "2", "10", "-100", "3", "-3"},
		[]string{"x", "9223372036854775807", "-9223372036854775808", "1.0", ""})
}

// relSeconds and relMillis are relative TTLs: large (days), non-positive
// (delete), or invalid.
func (g *traceGen) relSeconds() string {
	return g.pick("1000000", "2000000", "0", "-1", "x", "9223372036854775807", "-9223372036854775808", "9223372036854775")
}

func (g *traceGen) relMillis() string {
	return g.pick("1000000000", "2000000000", "0", "-5", "x", "9223372036854775807")
}

// absMillis and absSeconds are absolute times: in the past, or far ahead.
func (g *traceGen) absMillis() string {
	switch g.r.IntN(4) {
	case 0:
		return g.pick("1", "0", "-1")
	default:
		return strconv.FormatInt(g.absMs+int64(g.r.IntN(3))*1e9, 10)
	}
}

func (g *traceGen) absSeconds() string {
	switch g.r.IntN(4) {
	case 0:
		return g.pick("1", "0", "-1")
	default:
		return strconv.FormatInt(g.absMs/1000+int64(g.r.IntN(3))*1e6, 10)
	}
}

func (g *traceGen) opts(pool ...string) []string {
	var out []string
	for g.r.IntN(3) == 0 {
		out = append(out, g.pick(pool...))
	}
	return out
}

// commandKinds is the kind of key each case of command works on; 'a' is
// any kind.
var commandKinds = strings.Repeat("s", 7) + strings.Repeat("a", 10) + strings.Repeat("h", 8) +
	strings.Repeat("z", 13) + "sss" + "zz" +
	strings.Repeat("s", 11) + strings.Repeat("a", 4) + strings.Repeat("h", 4) + strings.Repeat("z", 3) +
	strings.Repeat("l", 11) + "aa"

// setOpts returns options of SET or GETEX, valid or not: expiries, and
// flags drawn from flags.
func (g *traceGen) setOpts(flags ...string) []string {
	var c []string
	for g.r.IntN(3) == 0 {
		switch g.r.IntN(8) {
		case 0:
			c = append(c, "EX", g.relSeconds())
		case 1:
			c = append(c, "PX", g.relMillis())
		case 2:
			c = append(c, "EXAT", g.absSeconds())
		case 3:
			c = append(c, "PXAT", g.absMillis())
		default:
			c = append(c, g.pick(flags...))
		}
	}
	return c
}

// command returns one random command.
func (g *traceGen) command() []string {
	var c []string
	n := g.r.IntN(len(commandKinds))
	k := g.key(commandKinds[n])
	switch n {
	case 0:
		c = []string{"GET", k}
	case 1:
		c = append([]string{"SET", k, g.value()}, g.setOpts("NX", "XX", "GET", "KEEPTTL", "nx", "get", "EX", "bogus")...)
	case 2:
		c = []string{"MGET", k, g.key(k[1])}
	case 3:
		c = []string{"INCR", k}
	case 4:
		c = []string{"DECR", k}
	case 5:
		c = []string{"INCRBY", k, g.incr()}
	case 6:
		c = []string{"DECRBY", k, g.incr()}
	case 7:
		c = []string{"DEL", k, g.key(k[1])}
	case 8:
		c = []string{"EXISTS", k, g.key(k[1]), k}
	case 9:
		c = []string{"TYPE", k}
	case 10:
		c = append([]string{"EXPIRE", k, g.relSeconds()}, g.opts("NX", "XX", "bogus")...)
	case 11:
		c = append([]string{"PEXPIRE", k, g.relMillis()}, g.opts("NX", "XX")...)
	case 12:
		c = append([]string{"EXPIREAT", k, g.absSeconds()}, g.opts("NX", "XX", "GT", "LT", "gt")...)
	case 13:
		c = append([]string{"PEXPIREAT", k, g.absMillis()}, g.opts("NX", "XX", "GT", "LT")...)
	case 14:
		c = []string{"TTL", k}
	case 15:
		c = []string{"PTTL", k}
	case 16:
		c = []string{"PERSIST", k}
	case 17:
		c = []string{"HGET", k, g.field()}
	case 18:
		c = []string{"HMGET", k, g.field(), g.field()}
	case 19:
		c = []string{g.pick("HSET", "HMSET"), k}
		for n := 1 + g.r.IntN(3); n > 0; n-- {
			c = append(c, g.field(), g.value())
		}
		if g.r.IntN(8) == 0 {
			c = c[:len(c)-1] // odd arguments
		}
	case 20:
		c = []string{"HDEL", k, g.field(), g.field()}
	case 21:
		c = []string{"HGETALL", k}
	case 22:
		c = []string{"HINCRBY", k, g.field(), g.incr()}
	case 23:
		c = []string{"HLEN", k}
	case 24:
		c = []string{"HEXISTS", k, g.field()}
	case 25:
		c = append([]string{"ZADD", k}, g.opts("NX", "XX", "GT", "LT", "CH", "INCR", "ch")...)
		for n := 1 + g.r.IntN(3); n > 0; n-- {
			c = append(c, g.score(), g.member())
		}
		if g.r.IntN(8) == 0 {
			c = c[:len(c)-1]
		}
	case 26:
		c = []string{"ZINCRBY", k, g.score(), g.member()}
	case 27:
		c = []string{"ZREM", k, g.member(), g.member()}
	case 28:
		c = []string{"ZCARD", k}
	case 29:
		c = []string{"ZCOUNT", k, g.bound(), g.bound()}
	case 30:
		c = []string{"ZSCORE", k, g.member()}
	case 31:
		c = []string{"ZRANK", k, g.member()}
	case 32:
		c = []string{"ZRANGE", k}
		switch g.r.IntN(5) {
		case 0: // by rank
			c = append(c, g.index(), g.index())
			c = append(c, g.opts("WITHSCORES", "REV")...)
		case 1, 2: // by score
			c = append(c, g.bound(), g.bound(), "BYSCORE")
			c = append(c, g.opts("WITHSCORES", "REV", "withscores")...)
			if g.r.IntN(2) == 0 {
				c = append(c, "LIMIT", g.index(), g.index())
			}
		default: // anything
			if g.r.IntN(2) == 0 {
				c = append(c, g.index(), g.index())
			} else {
				c = append(c, g.bound(), g.bound())
			}
			c = append(c, g.opts("WITHSCORES", "BYSCORE", "REV", "withscores", "LIMIT")...)
			if g.r.IntN(3) == 0 {
				c = append(c, "LIMIT", g.index(), g.index())
			}
		}
	case 33:
		c = append([]string{"ZREVRANGE", k, g.index(), g.index()}, g.opts("WITHSCORES")...)
	case 34:
		c = append([]string{g.pick("ZRANGEBYSCORE", "ZREVRANGEBYSCORE"), k, g.bound(), g.bound()}, g.opts("WITHSCORES", "WITHSCORES", "REV")...)
		if g.r.IntN(2) == 0 {
			c = append(c, "LIMIT", g.index(), g.index())
		}
	case 35:
		c = []string{"ZREMRANGEBYSCORE", k, g.bound(), g.bound()}
	case 36:
		c = []string{"ZREMRANGEBYRANK", k, g.index(), g.index()}
	case 37:
		c = []string{"ZPOPMIN", k}
		if g.r.IntN(2) == 0 {
			c = append(c, g.index())
		}
	case 38:
		c = []string{g.pick("PING", "ECHO"), g.value()}
	case 39:
		c = []string{"NOSUCHCMD", k}
	case 40:
		// wrong arity
		c = []string{g.pick("GET", "HGET", "ZSCORE", "INCRBY", "ZCOUNT", "TTL", "PING", "SETEX", "PSETEX", "SETNX",
			"GETDEL", "STRLEN", "EXPIRETIME", "LLEN", "LINDEX", "LSET", "ZREVRANK", "HSTRLEN", "INCRBYFLOAT"), k, "a", "b", "c"}
	case 43:
		c = []string{"SETEX", k, g.relSeconds(), g.value()}
	case 44:
		c = []string{"PSETEX", k, g.relMillis(), g.value()}
	case 45:
		c = []string{"SETNX", k, g.value()}
	case 46:
		c = []string{"GETSET", k, g.value()}
	case 47:
		c = []string{"GETDEL", k}
	case 48:
		c = append([]string{"GETEX", k}, g.setOpts("PERSIST", "persist", "EX", "NX", "KEEPTTL", "bogus")...)
	case 49:
		c = []string{"INCRBYFLOAT", k, g.float()}
	case 50, 51:
		c = []string{g.pick("MSET", "MSETNX"), k, g.value()}
		for n := g.r.IntN(3); n > 0; n-- {
			c = append(c, g.key(k[1]), g.value())
		}
		if g.r.IntN(8) == 0 {
			c = c[:len(c)-1] // odd arguments
		}
	case 52:
		c = []string{"APPEND", k, g.value()}
	case 53:
		c = []string{"STRLEN", k}
	case 54:
		c = []string{"UNLINK", k, g.key(k[1])}
	case 55:
		c = []string{"TOUCH", k, g.key(k[1]), k}
	case 56:
		c = []string{"EXPIRETIME", k}
	case 57:
		c = []string{"PEXPIRETIME", k}
	case 58:
		c = []string{"HINCRBYFLOAT", k, g.field(), g.hashFloat()}
	case 59:
		c = []string{"HSETNX", k, g.field(), g.value()}
	case 60:
		c = []string{g.pick("HKEYS", "HVALS"), k}
	case 61:
		c = []string{"HSTRLEN", k, g.field()}
	case 62:
		c = []string{"ZREVRANK", k, g.member()}
	case 63:
		c = []string{"ZPOPMAX", k}
		if g.r.IntN(2) == 0 {
			c = append(c, g.index())
		}
	case 64:
		c = []string{"ZMSCORE", k, g.member(), g.member()}
	case 65:
		c = []string{g.pick("LPUSH", "RPUSH", "LPUSHX", "RPUSHX"), k, g.elem()}
		for n := g.r.IntN(3); n > 0; n-- {
			c = append(c, g.elem())
		}
	case 66:
		c = []string{g.pick("LPOP", "RPOP"), k}
		if g.r.IntN(2) == 0 {
			c = append(c, g.index())
		}
		if g.r.IntN(20) == 0 {
			c = append(c, "1")
		}
	case 67:
		c = []string{"LLEN", k}
	case 68:
		c = []string{"LRANGE", k, g.index(), g.index()}
	case 69:
		c = []string{"LTRIM", k, g.index(), g.index()}
	case 70:
		c = []string{"LINDEX", k, g.index()}
	case 71:
		c = []string{"LSET", k, g.index(), g.elem()}
	case 72:
		c = []string{"LREM", k, g.index(), g.elem()}
	case 73:
		c = []string{"LINSERT", k, g.pick("BEFORE", "AFTER", "after", "middle"), g.elem(), g.elem()}
	case 74, 75:
		// Keep lists long enough for ranges and trims.
		c = []string{"RPUSH", k, g.elem(), g.elem(), g.elem(), g.elem()}
	case 76:
		// Onto a key of any kind, or onto itself.
		c = []string{"RENAME", k, g.pick(g.key('a'), k)}
	case 77:
		c = []string{"RENAMENX", k, g.pick(g.key('a'), k)}
	default:
		// Fill keys with members and fields so that range commands have
		// something to work on.
		c = []string{"ZADD", k, g.score(), g.member(), g.score(), g.member()}
	}
	if g.r.IntN(10) == 0 {
		c[0] = strings.ToLower(c[0])
	}
	return c
}

// trace is a sequence of commands with placeholder keys.
type trace [][]string

// bind replaces the key placeholders with prefixed key names.
func bind(cmd []string, prefix string) []any {
	out := make([]any, len(cmd))
	for i, a := range cmd {
		if len(a) == 3 && a[0] == '$' {
			a = prefix + ":" + a[1:]
		}
		out[i] = a
	}
	return out
}

func bindStrings(cmd []string, prefix string) []string {
	args := bind(cmd, prefix)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a.(string)
	}
	return out
}

// runOn runs t with go-redis (pipelined) against rdb and returns the
// canonical replies.
func runOn(ctx context.Context, rdb *redis.Client, t trace, prefix string) ([]string, error) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(t))
	for i, c := range t {
		cmds[i] = pipe.Do(ctx, bind(c, prefix)...)
	}
	if _, err := pipe.Exec(ctx); err != nil && !isRedisError(err) {
		return nil, err
	}
	out := make([]string, len(t))
	for i, c := range cmds {
		out[i] = canon(c.Result())
	}
	return out, nil
}

func isRedisError(err error) bool {
	_, ok := err.(redis.Error)
	return ok || err == redis.Nil
}

// runOnHost runs t on a fresh host and returns the canonical replies.
func runOnHost(ctx context.Context, t trace, prefix string) []string {
	h := luahost.New()
	out := make([]string, len(t))
	for i, c := range t {
		out[i] = canon(h.Do(ctx, bindStrings(c, prefix)...))
	}
	return out
}

// runBoth runs t on rdb and then on a fresh host, and returns both replies
// and how many milliseconds the two runs took together.
func runBoth(ctx context.Context, rdb *redis.Client, t trace, prefix string) (want, got []string, spanMs int64, err error) {
	start := time.Now()
	if want, err = runOn(ctx, rdb, t, prefix); err != nil {
		return nil, nil, 0, err
	}
	got = runOnHost(ctx, t, prefix)
	return want, got, time.Since(start).Milliseconds(), nil
}

// sameReply reports whether two replies to cmd agree. TTL and PTTL of keys
// expiring in days depend on when each server ran the command, and the
// expire time of a key given a relative TTL on when each set it; they agree
// within two seconds plus spanMs, the time both runs took.
func sameReply(cmd []string, a, b string, spanMs int64) bool {
	if a == b {
		return true
	}
	tolerance := int64(0)
	switch strings.ToUpper(cmd[0]) {
	case "TTL", "EXPIRETIME":
		tolerance = 2 + (spanMs+999)/1000
	case "PTTL", "PEXPIRETIME":
		tolerance = 2000 + spanMs
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

// firstMismatch returns the index of the first reply of t that differs
// between a and b, or -1.
func firstMismatch(t trace, a, b []string, spanMs int64) int {
	for i := range a {
		if !sameReply(t[i], a[i], b[i], spanMs) {
			return i
		}
	}
	return -1
}

var traceCount = flag.Int("luahost.traces", 8, "number of seeded random traces TestTracesMatchRedis compares")

// TestTracesMatchRedis runs seeded random command traces on the real server
// and on the host and requires identical replies; a mismatch is reported
// with the shortest trace found that still shows it.
func TestTracesMatchRedis(t *testing.T) {
	t.Parallel()
	rdb := realRedis(t)
	ctx := context.Background()
	for seed := uint64(1); seed <= uint64(*traceCount); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			tr := genTrace(seed, 3000)
			want, got, span, err := runBoth(ctx, rdb, tr, keyPrefix(t))
			if err != nil {
				t.Fatal(err)
			}
			i := firstMismatch(tr, want, got, span)
			if i < 0 {
				return
			}
			short := shrink(t, tr[:i+1], func(cand trace) bool {
				w, g, span, err := runBoth(ctx, rdb, cand, keyPrefix(t))
				if err != nil {
					t.Fatal(err)
				}
				return firstMismatch(cand, w, g, span) >= 0
			})
			w, g, span, _ := runBoth(ctx, rdb, short, keyPrefix(t))
			var b strings.Builder
			for j, c := range short {
				mark := "  "
				if !sameReply(c, w[j], g[j], span) {
					mark = "!!"
				}
				fmt.Fprintf(&b, "%s %q\n     redis:   %s\n     luahost: %s\n", mark, c, w[j], g[j])
			}
			t.Errorf("seed %d: reply %d of %d differs; shrunk to %d commands:\n%s", seed, i, len(tr), len(short), b.String())
		})
	}
}

func genTrace(seed uint64, n int) trace {
	g := &traceGen{
		r:     rand.New(rand.NewPCG(seed, 0x1a2b3c)),
		absMs: (time.Now().UnixMilli()/1e9 + 10) * 1e9, // ~115 days ahead, rounded so traces are stable for a while
	}
	tr := make(trace, n)
	for i := range tr {
		tr[i] = g.command()
	}
	return tr
}

// shrink returns a shorter trace that still fails, removing chunks of
// commands (halves, quarters, ... single commands) while failing stays
// true, within a budget of replays.
func shrink(t *testing.T, tr trace, fails func(trace) bool) trace {
	budget := 3000
	for chunk := len(tr) / 2; chunk >= 1; chunk /= 2 {
		for start := 0; start+chunk <= len(tr) && budget > 0; {
			cand := append(append(trace{}, tr[:start]...), tr[start+chunk:]...)
			budget--
			if len(cand) > 0 && fails(cand) {
				tr = cand
			} else {
				start += chunk
			}
		}
	}
	if budget <= 0 {
		t.Logf("shrinking stopped at its budget; the trace may not be minimal")
	}
	return tr
}

// TestShrink checks the trace shrinker on a failure that needs two commands
// in order: it must find exactly those two.
func TestShrink(t *testing.T) {
	tr := genTrace(42, 500)
	tr[123] = []string{"SET", "$s1", "needle"}
	tr[321] = []string{"GET", "$s1"}
	fails := func(c trace) bool {
		set := false
		for _, cmd := range c {
			switch {
			case cmd[0] == "SET" && cmd[2] == "needle":
				set = true
			case set && cmd[0] == "GET" && cmd[1] == "$s1":
				return true
			}
		}
		return false
	}
	got := shrink(t, tr, fails)
	if len(got) != 2 || !fails(got) {
		t.Errorf("shrink = %q, want a SET needle and a GET", got)
	}
}
