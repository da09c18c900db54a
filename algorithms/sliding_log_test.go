package algorithms

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// This file tests the layouts of the two sorted-set algorithms, sliding_log and
// concurrency: one entry per request whatever its cost, exact under refunds and charges
// that land behind the newest entry, and keys of the per-unit layout of earlier versions
// (testdata/layout1) read and upgraded without admitting more than the limit.

// layout1 returns the engine script whose sliding_log and concurrency are the per-unit
// layout of earlier versions (one sorted-set member per unit of cost), testdata/layout1.
func layout1(tb testing.TB) *Script {
	tb.Helper()
	algs := make([]*Algorithm, len(builtin))
	for i, a := range builtin {
		algs[i] = a
		src, err := os.ReadFile("testdata/layout1/" + a.Name + ".lua")
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			tb.Fatal(err)
		}
		old := *a
		old.Source = string(src)
		algs[i] = &old
	}
	s, err := Assemble(algs)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// zsetHost is a host of the engine script for the layout tests: eval runs a call, do a
// plain command.
type zsetHost struct {
	name string
	eval func(s *Script, c *Call) (Reply, error)
	do   func(args ...string) (any, error)
}

// zsetHosts returns a real Redis (no TTL is persisted: use windows long enough) and a
// luahost whose clock follows the calls, each with the current script and layout1 loaded.
func zsetHosts(t *testing.T) []zsetHost {
	t.Helper()
	scripts := []*Script{Default(), layout1(t)}
	ctx := context.Background()
	rdb := redistest.Shared(t).Client(t)
	for _, s := range scripts {
		if _, err := rdb.ScriptLoad(ctx, s.Source).Result(); err != nil {
			t.Fatal(err)
		}
	}
	clock := luahost.NewManualClock(time.UnixMicro(0))
	h := luahost.New(luahost.WithTimeout(0), luahost.WithInstructionLimit(1e9), luahost.WithClock(clock), luahost.WithCommands(Default().Commands()...))
	for _, s := range scripts {
		if _, err := h.Load(s.Source); err != nil {
			t.Fatal(err)
		}
	}
	var server int64
	return []zsetHost{
		{
			name: "redis",
			eval: func(s *Script, c *Call) (Reply, error) { return redisEval(rdb, s)(c) },
			do: func(args ...string) (any, error) {
				return rdb.Do(ctx, anys(args)...).Result()
			},
		},
		{
			name: "luahost",
			eval: func(s *Script, c *Call) (Reply, error) {
				argv, err := c.Argv()
				if err != nil {
					return Reply{}, err
				}
				server = max(server, c.Now)
				clock.Set(time.UnixMicro(server))
				v, err := h.EvalSHA(ctx, s.SHA1, c.Keys(), argv)
				return decode(c, v, err)
			},
			do: func(args ...string) (any, error) { return h.Do(ctx, args...) },
		},
	}
}

// zrange returns a key's members and scores, "member@score".
func zrange(t *testing.T, h zsetHost, key string) []string {
	t.Helper()
	v, err := h.do("ZRANGE", key, "0", "-1", "WITHSCORES")
	if err != nil {
		t.Fatalf("%s: ZRANGE: %v", h.name, err)
	}
	flat, ok := v.([]any)
	if !ok {
		t.Fatalf("%s: ZRANGE reply %T", h.name, v)
	}
	if len(flat) > 0 {
		if _, pairs := flat[0].([]any); pairs { // RESP3: [member, score] pairs
			var f []any
			for _, p := range flat {
				f = append(f, p.([]any)...)
			}
			flat = f
		}
	}
	var out []string
	for i := 0; i+1 < len(flat); i += 2 {
		score := fmt.Sprint(flat[i+1])
		if f, ok := flat[i+1].(float64); ok { // RESP3 scores are doubles
			score = strconv.FormatFloat(f, 'f', -1, 64)
		}
		out = append(out, fmt.Sprintf("%v@%s", flat[i], score))
	}
	return out
}

