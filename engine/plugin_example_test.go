package engine_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
)

// A plugin algorithm deploys with its policy file: engine.Load reads the Lua its algorithm
// block names and assembles it into the engine script beside the built-ins.
// docs/plugins.md quotes this function's body (with the path relative to the
// repository's root, where the guide's commands run).
func Example_plugin() {
	// In process here; on Redis: engine.Load(engine.NewRedis(rdb), ...), as in the README.
	e, err := engine.Load(engine.NewLocal(luahost.New()), []string{"../policies/simple_gcra.hcl"})
	if err != nil {
		log.Fatal(err) // every problem of the policies, at its file:line:col
	}
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
