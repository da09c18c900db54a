package native

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/luahost"
)

func luaDecide(t *testing.T, h *luahost.Host, s *algorithms.Script, c *algorithms.Call) (algorithms.Reply, error) {
	t.Helper()
	argv, err := c.Argv()
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.FCall(context.Background(), s.Function, c.Keys(), argv)
	if err != nil {
		return algorithms.Reply{}, err
	}
	return algorithms.DecodeCallReply(c, v)
}

func TestQuickAgainstLuahost(t *testing.T) {
	s := algorithms.Default()
	names := []string{"gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_window"}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		clock := luahost.NewManualClock(time.UnixMicro(1_700_000_000_000_000 + rng.Int64N(1e12)))
		ref := luahost.New(luahost.WithClock(clock))
		nh := luahost.New(luahost.WithClock(clock))
		for _, h := range []*luahost.Host{ref, nh} {
			if _, err := h.FunctionLoad(s.Library, true); err != nil {
				t.Fatal(err)
			}
		}
		st := New(nh)
		type rk struct {
			key    string
			a      *algorithms.Algorithm
			params []int64
		}
		var keys []rk
		for i := range 1 + rng.IntN(4) {
			a, _ := s.Algorithm(names[rng.IntN(len(names))])
			var p []int64
			for _, pr := range a.Params {
				switch pr.Kind {
				case algorithms.Count:
					p = append(p, 1+rng.Int64N(12))
				case algorithms.Duration:
					p = append(p, []int64{1, 7, 1000, 999_999, 1_000_000}[rng.IntN(5)]+rng.Int64N(3))
				case algorithms.Rate:
					p = append(p, 1+rng.Int64N(7), []int64{1, 3, 1000, 1_000_000}[rng.IntN(4)]+rng.Int64N(5))
				}
			}
			if a.Validate(p) != nil {
				continue
			}
			keys = append(keys, rk{fmt.Sprint("k", i), a, p})
		}
		if len(keys) == 0 {
			continue
		}
		for step := range 60 {
			clock.Advance(time.Duration(rng.Int64N(3)) * []time.Duration{time.Microsecond, time.Millisecond, 300 * time.Millisecond}[rng.IntN(3)])
			c := algorithms.Call{Op: algorithms.OpCheck, Now: algorithms.ServerTime}
			perm := rng.Perm(len(keys))[:1+rng.IntN(len(keys))]
			for _, i := range perm {
				k := keys[i]
				c.Rules = append(c.Rules, algorithms.Rule{Key: k.key, Algorithm: k.a, Cost: rng.Int64N(4), Shadow: rng.IntN(6) == 0, Params: k.params})
			}
			want, werr := luaDecide(t, ref, s, &c)
			got, ok, gerr := st.Decide(&c)
			if !ok {
				t.Fatalf("seed %d step %d: not decided", seed, step)
			}
			if fmt.Sprint(want, werr) != fmt.Sprint(got, gerr) {
				t.Fatalf("seed %d step %d: call %+v\n lua    %+v %v\n native %+v %v", seed, step, c, want, werr, got, gerr)
			}
			// Hand every key to the host and compare what Redis would hold.
			all := make([]string, len(keys))
			for i, k := range keys {
				all[i] = k.key
			}
			st.Hand(all, func() {})
			for _, k := range all {
				a, aok := ref.Dump(k)
				b, bok := nh.Dump(k)
				if a != b || aok != bok {
					t.Fatalf("seed %d step %d: key %s: lua %q native %q", seed, step, k, a, b)
				}
			}
		}
	}
}
