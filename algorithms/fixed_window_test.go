package algorithms

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// layout2 returns the engine script whose fixed_window is the one form of earlier
// versions (every key a hash {w, n} and, for a debt, o, d and l; HMGET to read it),
// testdata/layout2, with the commands it ran.
func layout2(tb testing.TB) *Script {
	tb.Helper()
	src, err := os.ReadFile("testdata/layout2/fixed_window.lua")
	if err != nil {
		tb.Fatal(err)
	}
	algs := make([]*Algorithm, len(builtin))
	for i, a := range builtin {
		algs[i] = a
		if a.Name == "fixed_window" {
			old := *a
			old.Source = string(src)
			old.Commands = []string{"HMGET", "HSET", "HINCRBY", "PEXPIRE"}
			algs[i] = &old
		}
	}
	s, err := Assemble(algs)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// TestFixedWindowUpgradeFromOneForm: keys that fixed_window's earlier script wrote (the
// full form only) decide on the current script as the model does, from any point of a
// trace of checks, refunds, debts and client clocks: the current script reads the old
// form exactly and rewrites a key compact only when it opens a window.
func TestFixedWindowUpgradeFromOneForm(t *testing.T) {
	old := layout2(t)
	rdb := loadRedis(t).rdb
	if _, err := rdb.ScriptLoad(context.Background(), old.Source).Result(); err != nil {
		t.Fatal(err)
	}
	a, _ := Lookup("fixed_window")
	for _, r := range []redis.Cmdable{rdb, nil} {
		ex := upgradeExec{old: old, cur: Default(), rdb: r}
		t.Run(ex.name(), func(t *testing.T) {
			t.Parallel()
			base := freshPrefix(t)
			for i := range traceCount() {
				rng := rand.New(rand.NewPCG(29, uint64(i)))
				calls, _, err := genTrace(rng, sameAlgorithm(a)(rng, fmt.Sprintf("t%d:", i)), 40)
				if err != nil {
					t.Fatal(err)
				}
				calls = withoutOverrides(calls)
				want, err := expected(calls)
				if err != nil {
					t.Fatal(err)
				}
				ex := ex
				ex.at = rng.IntN(len(calls) + 1)
				rn := &runner{ex: ex, base: fmt.Sprintf("%s:%d", base, i)}
				checkTrace(t, rn, fmt.Sprintf("trace %d, upgraded after call %d,", i, ex.at), calls, want)
			}
		})
	}
}
