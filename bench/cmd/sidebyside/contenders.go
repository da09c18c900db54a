package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/goredisstore.v9"
	"github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"
)

// limit is what every contender enforces in a cell: count decisions per period per key
// (and a burst of count where the algorithm has one).
type limit struct {
	count  int64
	period time.Duration
}

// wide lets nearly every request pass, so each decision takes the allowing, writing path.
var wide = limit{count: 1_000_000, period: time.Second}

// decideFunc makes decision number i: it picks its request (or key) from i.
type decideFunc func(ctx context.Context, i int) (allowed bool, err error)

// contender is one limiter under test.
type contender struct {
	name string
	// setup returns the contender's decide function for l on rdb; keys is the key space the
	// decisions cycle over (key "sanity" alone when keys is 0). Nil for a reference that
	// only has a ceiling.
	setup func(rdb *redis.Client, l limit, keys int) (decideFunc, error)
	// ceiling, when not nil, returns the EVALSHA that redis-benchmark sends as this
	// contender's ceiling: the same script and arguments, __rand_int__ in the keys; or
	// errNoCeiling when a decision is not one script call.
	ceiling func(rdb *redis.Client) (evalsha, error)
}

// evalsha is one script call as redis-benchmark sends it: EVALSHA sha1, or FCALL function
// when function is set (after FUNCTION LOAD of library).
type evalsha struct {
	source   string
	sha1     string
	function string
	library  string
	keys     []string
	argv     []string
}

// engineCase is an rlctl case under test: one engine per policy source hcl returns, all
// called in turn for each decision.
type engineCase struct {
	name string
	hcl  func(l limit) []string
	// evalsha: the engine runs the script with EVALSHA (engine.WithoutFunctions), not the
	// library with FCALL.
	evalsha bool
	// pipelined: concurrent decisions share writes (engine.Pipelined).
	pipelined bool
	// batched: concurrent decisions share script calls (engine.Batched, the engine's
	// default); the other cases send every call alone (Batched(1)), as before batching.
	batched bool
}

var engineCases = []engineCase{
	{name: "gcra", hcl: oneRule("gcra")},
	{name: "gcra (EVALSHA)", hcl: oneRule("gcra"), evalsha: true},
	{name: "gcra (pipelined)", hcl: oneRule("gcra"), pipelined: true},
	{name: "gcra (batched)", hcl: oneRule("gcra"), batched: true},
	{name: "fixed_window (batched)", hcl: oneRule("fixed_window"), batched: true},
	{name: "sliding_log", hcl: oneRule("sliding_log")},
	{name: "sliding_window", hcl: oneRule("sliding_window")},
	{name: "fixed_window", hcl: oneRule("fixed_window")},
	{name: "3-rule stack, one call", hcl: threeRules},
	{name: "3 rules, 3 calls", hcl: threeCalls},
}

func oneRule(alg string) func(l limit) []string {
	return func(l limit) []string { return []string{oneRuleSource(alg, l)} }
}

func oneRuleSource(alg string, l limit) string {
	params := fmt.Sprintf("limit = %d\n    window = %q", l.count, span(l.period))
	if alg == "gcra" {
		params = fmt.Sprintf("rate = \"%d/%s\"\n    burst = %d", l.count, span(l.period), l.count)
	}
	return fmt.Sprintf(`policy %q {
  rule "per_user" {
    algorithm = %q
    key = request.user
    %s
  }
}`, alg, alg, params)
}

// stackRules are engine/bench_test.go's stack: three algorithms on three keys.
func stackRules(l limit) []string {
	return []string{
		fmt.Sprintf(`  rule "per_ip" {
    algorithm = "gcra"
    key = request.ip
    rate = "%[1]d/%[2]s"
    burst = %[1]d
  }
`, l.count, span(l.period)),
		fmt.Sprintf(`  rule "per_user" {
    algorithm = "token_bucket"
    key = request.user
    capacity = %[1]d
    rate = "%[1]d/%[2]s"
  }
`, l.count, span(l.period)),
		fmt.Sprintf(`  rule "per_tenant" {
    algorithm = "sliding_window"
    key = request.tenant
    limit = %[1]d
    window = %[2]q
  }
`, l.count, span(l.period)),
	}
}

// threeRules is the stack in one policy: one call decides all three rules.
func threeRules(l limit) []string {
	return []string{"policy \"stack\" {\n" + strings.Join(stackRules(l), "") + "}\n"}
}

// threeCalls is the stack as three policies of one rule each, one engine (and call) each.
func threeCalls(l limit) []string {
	var ps []string
	for i, r := range stackRules(l) {
		ps = append(ps, fmt.Sprintf("policy \"stack%d\" {\n%s}\n", i, r))
	}
	return ps
}

