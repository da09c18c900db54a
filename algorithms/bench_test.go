package algorithms

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rlctl/rlctl/luahost"
)

// benchParams are typical production parameters per algorithm.
var benchParams = map[string][]int64{
	"fixed_window":   {100, 60_000_000},
	"sliding_log":    {100, 60_000_000},
	"sliding_window": {100, 60_000_000},
	"token_bucket":   {100, 10, 1_000_000},
	"leaky_bucket":   {100, 10, 1_000_000},
	"gcra":           {10, 1_000_000, 100},
	"concurrency":    {100, 30_000_000, 0},
}

// BenchmarkLuahost measures one-rule decisions of the engine script on luahost: the
// embedded backend and the engine of every simulation. The clock advances 1ms per call
// over 1,000 keys so that most calls are allowed and state stays bounded.
func BenchmarkLuahost(b *testing.B) {
	s := Default()
	for _, a := range builtin {
		b.Run(a.Name, func(b *testing.B) {
			clock := luahost.NewManualClock(time.Unix(1_800_000_000, 0))
			h := luahost.New(luahost.WithClock(clock), luahost.WithCommands(s.Commands()...))
			if _, err := h.Load(s.Source); err != nil {
				b.Fatal(err)
			}
			argvs := make([][]string, 1000)
			keys := make([][]string, 1000)
			for i := range argvs {
				c := Call{Op: OpCheck, Now: ServerTime, Rules: []Rule{{
					Key: fmt.Sprintf("bench:%d", i), Algorithm: a, Cost: 1, Params: benchParams[a.Name], Lease: "l",
				}}}
				argv, err := c.Argv()
				if err != nil {
					b.Fatal(err)
				}
				argvs[i], keys[i] = argv, c.Keys()
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				clock.Advance(time.Millisecond)
				if _, err := h.EvalSHA(ctx, s.SHA1, keys[i%1000], argvs[i%1000]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
