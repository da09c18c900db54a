package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/engine"
)

// redisEngine is the engine of the policies in some files on a Redis or a Redis Cluster,
// as the commands that change or read a Redis's runtime state (override, list, inspect)
// use it.
type redisEngine struct {
	rdb  redis.UniversalClient
	addr string
	plan *engine.Plan
	eng  *engine.Engine
}

// openRedisEngine loads and compiles the policies in files and makes an engine on the
// Redis at addr (the forms -redis takes), of type typ (-redis-type: "single" or
// "cluster", whose nodes the client finds from addr), without reaching it yet. A bad addr
// or type is a usage error, said on e's stderr; invalid policies are errFailed, said by
// load.
func openRedisEngine(e *env, addr, typ string, files []string) (*redisEngine, error) {
	opt, err := benchRedisOptions(addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "rlctl: error: -redis: %v\n", err)
		return nil, errUsage
	}
	if typ != "single" && typ != "cluster" {
		fmt.Fprintf(e.stderr, "rlctl: error: -redis-type %q: use single or cluster\n", typ)
		return nil, errUsage
	}
	cfg, _ := load(e, files)
	if cfg == nil {
		return nil, errFailed
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		return nil, err
	}
	redis.SetLogger(benchQuiet{})
	// Calls end at their context's deadline and are never retried, as the engine expects.
	var rdb redis.UniversalClient
	if typ == "cluster" {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: []string{opt.Addr}, Username: opt.Username, Password: opt.Password, TLSConfig: opt.TLSConfig,
			ContextTimeoutEnabled: true, MaxRetries: -1,
		})
	} else {
		opt.ContextTimeoutEnabled, opt.MaxRetries = true, -1
		rdb = redis.NewClient(opt)
	}
	return &redisEngine{rdb: rdb, addr: opt.Addr, plan: plan, eng: engine.New(engine.NewRedis(rdb), plan, engine.WithTimeout(10*time.Second))}, nil
}

// ping reports a Redis that does not answer.
func (r *redisEngine) ping(ctx context.Context) error {
	if err := r.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cannot reach Redis at %s: %w", r.addr, err)
	}
	return nil
}

// errScanStop ends a scan early.
var errScanStop = errors.New("scan stopped")

// scan calls fn with each key matching match, SCAN 1000 keys a step, on the server or
// on every master of a cluster, until fn returns false. fn is called from one goroutine at
// a time.
func (r *redisEngine) scan(ctx context.Context, match string, fn func(key string) bool) error {
	var mu sync.Mutex
	one := func(ctx context.Context, c *redis.Client) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, match, 1000).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			for _, k := range keys {
				if !fn(k) {
					mu.Unlock()
					return errScanStop
				}
			}
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	switch c := r.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, one)
	case *redis.Client:
		err = one(ctx, c)
	}
	if errors.Is(err, errScanStop) {
		return nil
	}
	return err
}

// Close closes the client.
func (r *redisEngine) Close() error { return r.rdb.Close() }

// subcommand parses args as "OP [FLAGS] ARGS...", op one of ops, the flags into fs. A
// first argument that is a flag is parsed (so -h prints the command's help) and then
// refused; so is an op not in ops, said on e's stderr as the error of command name.
func subcommand(e *env, fs *flag.FlagSet, name string, args []string, ops ...string) (string, error) {
	list := strings.Join(ops[:len(ops)-1], ", ") + " or " + ops[len(ops)-1]
	if len(args) == 0 {
		return "", errUsage
	}
	op := args[0]
	if strings.HasPrefix(op, "-") {
		if err := parse(e, fs, args); err != nil { // -h prints the help
			return "", err
		}
		fmt.Fprintf(e.stderr, "rlctl: error: %s needs %s first\n", name, list)
		return "", errUsage
	}
	if !slices.Contains(ops, op) {
		fmt.Fprintf(e.stderr, "rlctl: error: %s %q: use %s\n", name, op, list)
		return "", errUsage
	}
	return op, parse(e, fs, args[1:])
}

// usageError says what is wrong with a command's arguments on e's stderr and returns
// errUsage.
func usageError(e *env, format string, a ...any) error {
	fmt.Fprintf(e.stderr, "rlctl: error: "+format+"\n", a...)
	return errUsage
}