func span(d time.Duration) string { return fmt.Sprintf("%ds", int64(d/time.Second)) }

// requests returns the engine requests decisions cycle over: keys users, keys addresses,
// eight tenants; one request when keys is 0.
func requests(keys int) []engine.Attrs {
	if keys == 0 {
		return []engine.Attrs{{"ip": "sanity", "user": "sanity", "tenant": "sanity"}}
	}
	reqs := make([]engine.Attrs, keys)
	for i := range reqs {
		reqs[i] = engine.Attrs{"ip": fmt.Sprint("10.0.", i/256%256, ".", i%256), "user": fmt.Sprint("u", i), "tenant": fmt.Sprint("t", i%8)}
	}
	return reqs
}

// peerKeys returns the keys peers' decisions cycle over, the same users as requests.
func peerKeys(keys int) []string {
	if keys == 0 {
		return []string{"sanity"}
	}
	ks := make([]string, keys)
	for i := range ks {
		ks[i] = fmt.Sprint("u", i)
	}
	return ks
}

func compile(src string) (*engine.Plan, error) {
	cfg, diags := dsl.Parse(map[string][]byte{"bench.hcl": []byte(src)})
	if diags.HasErrors() {
		return nil, diags
	}
	return engine.Compile(cfg)
}

// engines returns the case's engines on b.
func (c engineCase) engines(b engine.Backend, l limit) ([]*engine.Engine, error) {
	var es []*engine.Engine
	for _, src := range c.hcl(l) {
		plan, err := compile(src)
		if err != nil {
			return nil, err
		}
		es = append(es, engine.New(b, plan, engine.WithTimeout(10*time.Second)))
	}
	return es, nil
}

func (c engineCase) contender() contender {
	return contender{
		name: "rlctl " + c.name,
		setup: func(rdb *redis.Client, l limit, keys int) (decideFunc, error) {
			es, err := c.engines(c.backend(rdb), l)
			if err != nil {
				return nil, err
			}
			reqs := requests(keys)
			return func(ctx context.Context, i int) (bool, error) {
				allowed := true
				for _, e := range es {
					d, err := e.Allow(ctx, reqs[i%len(reqs)])
					if err != nil {
						return false, err
					}
					if d.Source != engine.FromBackend {
						return false, fmt.Errorf("decided without Redis (source %d): %v", d.Source, d.Err)
					}
					allowed = allowed && d.Allowed
				}
				return allowed, nil
			}, nil
		},
		ceiling: func(rdb *redis.Client) (evalsha, error) {
			rec := &recorder{Backend: c.backend(rdb), functions: !c.evalsha}
			es, err := c.engines(rec, wide)
			if err != nil {
				return evalsha{}, err
			}
			if len(es) != 1 {
				return evalsha{}, errNoCeiling
			}
			r := engine.Attrs{"ip": "10.0.0.__rand_int__", "user": "u__rand_int__", "tenant": "t__rand_int__"}
			if _, err := es[0].Allow(context.Background(), r); err != nil {
				return evalsha{}, err
			}
			return rec.last, nil
		},
	}
}

var errNoCeiling = errors.New("no single script call to measure")

// backend is the case's engine backend on rdb.
func (c engineCase) backend(rdb *redis.Client) *engine.Redis {
	switch {
	case c.evalsha:
		return engine.NewRedis(rdb, engine.WithoutFunctions())
	case c.pipelined:
		return engine.NewRedis(rdb, engine.Pipelined())
	case c.batched:
		return engine.NewRedis(rdb, engine.Batched(0))
	}
	return engine.NewRedis(rdb, engine.Batched(1)) // every call alone
}

// recorder is a Backend that remembers the last call it passed on: the exact EVALSHA, or
// FCALL when functions is set, that the engine sends.
type recorder struct {
	engine.Backend
	functions bool
	last      evalsha
}

func (r *recorder) Eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error) {
	r.last = evalsha{source: s.Source, sha1: s.SHA1, keys: keys, argv: argv}
	if r.functions {
		r.last.function, r.last.library = s.Function, s.Library
	}
	return r.Backend.Eval(ctx, s, keys, argv)
}

