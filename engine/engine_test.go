package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

func compile(t testing.TB, src string) *Plan {
	t.Helper()
	cfg, diags := dsl.Parse(map[string][]byte{"test.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatalf("policy does not load: %v", diags)
	}
	p, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// frozen is a clock that stands still unless moved.
type frozen struct{ us atomic.Int64 }

func newFrozen() *frozen {
	f := &frozen{}
	f.us.Store(1_900_000_000_000_000)
	return f
}
func (f *frozen) now() time.Time          { return time.UnixMicro(f.us.Load()) }
func (f *frozen) advance(d time.Duration) { f.us.Add(d.Microseconds()) }

// backends returns the engine's backends under test: a real redis-server and luahost.
// The Redis database starts empty, as luahost does, so a test decides the same on every
// run (-count=N) whatever keys an earlier run left; no engine test shares the server
// with a test running in parallel.
func backends(t *testing.T, clock *frozen) map[string]Backend {
	rdb := redistest.Shared(t).Client(t)
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		t.Fatalf("FLUSHDB: %v", err)
	}
	return map[string]Backend{
		"redis":   NewRedis(rdb),
		"luahost": NewLocal(luahost.New(luahost.WithClock(clockFunc(clock.now)))),
	}
}

// limitOf100 are one-rule policies allowing exactly 100 requests while the clock stands still.
var limitOf100 = map[string]string{
	"fixed_window":   `limit = 100` + "\n" + `window = "1h"`,
	"sliding_log":    `limit = 100` + "\n" + `window = "1h"`,
	"sliding_window": `limit = 100` + "\n" + `window = "1h"`,
	"token_bucket":   `capacity = 100` + "\n" + `rate = "1/h"`,
	"leaky_bucket":   `capacity = 100` + "\n" + `rate = "1/h"`,
	"gcra":           `rate = "1/h"` + "\n" + `burst = 100`,
	"concurrency":    `max = 100` + "\n" + `ttl = "1h"`,
}

// TestConcurrentRequestsOneKey: 64 goroutines send 1,000 requests each on one key with a
// limit of 100; exactly 100 pass, on every algorithm and backend. The scripts run atomically,
// so no interleaving lets a 101st through.
func TestConcurrentRequestsOneKey(t *testing.T) {
	clock := newFrozen()
	per := 1000
	if testing.Short() || raceEnabled {
		per = 200
	}
	for bname, b := range backends(t, clock) {
		for alg, params := range limitOf100 {
			t.Run(bname+"/"+alg, func(t *testing.T) {
				plan := compile(t, fmt.Sprintf(`
policy "p_%s_%s" {
  clock = "client"
  rule "one" {
    algorithm = %q
    key       = "k"
    %s
  }
}`, bname, alg, alg, params))
				e := New(b, plan, WithClock(clock.now), WithTimeout(5*time.Second))
				var allowed, errs atomic.Int64
				var wg sync.WaitGroup
				for range 64 {
					wg.Go(func() {
						for range per {
							d, err := e.Allow(context.Background(), Attrs{})
							if err != nil {
								errs.Add(1)
								continue
							}
							if d.Source != FromBackend {
								errs.Add(1)
							}
							if d.Allowed {
								allowed.Add(1)
							}
						}
					})
				}
				wg.Wait()
				if errs.Load() != 0 {
					t.Fatalf("%d errors or degraded decisions", errs.Load())
				}
				if allowed.Load() != 100 {
					t.Fatalf("allowed %d of %d requests, want exactly 100", allowed.Load(), 64*per)
				}
			})
		}
	}
}

const stackPolicy = `
policy "stack" {
  clock = "client"
  rule "r1" {
    algorithm = "token_bucket"
    key       = request.user
    capacity  = 10
    rate      = "1/h"
  }
  rule "r2" {
    algorithm = "sliding_log"
    key       = request.user
    limit     = 10
    window    = "1h"
  }
  rule "r3" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 2
    window    = "1h"
  }
}`

// TestStackDeniedByLastRule: when rule 3 denies, rules 1-2 keep their state: the remaining
// they report does not move while denials repeat.
func TestStackDeniedByLastRule(t *testing.T) {
	clock := newFrozen()
	for bname, b := range backends(t, clock) {
		t.Run(bname, func(t *testing.T) {
			e := New(b, compile(t, stackPolicy), WithClock(clock.now))
			req := Attrs{"user": "stack-" + bname}
			for i := range 2 {
				d, err := e.Allow(context.Background(), req)
				if err != nil || !d.Allowed {
					t.Fatalf("request %d: %+v %v", i+1, d, err)
				}
			}
			for range 5 {
				d, err := e.Allow(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed || d.Rules[d.Decider].Rule != "r3" {
					t.Fatalf("want a denial by r3: %+v", d)
				}
				if d.Rules[0].Remaining != 8 || d.Rules[1].Remaining != 8 {
					t.Fatalf("a denied request charged rules 1-2: %+v", d.Rules)
				}
			}
		})
	}
}

// TestClusterCompensation: without a shard, the three keys of the stack live in different
// slots of a real 3-node cluster, so each is its own call; when the last denies, the
// charges of the first two are refunded and no phantom charge remains.
func TestClusterCompensation(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	for _, key := range []string{"foo{}{bar}", "{}", "{{a}}", "a{b}{c}", "}{x}", "rl:{acme}:api:r:gcra:k",
		string(renderKey(nil, "p", "r", "gcra", true, "x}{y", "{k}", false)), string(renderKey(nil, "p", "r", "gcra", false, "", "a{b}", false))} {
		want, err := cl.Client(t).ClusterKeySlot(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := Slot(key); int64(got) != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
		}
	}
	clock := newFrozen()
	// A deadline no loaded machine reaches: a call whose reply came after it would be
	// decided by on_error, and the counts below would not be the script's.
	e := New(NewRedis(cl.Client(t)), compile(t, stackPolicy), WithClock(clock.now), WithTimeout(time.Minute))
	req := Attrs{"user": "u1"}
	d, err := e.Allow(context.Background(), req)
	if err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	slots := map[int]bool{}
	for _, r := range d.Rules {
		slots[Slot(r.Key)] = true
	}
	if len(slots) < 2 {
		t.Fatalf("the stack's keys share a slot (%v); the test needs them apart", slots)
	}
	if _, err := e.Allow(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		d, err := e.Allow(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			t.Fatalf("third request allowed: %+v", d)
		}
	}
	p, err := e.Peek(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if p.Rules[0].Remaining != 8 || p.Rules[1].Remaining != 8 || p.Rules[2].Remaining != 0 {
		t.Fatalf("after 2 allowed and 5 denied requests: %+v, want 8, 8, 0 remaining", p.Rules)
	}
	// Each primary the calls reached holds the library; after FUNCTION FLUSH on every
	// node the next calls load it again where they go.
	lib := e.plan.script.Function
	for i := range 3 {
		node := cl.Node(i).Client(t)
		if keys := node.DBSize(context.Background()).Val(); keys > 0 && !slices.Contains(libraries(t, node), lib) {
			t.Errorf("node %d holds %d keys but not the library %s", i, keys, lib)
		}
		if err := node.FunctionFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if p, err = e.Peek(context.Background(), req); err != nil || p.Source != FromBackend || p.Rules[0].Remaining != 8 || p.Rules[2].Remaining != 0 {
		t.Fatalf("after FUNCTION FLUSH: %+v %v", p, err)
	}
}

// TestReleaseAndReset: a concurrency lease is held until Release; Reset forgets a key.
func TestReleaseAndReset(t *testing.T) {
	clock := newFrozen()
	for bname, b := range backends(t, clock) {
		t.Run(bname, func(t *testing.T) {
			e := New(b, compile(t, `
policy "uploads_`+bname+`" {
  clock = "client"
  rule "in_flight" {
    algorithm = "concurrency"
    key       = request.user
    max       = 2
    ttl       = "1m"
  }
}`), WithClock(clock.now))
			ctx := context.Background()
			req := Attrs{"user": "rel"}
			d1, _ := e.Allow(ctx, req)
			d2, _ := e.Allow(ctx, req)
			d3, _ := e.Allow(ctx, req)
			if !d1.Allowed || !d2.Allowed || d3.Allowed {
				t.Fatalf("want 2 leases then a denial: %v %v %v", d1.Allowed, d2.Allowed, d3.Allowed)
			}
			if d3.RetryAfter != time.Minute {
				t.Fatalf("denied lease retry-after %v, want the lease ttl 1m", d3.RetryAfter)
			}
			if err := e.Release(ctx, d1); err != nil {
				t.Fatal(err)
			}
			if err := e.Release(ctx, d1); err != nil { // idempotent
				t.Fatal(err)
			}
			if d, _ := e.Allow(ctx, req); !d.Allowed {
				t.Fatalf("a released lease did not free its slot: %+v", d)
			}
			if d, _ := e.Allow(ctx, req); d.Allowed {
				t.Fatal("a third lease was granted")
			}
			if err := e.Reset(ctx, req); err != nil {
				t.Fatal(err)
			}
			if d, _ := e.Peek(ctx, req); d.Rules[0].Remaining != 2 {
				t.Fatalf("after Reset: %+v", d.Rules[0])
			}
		})
	}
}

// TestBadRequests: expressions that fail and absurd costs are errors, never panics.
func TestBadRequests(t *testing.T) {
	e := New(NewLocal(luahost.New()), compile(t, `
policy "bad" {
  rule "r" {
    algorithm = "gcra"
    key       = request.user
    cost      = parseint(request.weight, 10)
    rate      = "10/s"
    burst     = 10
  }
}`))
	ctx := context.Background()
	for _, w := range []string{"x", "", "-5", "99999999999999999999"} {
		if _, err := e.Allow(ctx, Attrs{"user": "u", "weight": w}); !errors.Is(err, ErrRequest) {
			t.Errorf("weight %q: err %v, want ErrRequest", w, err)
		}
	}
	if _, err := e.AllowN(ctx, Attrs{"user": "u", "weight": "2"}, -1); !errors.Is(err, ErrRequest) {
		t.Errorf("negative n: %v", err)
	}
	d, err := e.Allow(ctx, Attrs{"user": "u", "weight": "11"})
	if err != nil || d.Allowed || d.RetryAfter != Never {
		t.Fatalf("cost above capacity: %+v %v, want a denial with RetryAfter Never", d, err)
	}
}

// slowBackend is a backend whose calls take d on the test's clock.
type slowBackend struct {
	Backend
	clock *frozen
	d     time.Duration
}

// load passes the engine's preload through, so compiling the script is not paid inside a
// decision's wall-clock deadline.
func (b slowBackend) load(s *algorithms.Script) {
	if l, ok := b.Backend.(loader); ok {
		l.load(s)
	}
}

func (b slowBackend) Eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error) {
	b.clock.advance(b.d)
	return b.Backend.Eval(ctx, s, keys, argv)
}

// TestCalledHookTimesEveryCall: the Called hook sees every backend call, checks and
// releases, with its rule count and its duration on the engine's clock.
func TestCalledHookTimesEveryCall(t *testing.T) {
	clock := newFrozen()
	h := luahost.New(luahost.WithClock(clockFunc(clock.now)))
	var calls []CallStats
	e := New(slowBackend{NewLocal(h), clock, 7 * time.Millisecond}, compile(t, `
policy "p" {
  clock = "client"
  rule "r" {
    algorithm = "concurrency"
    key       = request.user
    max       = 2
    ttl       = "1m"
  }
  rule "s" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 5
    window    = "1m"
  }
}`), WithClock(clock.now), WithTimeout(time.Minute), // durations come from the virtual clock
		WithHooks(Hooks{Called: func(c CallStats) { calls = append(calls, c) }}))
	d, err := e.Allow(context.Background(), Attrs{"user": "u"})
	if err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	if err := e.Release(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	want := []CallStats{{Op: "check", Rules: 2, Duration: 7 * time.Millisecond}, {Op: "refund", Rules: 1, Duration: 7 * time.Millisecond}}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("calls %+v, want %+v", calls, want)
	}
}
