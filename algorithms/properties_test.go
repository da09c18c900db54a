package algorithms

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/luahost"
)

// evalFunc runs one call on some host of the engine script.
type evalFunc func(c *Call) (Reply, error)

func redisEval(rdb redis.Cmdable, s *Script) evalFunc {
	return func(c *Call) (Reply, error) {
		argv, err := c.Argv()
		if err != nil {
			return Reply{}, err
		}
		v, err := rdb.EvalSha(context.Background(), s.SHA1, c.Keys(), anys(argv)...).Result()
		return decode(c, v, err)
	}
}

// checkRetryAfter asserts, for random states of every algorithm, that a denied request
// repeated exactly at now+retry_after is allowed and one microsecond earlier is denied.
func checkRetryAfter(t *testing.T, eval evalFunc, states int) {
	for _, a := range builtin {
		t.Run(a.Name, func(t *testing.T) {
			prefix := freshPrefix(t)
			rng := rand.New(rand.NewPCG(7, 0))
			denied := 0
			for i := range states {
				params := randomParams(rng, a)
				key := fmt.Sprintf("%s:retry:%d", prefix, i)
				s, _ := newState(a, params)
				capacity := s.capacity()
				if capacity == 0 {
					continue // a rule that admits nothing: never a finite retry-after
				}
				now := int64(1_800_000_000_000_000) + rng.Int64N(1_000_000_000)
				lease := 0
				call := func(at, cost int64) Reply {
					t.Helper()
					lease++
					c := Call{Op: OpCheck, Now: at, Rules: []Rule{{Key: key, Algorithm: a, Cost: cost, Params: params, Lease: fmt.Sprint("l", lease)}}}
					r, err := eval(&c)
					if err != nil {
						t.Fatalf("%s: %v", key, err)
					}
					return r
				}
				// Build a random state: a burst of charges at random small steps.
				for range rng.IntN(int(2*capacity) + 2) {
					now += rng.Int64N(params[len(params)-1]/3 + 1)
					call(now, 1+rng.Int64N(capacity))
				}
				cost := 1 + rng.Int64N(capacity)
				r := call(now, cost)
				if r.Allowed {
					continue
				}
				retry := r.Rules[0].RetryAfter
				if retry < 1 {
					t.Fatalf("%s %v: denied with retry-after %d", a.Name, params, retry)
				}
				denied++
				if early := call(now+retry-1, cost); early.Allowed {
					t.Fatalf("%s %v cost %d: retry-after %dµs is not sound: allowed 1µs earlier", a.Name, params, cost, retry)
				}
				if at := call(now+retry, cost); !at.Allowed {
					t.Fatalf("%s %v cost %d: retry-after %dµs is not sufficient: denied at it (%+v)", a.Name, params, cost, retry, at.Rules[0])
				}
			}
			if denied < states/10 {
				t.Fatalf("only %d of %d random states denied: the test does not exercise retry-after", denied, states)
			}
		})
	}
}

func TestRedisRetryAfter(t *testing.T) {
	ex := loadRedis(t)
	// Calls run on a virtual clock, so a key with a tiny TTL could expire by real time
	// between calls: each call goes through the trace executor, which persists its keys in
	// the same MULTI/EXEC.
	checkRetryAfter(t, func(c *Call) (Reply, error) {
		r, err := ex.run([]Call{*c})
		if err != nil {
			return Reply{}, err
		}
		return r[0], nil
	}, 300)
}