// TestSlidingLogOneEntryPerRequest: the log grows by one member per request of any cost
// (charges at one instant share it), and each member is "<before>+<cost>".
func TestSlidingLogOneEntryPerRequest(t *testing.T) {
	a, _ := Lookup("sliding_log")
	for _, h := range zsetHosts(t) {
		t.Run(h.name, func(t *testing.T) {
			key := freshPrefix(t) + ":log"
			params := []int64{1_000_000, 3_600_000_000}
			now := int64(1_800_000_000_000_000)
			charge := func(at, cost int64) {
				t.Helper()
				r, err := h.eval(Default(), &Call{Op: OpCheck, Now: at, Rules: []Rule{{Key: key, Algorithm: a, Cost: cost, Params: params}}})
				if err != nil || !r.Allowed {
					t.Fatalf("charge %d at %d: %+v %v", cost, at, r, err)
				}
			}
			const n = 300
			for i := range int64(n) {
				charge(now+i*1000, 1000)
			}
			if got, err := h.do("ZCARD", key); err != nil || got != int64(n) {
				t.Fatalf("%d requests of cost 1000 left ZCARD %v (%v), want %d", n, got, err, n)
			}
			charge(now+(n-1)*1000, 7) // the newest instant again: the same entry
			got := zrange(t, h, key)
			want := []string{"0+1000@1800000000000000", "1000+1000@1800000000001000"}
			if len(got) != n || !reflect.DeepEqual(got[:2], want) || got[n-1] != fmt.Sprintf("%d+1007@%d", (n-1)*1000, now+(n-1)*1000) {
				t.Fatalf("members %v … %v, want %v … and %d+1007 last", got[:2], got[n-1], want, (n-1)*1000)
			}
		})
	}
}

// genLogTrace draws a trace on one sliding_log key that stresses the cumulative layout:
// charges at the newest instant, behind it (client clocks up to skew behind), and refunds
// of earlier charges at their own instants after later ones.
func genLogTrace(rng *rand.Rand, key string, a *Algorithm, params []int64, n int) ([]Call, []Reply, error) {
	o := NewOracle()
	now := int64(1_700_000_000_000_000) + rng.Int64N(1_000_000_000)
	window := params[1]
	skew := 1 + rng.Int64N(window+2)
	var charged []int64
	var calls []Call
	var replies []Reply
	for range n {
		switch x := rng.IntN(10); {
		case x < 3:
		case x < 8:
			now += rng.Int64N(window/8 + 2)
		default:
			now += rng.Int64N(2*window + 2)
		}
		c := Call{Op: OpCheck, Now: now, Skew: skew}
		if rng.IntN(3) == 0 {
			c.Now -= rng.Int64N(skew + 1)
		}
		cost := 1 + rng.Int64N(params[0])
		switch rng.IntN(10) {
		case 0:
			cost = 0
		case 1:
			cost = params[0] + 1
		}
		if len(charged) > 0 && rng.IntN(4) == 0 {
			c.Op, c.Now = OpRefund, charged[rng.IntN(len(charged))]
			cost = 1 + rng.Int64N(params[0])
		}
		c.Rules = []Rule{{Key: key, Algorithm: a, Cost: cost, Params: params}}
		rep, err := o.Do(&c)
		if err != nil {
			return nil, nil, err
		}
		if c.Op == OpCheck && rep.Allowed && cost > 0 {
			charged = append(charged, c.Now)
		}
		calls, replies = append(calls, c), append(replies, rep)
	}
	return calls, replies, nil
}

// TestSlidingLogOutOfOrder: traces of charges behind the newest entry and refunds of
// older charges match the reference model on a real Redis and on luahost (where keys
// expire on the trace's clock).
func TestSlidingLogOutOfOrder(t *testing.T) {
	a, _ := Lookup("sliding_log")
	for _, ex := range []executor{loadRedis(t), hostExec{script: Default()}} {
		t.Run(ex.name(), func(t *testing.T) {
			t.Parallel()
			rn := &runner{ex: ex, base: freshPrefix(t)}
			for i := range traceCount() {
				rng := rand.New(rand.NewPCG(21, uint64(i)))
				params := []int64{1 + rng.Int64N(20), []int64{5, 1000, 1_000_000}[rng.IntN(3)]}
				calls, want, err := genLogTrace(rng, fmt.Sprintf("t%d", i), a, params, 40)
				if err != nil {
					t.Fatal(err)
				}
				checkTrace(t, rn, fmt.Sprintf("trace %d", i), calls, want)
			}
		})
	}
}

