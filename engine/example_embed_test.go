package engine_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
)

// One user starts four uploads at once; policies/uploads.hcl lets three run. In your
// program this is main, and newEngine gets your Redis address.
func Example_embed() {
	ctx := context.Background()
	e, closeEngine := newEngine("../policies/uploads.hcl", "") // "" : no Redis, see newEngine
	defer closeEngine()

	upload := engine.Attrs{"method": "POST", "path": "/upload", "user": "alice", "content_length": "5242880"}
	var running []*engine.Decision
	for range 4 {
		d, err := e.Allow(ctx, upload)
		if err != nil {
			log.Fatal(err) // a policy expression failed on this request (engine.ErrRequest), or ctx ended
		}
		if !d.Allowed {
			r := d.Rules[d.Decider] // the rule that refused
			fmt.Printf("refused by %s.%s: %d running of %d\n", r.Policy, r.Rule, r.Limit-r.Remaining, r.Limit)
			continue
		}
		fmt.Println("allowed")
		running = append(running, d)
	}
	// An upload that ends gives its concurrency leases back; then another may start.
	if err := e.Release(ctx, running[0]); err != nil {
		log.Fatal(err)
	}
	d, err := e.Allow(ctx, upload)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after one ended:", d.Allowed)
	// Output:
	// allowed
	// allowed
	// allowed
	// refused by uploads.per_user: 3 running of 3
	// after one ended: true
}

// newEngine loads a policy file (or directory) and returns an engine deciding on the Redis
// at redisAddr, and the function that closes its client. With redisAddr "" (a single
// instance, or this example) the engine decides in process, exactly as on Redis. Policies
// that do not load stop the program with every problem at its file:line:col.
func newEngine(policy, redisAddr string) (*engine.Engine, func()) {
	if redisAddr == "" {
		e, err := engine.Load(engine.NewNative(luahost.New()), []string{policy})
		if err != nil {
			log.Fatal(err)
		}
		return e, func() {}
	}
	// Any go-redis client (standalone, Sentinel, Cluster) with these two settings: the
	// engine's deadline ends a call on a stalled server, and a call whose reply was lost is
	// not resent (which would charge it twice). Failed calls are decided by on_error.
	rdb := redis.NewClient(&redis.Options{
		Addr:                  redisAddr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
	e, err := engine.Load(engine.NewRedis(rdb), []string{policy}, engine.WithTimeout(50*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	return e, func() { rdb.Close() }
}