// TestRedisStackAtomicity: a stacked call denied by one enforcing rule leaves every key
// byte-for-byte unchanged (DUMP) with its TTL not extended; shadow rules never deny.
func TestRedisStackAtomicity(t *testing.T) {
	ex := loadRedis(t)
	rdb := ex.rdb
	eval := redisEval(rdb, ex.script)
	rng := rand.New(rand.NewPCG(11, 0))
	prefix := freshPrefix(t)
	for i := range 200 {
		now := int64(1_800_000_000_000_000) + rng.Int64N(1_000_000_000)
		var rules []Rule
		for j := range 3 {
			a := builtin[rng.IntN(len(builtin))]
			params := paramsAtLeast(rng, a, 3_600_000_000) // nothing expires in real time here
			rules = append(rules, Rule{Key: fmt.Sprintf("%s:atomic:%d:%d", prefix, i, j), Algorithm: a, Params: params, Lease: fmt.Sprint("lease", i, j)})
		}
		// Charge each key a little, then exhaust the third.
		for j := range rules {
			s, _ := newState(rules[j].Algorithm, rules[j].Params)
			r := rules[j]
			r.Cost = 1 + rng.Int64N(s.capacity())
			if j == 2 {
				r.Cost = s.capacity()
			}
			r.Lease += "warm"
			if _, err := eval(&Call{Op: OpCheck, Now: now, Rules: []Rule{r}}); err != nil {
				t.Fatal(err)
			}
		}
		before := snapshot(t, rdb, rules)
		stack := make([]Rule, 3)
		copy(stack, rules)
		for j := range stack {
			stack[j].Cost = 1
		}
		rep, err := eval(&Call{Op: OpCheck, Now: now, Rules: stack})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Allowed || rep.Decider == 0 {
			t.Fatalf("stack %d: allowed with an exhausted third rule: %+v", i, rep)
		}
		after := snapshot(t, rdb, rules)
		for j := range rules {
			if before[j].dump != after[j].dump {
				t.Fatalf("stack %d: denied call changed key %d (%s)", i, j+1, rules[j].Algorithm.Name)
			}
			if after[j].pttl > before[j].pttl {
				t.Fatalf("stack %d: denied call extended key %d's TTL from %v to %v", i, j+1, before[j].pttl, after[j].pttl)
			}
		}
		// The same stack with the exhausted rule in shadow mode is decided by rules 1-2.
		stack[2].Shadow = true
		stack[2].Lease += "shadow"
		rep, err = eval(&Call{Op: OpCheck, Now: now, Rules: stack})
		if err != nil {
			t.Fatal(err)
		}
		want := rep.Rules[0].Allowed && rep.Rules[1].Allowed
		if rep.Allowed != want || rep.Rules[2].Allowed {
			t.Fatalf("stack %d with shadow rule: %+v, want allowed=%v decided by enforcing rules only", i, rep, want)
		}
	}
}

type keySnapshot struct {
	dump string
	pttl time.Duration
}

func snapshot(t *testing.T, rdb redis.Cmdable, rules []Rule) []keySnapshot {
	t.Helper()
	ctx := context.Background()
	out := make([]keySnapshot, len(rules))
	for i, r := range rules {
		d, err := rdb.Dump(ctx, r.Key).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		out[i] = keySnapshot{dump: d, pttl: rdb.PTTL(ctx, r.Key).Val()}
	}
	return out
}

// TestRedisTTLCoversReset: on the server clock, a charged key's TTL covers its reset-after,
// so Redis never drops state that still limits anyone.
func TestRedisTTLCoversReset(t *testing.T) {
	ex := loadRedis(t)
	rdb := ex.rdb
	ctx := context.Background()
	eval := redisEval(rdb, ex.script)
	rng := rand.New(rand.NewPCG(13, 0))
	prefix := freshPrefix(t)
	for i := range 500 {
		a := builtin[i%len(builtin)]
		params := paramsAtLeast(rng, a, 1_000_000) // TTLs of a second or more: the key is still there to measure
		key := fmt.Sprintf("%s:ttl:%d", prefix, i)
		s, _ := newState(a, params)
		start := time.Now()
		rep, err := eval(&Call{Op: OpCheck, Now: ServerTime, Rules: []Rule{{Key: key, Algorithm: a, Cost: 1 + rng.Int64N(s.capacity()), Params: params, Lease: "l"}}})
		if err != nil {
			t.Fatal(err)
		}
		pttl := rdb.PTTL(ctx, key).Val()
		elapsed := time.Since(start)
		if !rep.Allowed {
			t.Fatalf("%s: first charge denied: %+v", a.Name, rep)
		}
		if pttl < 0 {
			t.Fatalf("%s %v: key has no TTL (%v)", a.Name, params, pttl)
		}
		if reset := time.Duration(rep.Rules[0].ResetAfter) * time.Microsecond; pttl+elapsed+time.Millisecond < reset {
			t.Fatalf("%s %v: TTL %v (+%v elapsed) does not cover reset-after %v", a.Name, params, pttl, elapsed, reset)
		}
	}
}