// checkTrace runs calls on rn and fails with the shortest trace that still differs from
// want, the reference model's replies. As in checkTraces, a divergence on a real server
// that a rerun does not repeat and that reads as a key expired on the server's wall clock
// (a loaded machine can let a millisecond TTL pass before the PERSIST after a call) is
// logged, not failed.
func checkTrace(t *testing.T, rn *runner, name string, calls []Call, want []Reply) {
	t.Helper()
	m, _, got, err := rn.compare(calls, want)
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, formatTrace(calls))
	}
	if m < 0 {
		return
	}
	small := rn.shrink(calls[:m+1])
	m2, w, g, err := rn.firstMismatch(small)
	if err == nil && m2 < 0 && rn.ex.name() == "redis" && expiredEarly(calls[:m+1], got) {
		t.Logf("%s: a key expired on the server's wall clock mid-trace (a rerun agrees with the model):\n%s", name, formatTrace(calls[:m+1]))
		return
	}
	t.Fatalf("%s differs from the reference model after:\n%s  want %+v\n  got  %+v", name, formatTrace(small), w, g)
}

// upgradeExec runs a trace's first `at` calls with the per-unit layout's script and the
// rest with the current one, on the same keys: what a deploy of this version meets.
type upgradeExec struct {
	old, cur *Script
	at       int
	rdb      redis.Cmdable // nil: luahost, on the trace's clock
}

func (e upgradeExec) name() string {
	if e.rdb != nil {
		return "redis"
	}
	return "luahost"
}

func (e upgradeExec) run(calls []Call) ([]Reply, error) {
	at := min(e.at, len(calls))
	if e.rdb != nil {
		before, err := redisExec{rdb: e.rdb, script: e.old}.run(calls[:at])
		if err != nil {
			return nil, err
		}
		after, err := redisExec{rdb: e.rdb, script: e.cur}.run(calls[at:])
		return append(before, after...), err
	}
	clock := luahost.NewManualClock(time.UnixMicro(0))
	h := luahost.New(luahost.WithTimeout(0), luahost.WithInstructionLimit(1e9), luahost.WithClock(clock), luahost.WithCommands(e.cur.Commands()...))
	for _, s := range []*Script{e.old, e.cur} {
		if _, err := h.Load(s.Source); err != nil {
			return nil, err
		}
	}
	ctx := context.Background()
	out := make([]Reply, len(calls))
	var server int64
	for i := range calls {
		argv, err := calls[i].Argv()
		if err != nil {
			return nil, err
		}
		s := e.cur
		if i < at {
			s = e.old
		}
		server = max(server, calls[i].Now)
		clock.Set(time.UnixMicro(server))
		v, err := h.EvalSHA(ctx, s.SHA1, calls[i].Keys(), argv)
		if out[i], err = decode(&calls[i], v, err); err != nil {
			return nil, fmt.Errorf("call %d: %w", i+1, err)
		}
	}
	return out, nil
}

// withoutOverrides returns calls without their overrides and owes: the per-unit layout's
// algorithms have no retune, and neither of its algorithms carries a debt.
func withoutOverrides(calls []Call) []Call {
	var out []Call
	for _, c := range calls {
		if c.Op == OpOverride || c.Op == OpOwe {
			continue
		}
		c.Rules = slices.Clone(c.Rules)
		for j := range c.Rules {
			c.Rules[j].Overridable = false
		}
		out = append(out, c)
	}
	return out
}

