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

// A request whose cost is known only after it ran (the tokens a language model's answer
// used) reserves an estimate and settles its true cost: an overdraft is owed, and the key
// is denied until its rate has earned the debt back, with an exact retry-after.
func ExampleReservation_Settle() {
	cfg, diags := dsl.Parse(map[string][]byte{"llm.hcl": []byte(`
policy "llm" {
  rule "tokens" {
    algorithm = "token_bucket"
    key       = request.user
    capacity  = 1000
    rate      = "1000/m"
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
	e := engine.New(engine.NewLocal(luahost.New(luahost.WithClock(clock))), plan, engine.WithClock(clock.Now))
	ctx := context.Background()
	ann := engine.Attrs{"user": "ann"}

	res, err := e.Reserve(ctx, ann, 500) // the estimate
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("reserved:", res.Decision.Allowed, "remaining", res.Decision.Rules[0].Remaining)
	if err := res.Settle(ctx, 1300); err != nil { // the answer used 1300 tokens
		log.Fatal(err)
	}
	d, err := e.Allow(ctx, ann)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("in debt of 300 tokens:", d.Allowed, "retry after", d.RetryAfter)
	clock.Advance(d.RetryAfter)
	d, err = e.Allow(ctx, ann)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("earned back:", d.Allowed)
	// Output:
	// reserved: true remaining 500
	// in debt of 300 tokens: false retry after 18.06s
	// earned back: true
}