// TestRedisRejectsMalformedCalls: the dispatcher answers a malformed ARGV with an RLCTL
// error reply, never a Lua runtime error or a silent misparse.
func TestRedisRejectsMalformedCalls(t *testing.T) {
	ex := loadRedis(t)
	ctx := context.Background()
	ok := []string{Protocol, "check", "1800000000000000", "", "", "1", "gcra", "1", "0", "10", "1000000", "5"}
	with := func(i int, vs ...string) []string { // ok with ok[i:] replaced by vs
		return append(append([]string{}, ok[:i]...), vs...)
	}
	cases := map[string]struct {
		keys []string
		argv []string
	}{
		"protocol":        {[]string{"k"}, with(0, append([]string{"1"}, ok[1:]...)...)},
		"op":              {[]string{"k"}, with(1, append([]string{"nope"}, ok[2:]...)...)},
		"now":             {[]string{"k"}, with(2, append([]string{"soon"}, ok[3:]...)...)},
		"deadline":        {[]string{"k"}, with(3, append([]string{"later"}, ok[4:]...)...)},
		"deadline passed": {[]string{"k"}, with(3, append([]string{"1"}, ok[4:]...)...)},
		"skew":            {[]string{"k"}, with(4, append([]string{"-5"}, ok[5:]...)...)},
		"count":           {[]string{"k", "k2"}, ok},
		"algorithm":       {[]string{"k"}, with(6, append([]string{"magic"}, ok[7:]...)...)},
		"cost":            {[]string{"k"}, with(7, append([]string{"-1"}, ok[8:]...)...)},
		"param":           {[]string{"k"}, with(9, "0", "1000000", "5")},
		"fraction":        {[]string{"k"}, with(9, "1.5", "1000000", "5")},
		"short":           {[]string{"k"}, ok[:11]},
		"long":            {[]string{"k"}, with(len(ok), "extra")},
		"range":           {[]string{"k"}, with(9, "1", "9007199254740992", "9007199254740992")},
		"duplicate":       {[]string{"k", "k"}, append(with(5, "2"), append(append([]string{}, ok[6:]...), ok[6:]...)...)},
		"huge number":     {[]string{"k"}, with(2, append([]string{"1e300"}, ok[3:]...)...)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ex.rdb.EvalSha(ctx, ex.script.SHA1, c.keys, anys(c.argv)...).Result()
			var rerr redis.Error
			if err == nil || !errors.As(err, &rerr) || rerr.Error()[:5] != "RLCTL" {
				t.Fatalf("want an RLCTL error reply, got %v", err)
			}
		})
	}
	if _, err := ex.rdb.EvalSha(ctx, ex.script.SHA1, []string{"k-ok"}, anys(ok)...).Result(); err != nil {
		t.Fatalf("the well-formed call fails: %v", err)
	}
}

func TestLuahostRetryAfter(t *testing.T) {
	s := Default()
	clock := luahost.NewManualClock(time.UnixMicro(0))
	h := luahost.New(luahost.WithTimeout(0), luahost.WithInstructionLimit(1e9), luahost.WithClock(clock), luahost.WithCommands(s.Commands()...))
	if _, err := h.Load(s.Source); err != nil {
		t.Fatal(err)
	}
	checkRetryAfter(t, func(c *Call) (Reply, error) {
		argv, err := c.Argv()
		if err != nil {
			return Reply{}, err
		}
		clock.Set(time.UnixMicro(c.Now))
		v, err := h.EvalSHA(context.Background(), s.SHA1, c.Keys(), argv)
		return decode(c, v, err)
	}, 300)
}

// A gcra key in the hash layout of earlier versions reads as no state on Redis and on
// luahost alike, and the next charge replaces it with the string layout: an upgrade
// forgets at most one refill's worth of each key, and never fails a request.
func TestGcraReadsAnOldLayoutAsEmpty(t *testing.T) {
	s := Default()
	gcra, _ := Lookup("gcra")
	call := Call{Op: OpCheck, Now: 1_800_000_000_000_000, Rules: []Rule{{Key: "old", Algorithm: gcra, Cost: 1, Params: []int64{1, 1_000_000, 3}}}}
	argv, err := call.Argv()
	if err != nil {
		t.Fatal(err)
	}
	ex := loadRedis(t)
	ctx := context.Background()
	clock := luahost.NewManualClock(time.UnixMicro(call.Now))
	h := luahost.New(luahost.WithTimeout(0), luahost.WithInstructionLimit(1e9), luahost.WithClock(clock), luahost.WithCommands(s.Commands()...))
	if _, err := h.Load(s.Source); err != nil {
		t.Fatal(err)
	}
	for name, run := range map[string]func() (any, string, error){
		"redis": func() (any, string, error) {
			ex.rdb.Del(ctx, "old")
			ex.rdb.HSet(ctx, "old", "t", call.Now+10_000_000, "r", 0)
			v, err := ex.rdb.EvalSha(ctx, s.SHA1, call.Keys(), anys(argv)...).Result()
			typ, _ := ex.rdb.Type(ctx, "old").Result()
			return v, typ, err
		},
		"luahost": func() (any, string, error) {
			if _, err := h.Do(ctx, "HSET", "old", "t", "1800000010000000", "r", "0"); err != nil {
				return nil, "", err
			}
			v, err := h.EvalSHA(ctx, s.SHA1, call.Keys(), argv)
			typ, _ := h.Do(ctx, "TYPE", "old")
			return v, fmt.Sprint(typ), err
		},
	} {
		v, typ, err := run()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rep, err := DecodeReply(v, 1)
		if err != nil || !rep.Allowed || rep.Rules[0].Remaining != 2 || typ != "string" {
			t.Errorf("%s: %+v %v, key type %s", name, rep, err, typ)
		}
	}
}
