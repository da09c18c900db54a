package algorithms

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// TestFastRulesMatchTheirAlgorithms holds every fast rule (fast.go) to its algorithm's
// Lua: the same random calls (checks of every cost from peeks to more than the limit, in
// stacks with another rule, refunds, owes that leave the key in debt, client clocks that
// go back, clock skew), on one host to a script where the rule is compiled and so decided
// by its fast check and commit, and on another to a script where the same rule is written
// out and decided by its algorithm's functions. Every reply must be the same, and so must the rule's key
// afterwards: its type, its value or fields, and its TTL.
func TestFastRulesMatchTheirAlgorithms(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 19))
	other, _ := Lookup("fixed_window")
	for _, name := range []string{"gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_window"} {
		a, _ := Lookup(name)
		for round := range 12 {
			params := fastParams(r, name, round)
			c := &Compiled{Algorithm: a, Params: params}
			if f, _ := fastCall(c); f == "" {
				t.Fatalf("%s %v: no fast rule", name, params)
			}
			t.Run(fmt.Sprintf("%s/%v", name, params), func(t *testing.T) {
				fastMatches(t, r, a, params, other)
			})
		}
	}
}

// fastParams draws parameters for name: small and large, for gcra both a whole cell
// (the TAT an integer) and not (rounds of odd number), and in the last round a limit of 0
// where the algorithm takes one (a rule that admits nothing).
func fastParams(r *rand.Rand, name string, round int) []int64 {
	if a, _ := Lookup(name); round == 11 && a.Params[0].Min() == 0 {
		p := fastParams(r, name, round-1)
		p[0] = 0
		return p
	}
	small := round%3 == 0
	count := func() int64 {
		if small {
			return 1 + r.Int64N(4)
		}
		return 1 + r.Int64N(200)
	}
	span := func() int64 {
		if small {
			return 1 + r.Int64N(3000)
		}
		return 1 + r.Int64N(120_000_000)
	}
	switch name {
	case "gcra":
		rate, period := count(), span()
		if round%2 == 1 && rate > 1 {
			period = period/rate*rate + 1 // not a whole number of microseconds a cell
		}
		return []int64{rate, max(period, 1), count()}
	case "token_bucket", "leaky_bucket":
		return []int64{count(), count(), span()}
	}
	return []int64{count(), span()}
}

func fastMatches(t *testing.T, r *rand.Rand, a *Algorithm, params []int64, other *Algorithm) {
	ctx := context.Background()
	otherParams := []int64{3, 5000}
	fast, err := Assemble(builtin, &Compiled{Algorithm: a, Params: params}, &Compiled{Algorithm: other, Params: otherParams})
	if err != nil {
		t.Fatal(err)
	}
	plain := Default()
	start := time.UnixMicro(1_800_000_000_000_000)
	clocks := []*luahost.ManualClock{luahost.NewManualClock(start), luahost.NewManualClock(start)}
	hosts := make([]*luahost.Host, 2)
	for i, s := range []*Script{fast, plain} {
		hosts[i] = luahost.New(luahost.WithClock(clocks[i]), luahost.WithCommands(s.Commands()...))
		if _, err := hosts[i].FunctionLoad(s.Library, true); err != nil {
			t.Fatal(err)
		}
	}
	limit := params[0]
	if a.Name == "gcra" {
		limit = params[2]
	}
	now := start.UnixMicro()
	const key, otherKey = "fast:k", "fast:other"
	for step := range 400 {
		advance := r.Int64N(3 * max(params[len(params)-1], 1) / max(limit, 1))
		clocks[0].Advance(time.Duration(advance) * time.Microsecond)
		clocks[1].Advance(time.Duration(advance) * time.Microsecond)
		now += advance
		call := Call{Op: OpCheck, Now: ServerTime}
		if r.IntN(3) == 0 { // a client clock, up to a few windows behind or ahead
			call.Now = now + r.Int64N(2*advance+2001) - advance - 1000
			call.Skew = r.Int64N(5000)
		}
		if r.IntN(8) == 0 {
			call.Op = OpRefund
		} else if a.CarriesDebt() && r.IntN(10) == 0 {
			call.Op = OpOwe // a debt: the key past its limit, which the fast check reads
		}
		cost := r.Int64N(limit + 3)
		if r.IntN(2) == 0 {
			cost = 1
		}
		rules := []Rule{{Key: key, Algorithm: a, Cost: cost, Params: params}}
		if r.IntN(3) == 0 {
			rules = append(rules, Rule{Key: otherKey, Algorithm: other, Cost: 1, Params: otherParams})
			if r.IntN(2) == 0 {
				rules[0], rules[1] = rules[1], rules[0]
			}
		}
		var replies [2]string
		for i, s := range []*Script{fast, plain} {
			c := call
			c.Rules = slices.Clone(rules)
			if s == fast {
				for j := range c.Rules {
					c.Rules[j].Compiled = fast.Rules[0]
					if c.Rules[j].Key == otherKey {
						c.Rules[j].Compiled = fast.Rules[1]
					}
				}
			}
			argv, err := c.Argv()
			if err != nil {
				t.Fatal(err)
			}
			got, err := hosts[i].FCall(ctx, s.Function, c.Keys(), argv)
			replies[i] = fmt.Sprint(got, err)
		}
		if replies[0] != replies[1] {
			t.Fatalf("step %d, %+v cost %d: the fast rule replied %s, its algorithm %s", step, call, cost, replies[0], replies[1])
		}
		if f, p := dumpKey(ctx, hosts[0], key), dumpKey(ctx, hosts[1], key); f != p {
			t.Fatalf("step %d, %+v cost %d: after the fast rule the key is %s, after its algorithm %s", step, call, cost, f, p)
		}
	}
}