// peers are the other Redis rate limiters, each configured to the same limit.
var peers = []contender{
	{
		name: "go-redis/redis_rate (GCRA)",
		setup: func(rdb *redis.Client, l limit, keys int) (decideFunc, error) {
			lim := redis_rate.NewLimiter(rdb)
			rl := redis_rate.Limit{Rate: int(l.count), Period: l.period, Burst: int(l.count)}
			ks := peerKeys(keys)
			return func(ctx context.Context, i int) (bool, error) {
				res, err := lim.AllowN(ctx, ks[i%len(ks)], rl, 1)
				if err != nil {
					return false, err
				}
				return res.Allowed > 0, nil
			}, nil
		},
		ceiling: func(rdb *redis.Client) (evalsha, error) {
			// The EVALSHA AllowN sends for wide, caught on its way out (the call loads the
			// script too).
			var got evalsha
			c := redis.NewClient(rdb.Options())
			defer c.Close()
			c.AddHook(captureHook(func(args []any, _ bool) {
				if len(args) > 3 && fmt.Sprint(args[0]) == "evalsha" {
					got.sha1 = fmt.Sprint(args[1])
					got.keys = []string{"rate:u__rand_int__"}
					for _, a := range args[4:] {
						got.argv = append(got.argv, fmt.Sprint(a))
					}
				}
			}))
			rl := redis_rate.Limit{Rate: int(wide.count), Period: wide.period, Burst: int(wide.count)}
			if _, err := redis_rate.NewLimiter(c).AllowN(context.Background(), "u__rand_int__", rl, 1); err != nil {
				return evalsha{}, err
			}
			if got.sha1 == "" {
				return evalsha{}, errors.New("redis_rate sent no EVALSHA")
			}
			return got, nil
		},
	},
	{
		name: "ulule/limiter (fixed window)",
		setup: func(rdb *redis.Client, l limit, keys int) (decideFunc, error) {
			st, err := ulredis.NewStoreWithOptions(rdb, limiter.StoreOptions{Prefix: "ulul"})
			if err != nil {
				return nil, err
			}
			lim := limiter.New(st, limiter.Rate{Period: l.period, Limit: l.count})
			ks := peerKeys(keys)
			return func(ctx context.Context, i int) (bool, error) {
				c, err := lim.Get(ctx, ks[i%len(ks)])
				return !c.Reached, err
			}, nil
		},
	},
	{
		name: "throttled (GCRA, CAS)",
		setup: func(rdb *redis.Client, l limit, keys int) (decideFunc, error) {
			st, err := goredisstore.NewCtx(rdb, "thrt:")
			if err != nil {
				return nil, err
			}
			// throttled allows MaxBurst+1 at once.
			lim, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerDuration(int(l.count), l.period), MaxBurst: int(l.count) - 1})
			if err != nil {
				return nil, err
			}
			ks := peerKeys(keys)
			return func(ctx context.Context, i int) (bool, error) {
				limited, _, err := lim.RateLimitCtx(ctx, ks[i%len(ks)], 1)
				return !limited, err
			}, nil
		},
	},
}

// minimalScript does the Redis commands of a one-rule gcra call and nothing else: the
// floor under any script that keeps a hash per key and reads the server clock.
const minimalScript = `local now = redis.call('TIME')
local st = redis.call('HMGET', KEYS[1], 't', 'r')
redis.call('HSET', KEYS[1], 't', now[1], 'r', now[2])
redis.call('PEXPIRE', KEYS[1], 1000)
return {1, 0, 0, 0, 0}`

// minimal is a reference row: only its ceiling is measured.
var minimal = contender{
	name: "minimal script (TIME, HMGET, HSET, PEXPIRE)",
	ceiling: func(*redis.Client) (evalsha, error) {
		sum := sha1.Sum([]byte(minimalScript))
		return evalsha{source: minimalScript, sha1: hex.EncodeToString(sum[:]), keys: []string{"rl:min:k:u__rand_int__"}}, nil
	},
}

// contenders returns every contender, compared ones next to each other: cells run in this
// order (reversed every other round), so the two sides of a ratio run back to back.
func contenders() []contender {
	cs := make(map[string]contender)
	for _, c := range engineCases {
		cs[c.name] = c.contender()
	}
	return []contender{
		cs["gcra"], peers[0], cs["gcra (batched)"], cs["gcra (EVALSHA)"], cs["gcra (pipelined)"], peers[2], minimal,
		cs["fixed_window"], peers[1], cs["fixed_window (batched)"],
		cs["3-rule stack, one call"], cs["3 rules, 3 calls"],
		cs["sliding_log"], cs["sliding_window"],
	}
}

// captureHook passes the arguments of every command a client sends to f; first is true
// for a command sent alone or the first of a pipeline: once per round trip.
type captureHook func(args []any, first bool)

func (h captureHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h captureHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h(cmd.Args(), true)
		return next(ctx, cmd)
	}
}

func (h captureHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for i, c := range cmds {
			h(c.Args(), i == 0)
		}
		return next(ctx, cmds)
	}
}
