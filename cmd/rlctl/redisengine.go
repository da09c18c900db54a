package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/engine"
)

// redisEngine is the engine of the policies in some files on a Redis, as the commands
// that change or read a Redis's runtime state (override, list, inspect) use it.
type redisEngine struct {
	rdb  *redis.Client
	addr string
	plan *engine.Plan
	eng  *engine.Engine
}

// openRedisEngine loads and compiles the policies in files and makes an engine on the
// Redis at addr (the forms -redis takes), without reaching it yet. A bad addr is a usage
// error, said on e's stderr; invalid policies are errFailed, said by load.
func openRedisEngine(e *env, addr string, files []string) (*redisEngine, error) {
	opt, err := benchRedisOptions(addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "rlctl: error: -redis: %v\n", err)
		return nil, errUsage
	}
	opt.ContextTimeoutEnabled, opt.MaxRetries = true, -1
	cfg, _ := load(e, files)
	if cfg == nil {
		return nil, errFailed
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		return nil, err
	}
	redis.SetLogger(benchQuiet{})
	rdb := redis.NewClient(opt)
	return &redisEngine{rdb: rdb, addr: opt.Addr, plan: plan, eng: engine.New(engine.NewRedis(rdb), plan, engine.WithTimeout(10*time.Second))}, nil
}

// ping reports a Redis that does not answer.
func (r *redisEngine) ping(ctx context.Context) error {
	if err := r.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cannot reach Redis at %s: %w", r.addr, err)
	}
	return nil
}

// Close closes the client.
func (r *redisEngine) Close() error { return r.rdb.Close() }
