package engine_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"
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

// A go-redis client for the engine: ContextTimeoutEnabled lets the engine's decision
// deadline end a call on a stalled server at once, and MaxRetries: -1 stops the client
// from resending a call whose reply was lost, which would charge it twice (the engine
// decides failed calls by on_error). NewRedis does not connect.
func ExampleNewRedis() {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
	defer rdb.Close()
	backend := engine.NewRedis(rdb)
	fmt.Println(backend.HonoursDeadline())
	// Output: true
}

// A sender with batches of 8 messages and a budget of 10 asks for room for a batch: it
// may send what is granted, charged in the same atomic call that decided it.
func ExampleEngine_AllowAtMost() {
	cfg, diags := dsl.Parse(map[string][]byte{"mail.hcl": []byte(`
policy "mail" {
  rule "per_tenant" {
    algorithm = "token_bucket"
    key       = request.tenant
    capacity  = 10
    rate      = "1/h"
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
		d, err := e.AllowAtMost(context.Background(), engine.Attrs{"tenant": "acme"}, 8)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(d.Allowed, d.Granted)
	}
	// Output:
	// true 8
	// true 2
	// false 0
}
