package engine_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
)

// A batch job that would rather wait its turn than be refused: each Wait reserves the
// earliest slot the rule allows within the max delay and waits for it. Here the clock is
// virtual and the sleep moves it, so the example runs at once; by default Wait sleeps on
// the wall clock.
func ExampleEngine_Wait() {
	cfg, diags := dsl.Parse(map[string][]byte{"reports.hcl": []byte(`
policy "reports" {
  rule "per_user" {
    algorithm = "gcra"
    key       = request.user
    rate      = "2/s"
    burst     = 2
  }
}`)})
	if diags.HasErrors() {
		log.Fatal(diags)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		log.Fatal(err)
	}
	clock := luahost.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sleep := func(ctx context.Context, d time.Duration) error { clock.Advance(d); return nil }
	e := engine.New(engine.NewLocal(luahost.New(luahost.WithClock(clock))), plan, engine.WithClock(clock.Now), engine.WithSleep(sleep))
	start := clock.Now()
	for range 5 {
		d, err := e.Wait(context.Background(), engine.Attrs{"user": "nightly"}, time.Second)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("allowed %v after waiting %v, at +%v\n", d.Allowed, d.Delay, clock.Now().Sub(start))
	}
	// Output:
	// allowed true after waiting 0s, at +0s
	// allowed true after waiting 0s, at +0s
	// allowed true after waiting 500ms, at +500ms
	// allowed true after waiting 500ms, at +1s
	// allowed true after waiting 500ms, at +1.5s
}