// sameLeaseCost makes every release name its lease's cost, as the engine's releases do:
// the per-unit layout released part of a lease of cost n > 1 when told a cost 1 < c < n,
// which no caller does and the reference model does not follow (a delay acquires as a
// check does). Partial admissions become
// checks of their units (the per-unit layout's script has no such op).
func sameLeaseCost(calls []Call) {
	cost := map[string]int64{}
	for i := range calls {
		if calls[i].Op == OpMost {
			for j := range calls[i].Rules {
				calls[i].Rules[j].Cost *= calls[i].Units
			}
			calls[i].Op, calls[i].Units = OpCheck, 0
		}
		for j := range calls[i].Rules {
			r := &calls[i].Rules[j]
			if calls[i].Op == OpCheck || calls[i].Op == OpDelay {
				cost[r.Lease] = r.Cost
			} else if c, ok := cost[r.Lease]; ok {
				r.Cost = c
			}
		}
	}
}

// TestUpgradeFromPerUnitLayout: keys the per-unit layout wrote (one member per unit of
// cost) are read and rewritten by the current script exactly as the reference model says,
// on a real Redis and on luahost, wherever in a random trace the upgrade happens.
func TestUpgradeFromPerUnitLayout(t *testing.T) {
	old := layout1(t)
	rdb := loadRedis(t).rdb
	if _, err := rdb.ScriptLoad(context.Background(), old.Source).Result(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sliding_log", "concurrency"} {
		a, _ := Lookup(name)
		for _, r := range []redis.Cmdable{rdb, nil} {
			ex := upgradeExec{old: old, cur: Default(), rdb: r}
			t.Run(name+"/"+ex.name(), func(t *testing.T) {
				t.Parallel()
				upgradeTraces(t, ex, a, 23, sameLeaseCost)
			})
		}
	}
}

// upgradeTraces runs traceCount random traces of a's rules (seeded by seed, without
// overrides, each passed to prepare when it is not nil) on ex, upgraded from ex.old to
// ex.cur after a random call of each, and checks every reply against the reference model.
func upgradeTraces(t *testing.T, ex upgradeExec, a *Algorithm, seed uint64, prepare func([]Call)) {
	t.Helper()
	base := freshPrefix(t)
	for i := range traceCount() {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		calls, _, err := genTrace(rng, sameAlgorithm(a)(rng, fmt.Sprintf("t%d:", i)), 40)
		if err != nil {
			t.Fatal(err)
		}
		calls = withoutOverrides(calls)
		if prepare != nil {
			prepare(calls)
		}
		want, err := expected(calls)
		if err != nil {
			t.Fatal(err)
		}
		ex := ex
		ex.at = rng.IntN(len(calls) + 1)
		rn := &runner{ex: ex, base: fmt.Sprintf("%s:%d", base, i)}
		checkTrace(t, rn, fmt.Sprintf("trace %d, upgraded after call %d,", i, ex.at), calls, want)
	}
}

// TestSlidingLogRenumbers: a log whose running total nears 2^52 is renumbered from 0 by
// the charge that would pass it, and reads the same before and after.
func TestSlidingLogRenumbers(t *testing.T) {
	a, _ := Lookup("sliding_log")
	params := []int64{10, 3_600_000_000}
	now := int64(1_800_000_000_000_000)
	for _, h := range zsetHosts(t) {
		t.Run(h.name, func(t *testing.T) {
			key := freshPrefix(t) + ":log"
			const high = 1<<52 - 3
			for i, m := range []string{fmt.Sprint(high-5, "+2"), fmt.Sprint(high-3, "+3")} {
				if _, err := h.do("ZADD", key, strconv.FormatInt(now+int64(i), 10), m); err != nil {
					t.Fatal(err)
				}
			}
			c := Call{Op: OpCheck, Now: now + 5, Rules: []Rule{{Key: key, Algorithm: a, Cost: 4, Params: params}}}
			r, err := h.eval(Default(), &c)
			if err != nil || !r.Allowed || r.Rules[0].Remaining != 1 {
				t.Fatalf("charge: %+v %v", r, err)
			}
			want := []string{fmt.Sprint("0+2@", now), fmt.Sprint("2+3@", now+1), fmt.Sprint("5+4@", now+5)}
			if got := zrange(t, h, key); !reflect.DeepEqual(got, want) {
				t.Fatalf("members %v, want %v", got, want)
			}
		})
	}
}

