package engine_test

import (
	"context"
	"fmt"
	"log"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
)

// Embedded mode: the engine script runs in process on luahost, no Redis needed. With Redis,
// the only change is the backend: engine.NewRedis(redis.NewClient(...)).
func Example() {
	cfg, diags := dsl.Parse(map[string][]byte{"api.hcl": []byte(`
policy "api" {
  rule "per_user" {
    algorithm = "gcra"
    key       = request.user
    rate      = "1/s"
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
	e := engine.New(engine.NewLocal(luahost.New()), plan)
	for range 3 {
		d, err := e.Allow(context.Background(), engine.Attrs{"user": "alice"})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(d.Allowed, d.Rules[0].Remaining)
	}
	// Output:
	// true 1
	// true 0
	// false 0
}