// dumpKey describes key on h: its type, value or fields, and TTL in milliseconds.
func dumpKey(ctx context.Context, h *luahost.Host, key string) string {
	typ, _ := h.Do(ctx, "TYPE", key)
	ttl, _ := h.Do(ctx, "PTTL", key)
	var v any
	switch typ {
	case "string":
		v, _ = h.Do(ctx, "GET", key)
	case "hash":
		v, _ = h.Do(ctx, "HGETALL", key)
	}
	return fmt.Sprint(typ, " ", v, " ttl ", ttl)
}

// TestTriesChargeInFewCommands holds the tries (fast.go) to the commands they save, as a
// real Redis counts them (INFO commandstats): one usual check on the server clock at a
// time, of a rule alone and of the same rule in a stack, the command counts besides the
// FCALL and its clock read. gcra: a key without a TAT takes its charge in one SET ... NX
// GET; a key with one is read by that command and written by a second; a denial writes
// nothing. fixed_window: a window's first charge is HINCRBY, HLEN and PEXPIRE, every
// later one the HINCRBY alone, and one over the limit a second HINCRBY that takes it
// back. A stack another rule denies takes back what it tried (DEL, HINCRBY).
func TestTriesChargeInFewCommands(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	gcra, _ := Lookup("gcra")
	fw, _ := Lookup("fixed_window")
	const hour = 3_600_000_000
	s, err := Assemble(builtin,
		&Compiled{Algorithm: gcra, Params: []int64{1, hour, 2}},
		&Compiled{Algorithm: fw, Params: []int64{2, hour}},
		&Compiled{Algorithm: gcra, Params: []int64{1, hour, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.FunctionLoadReplace(ctx, s.Library).Err(); err != nil {
		t.Fatal(err)
	}
	rule := func(i int, key string) Rule {
		c := s.Rules[i]
		return Rule{Key: key, Algorithm: c.Algorithm, Cost: 1, Params: c.Params, Compiled: c}
	}
	fcall := func(rules ...Rule) []any {
		call := Call{Op: OpCheck, Now: ServerTime, Rules: rules}
		argv, err := call.Argv()
		if err != nil {
			t.Fatal(err)
		}
		reply, err := rdb.FCall(ctx, s.Function, call.Keys(), anys(argv)...).Slice()
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}
	// A rule's first call validates its record, on the general path.
	for i := range s.Rules {
		fcall(rule(i, fmt.Sprint("warm:", i)))
	}
	for i, step := range []struct {
		rules   []Rule
		allowed int64
		want    string
	}{
		{[]Rule{rule(0, "g")}, 1, "set=1"},                      // no TAT: SET ... NX GET sets it
		{[]Rule{rule(0, "g")}, 1, "set=2"},                      // a TAT: read by the SET that leaves it, then written
		{[]Rule{rule(0, "g")}, 0, "set=1"},                      // over the burst: nothing written
		{[]Rule{rule(1, "f")}, 1, "hincrby=1 hlen=1 pexpire=1"}, // the window's first charge
		{[]Rule{rule(1, "f")}, 1, "hincrby=1"},                  // a later one
		{[]Rule{rule(1, "f")}, 0, "hincrby=2"},                  // over the limit: taken back
		// Stacks: each rule tried in turn (two fresh gcra keys, one SET each); when a later
		// rule denies, the key an earlier try charged is deleted.
		{[]Rule{rule(0, "g2"), rule(2, "g3")}, 1, "set=2"},
		{[]Rule{rule(0, "g4"), rule(2, "g3")}, 0, "del=1 set=2"},
		{[]Rule{rule(0, "g4"), rule(1, "f")}, 0, "del=1 hincrby=2 set=1"},
	} {
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		reply := fcall(step.rules...)
		info, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := keyCommands(t, info); reply[0] != step.allowed || got != step.want {
			t.Errorf("step %d (%d rules): allowed %v with commands %q, want %d with %q", i, len(step.rules), reply[0], got, step.allowed, step.want)
		}
	}
	// A key of another type: SET ... GET refuses it, having written nothing; the try reads
	// it as no TAT, as check's GET does, and commit overwrites it.
	if err := rdb.HSet(ctx, "h", "f", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	reply := fcall(rule(0, "h"))
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	typ, _ := rdb.Type(ctx, "h").Result()
	if got := keyCommands(t, info); reply[0] != int64(1) || got != "set=2" || typ != "string" {
		t.Errorf("a hash key: allowed %v with commands %q, then a %s; want 1 with %q, then a string", reply[0], got, typ, "set=2")
	}
}

// keyCommands lists the commands INFO commandstats counts other than the FCALL, its TIME
// and the test's own CONFIG and INFO, as "name=calls" in name order.
func keyCommands(t *testing.T, info string) string {
	calls, err := redistest.CommandCalls(info)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for name, n := range calls {
		if !slices.Contains([]string{"fcall", "time", "info", "config|resetstat"}, name) {
			out = append(out, fmt.Sprintf("%s=%d", name, n))
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}