// TestConcurrencyOneMemberPerLease: a lease is one member whatever its cost, "<lease>" for
// cost 1 scored by its expiry and "<n>*<lease>" scored by minus its expiry; a release
// removes it, and one of a lease never taken (or of another cost) removes nothing.
func TestConcurrencyOneMemberPerLease(t *testing.T) {
	a, _ := Lookup("concurrency")
	const ttl = 3_600_000_000 // real time expires nothing on Redis
	params := []int64{10, ttl, 0}
	now := int64(1_800_000_000_000_000)
	for _, h := range zsetHosts(t) {
		t.Run(h.name, func(t *testing.T) {
			key := freshPrefix(t) + ":leases"
			do := func(op Op, lease string, cost int64) Reply {
				t.Helper()
				r, err := h.eval(Default(), &Call{Op: op, Now: now, Rules: []Rule{{Key: key, Algorithm: a, Cost: cost, Params: params, Lease: lease}}})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			do(OpCheck, "a", 1)
			do(OpCheck, "b", 3)
			if r := do(OpCheck, "c", 7); r.Allowed || r.Rules[0].Remaining != 6 || r.Rules[0].RetryAfter != ttl {
				t.Fatalf("cost 7 with 4 of 10 held: %+v", r.Rules[0])
			}
			do(OpCheck, "c", 6)
			want := []string{fmt.Sprint("3*b@-", now+ttl), fmt.Sprint("6*c@-", now+ttl), fmt.Sprint("a@", now+ttl)}
			if got := zrange(t, h, key); !reflect.DeepEqual(got, want) {
				t.Fatalf("members %v, want %v", got, want)
			}
			do(OpRefund, "b", 1)
			do(OpRefund, "b", 2)
			do(OpRefund, "x", 3)
			do(OpRefund, "c", 6)
			if got, want := zrange(t, h, key), []string{want[0], want[2]}; !reflect.DeepEqual(got, want) {
				t.Fatalf("after releasing c: members %v, want %v", got, want)
			}
			if r := do(OpCheck, "d", 6); !r.Allowed || r.Rules[0].Remaining != 0 {
				t.Fatalf("cost 6 with 4 of 10 held: %+v", r.Rules[0])
			}
		})
	}
}

// TestSlidingLogUpgradesALargeKey: a key the per-unit layout filled with 25,000 members
// (25 requests of cost 1000) reads as 25,000 units and becomes 26 entries at the next
// charge.
func TestSlidingLogUpgradesALargeKey(t *testing.T) {
	a, _ := Lookup("sliding_log")
	params := []int64{1_000_000, 3_600_000_000}
	now := int64(1_800_000_000_000_000)
	for _, h := range zsetHosts(t) {
		t.Run(h.name, func(t *testing.T) {
			key := freshPrefix(t) + ":log"
			for i := range int64(25) {
				args := []string{"ZADD", key}
				for k := 1; k <= 1000; k++ {
					args = append(args, strconv.FormatInt(now+i, 10), fmt.Sprintf("%d:%d", now+i, k))
				}
				if _, err := h.do(args...); err != nil {
					t.Fatal(err)
				}
			}
			c := Call{Op: OpCheck, Now: now + 100, Rules: []Rule{{Key: key, Algorithm: a, Cost: 1000, Params: params}}}
			r, err := h.eval(Default(), &c)
			if err != nil || !r.Allowed || r.Rules[0].Remaining != 1_000_000-26_000 {
				t.Fatalf("charge: %+v %v", r, err)
			}
			got := zrange(t, h, key)
			if len(got) != 26 || got[0] != fmt.Sprint("0+1000@", now) || got[25] != fmt.Sprint("25000+1000@", now+100) {
				t.Fatalf("%d members %v … %v", len(got), got[0], got[len(got)-1])
			}
		})
	}
}
