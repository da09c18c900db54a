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

// One tenant pays for more: its key of the overridable rule gets other figures while the
// engine runs. What the key used counts against the new figures, and clearing the
// override gives it the rule's own back.
func ExampleEngine_SetOverride() {
	cfg, diags := dsl.Parse(map[string][]byte{"api.hcl": []byte(`
policy "api" {
  rule "per_tenant" {
    algorithm   = "gcra"
    key         = request.tenant
    rate        = "1/s"
    burst       = 2
    overridable = true
  }
}`)})
	if diags.HasErrors() {
		log.Fatal(diags)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		log.Fatal(err)
	}
	// A clock that stands still, so that nothing refills while the example runs.
	clock := luahost.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := engine.New(engine.NewLocal(luahost.New(luahost.WithClock(clock))), plan, engine.WithClock(clock.Now))
	ctx, acme := context.Background(), engine.Attrs{"tenant": "acme"}
	allow := func(n int) {
		var got []bool
		for range n {
			d, err := e.Allow(ctx, acme)
			if err != nil {
				log.Fatal(err)
			}
			got = append(got, d.Allowed)
		}
		fmt.Println(got)
	}
	allow(3)

	err = e.SetOverride(ctx, acme, "api", "per_tenant", map[string]string{"rate": "10/s", "burst": "5"}, clock.Now().Add(time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	o, err := e.Override(ctx, acme, "api", "per_tenant")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %s until %s (own: %s)\n", o.Key, o.Limit, o.Until.UTC().Format(time.Kitchen), o.Own)
	allow(4) // two of five used: three left

	if err := e.ClearOverride(ctx, acme, "api", "per_tenant"); err != nil {
		log.Fatal(err)
	}
	allow(1) // five used, against a burst of two
	// Output:
	// [true true false]
	// rl:{api:per_tenant:gcra:acme}: 10/s, burst 5 until 1:00AM (own: rate=1/s burst=2)
	// [true true true false]
	// [false]
}
