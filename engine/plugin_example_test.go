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

// A plugin algorithm deploys with its policy file: dsl.Load reads the Lua its algorithm
// block names, and engine.Compile assembles it into the engine script beside the
// built-ins. docs/plugins.md quotes this function's body (with the path relative to the
// repository's root, where the guide's commands run).
func Example_plugin() {
	cfg, diags := dsl.Load("../policies/simple_gcra.hcl")
	if diags.HasErrors() {
		log.Fatal(diags)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		log.Fatal(err)
	}
	// In process here; on Redis: engine.New(engine.NewRedis(rdb), plan), as in the README.
	e := engine.New(engine.NewLocal(luahost.New()), plan)
	req := engine.Attrs{"path": "/v1/export", "user": "alice"}
	for range 4 {
		d, err := e.Allow(context.Background(), req)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(d.Allowed, d.Rules[0].Remaining, d.RetryAfter.Round(time.Second))
	}
	// Output:
	// true 2 0s
	// true 1 0s
	// true 0 0s
	// false 0 10s
}
