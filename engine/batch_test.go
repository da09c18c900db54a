package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// batchCalls returns n random calls on a few keys of every built-in that runs on a
// client clock (times fixed by the call, so replies do not depend on when they run): one
// rule or a stack, checks, partial admissions, refunds, and now and then a malformed call.
func batchCalls(rng *rand.Rand, n int) []*algorithms.Call {
	lookup := func(name string) *algorithms.Algorithm {
		a, ok := algorithms.Lookup(name)
		if !ok {
			panic(name)
		}
		return a
	}
	rules := []func(key string) algorithms.Rule{
		func(k string) algorithms.Rule {
			return algorithms.Rule{Key: "g:" + k, Algorithm: lookup("gcra"), Params: []int64{5, 1_000_000, 3}}
		},
		func(k string) algorithms.Rule {
			return algorithms.Rule{Key: "f:" + k, Algorithm: lookup("fixed_window"), Params: []int64{4, 2_000_000}}
		},
		func(k string) algorithms.Rule {
			return algorithms.Rule{Key: "l:" + k, Algorithm: lookup("sliding_log"), Params: []int64{3, 1_000_000}}
		},
		func(k string) algorithms.Rule {
			return algorithms.Rule{Key: "t:" + k, Algorithm: lookup("token_bucket"), Params: []int64{4, 2, 1_000_000}}
		},
	}
	var calls []*algorithms.Call
	now := int64(1_700_000_000_000_000)
	for range n {
		now += rng.Int64N(300_000)
		c := &algorithms.Call{Op: algorithms.OpCheck, Now: now}
		key := fmt.Sprint("k", rng.IntN(3))
		for _, i := range rng.Perm(len(rules))[:1+rng.IntN(3)] {
			r := rules[i](key)
			r.Cost = rng.Int64N(3)
			c.Rules = append(c.Rules, r)
		}
		switch rng.IntN(10) {
		case 3:
			// A wide call, more values than batch copies with unpack.
			for j := range 15 {
				r := rules[0](fmt.Sprint(key, ":", j))
				r.Cost = 1
				c.Rules = append(c.Rules, r)
			}
		case 0:
			c.Op, c.Units = algorithms.OpMost, 1+rng.Int64N(4)
		case 1:
			c.Op = algorithms.OpRefund
		case 2:
			c.Op = "bogus" // malformed: the call's error only (fcallArgs writes it)
		}
		calls = append(calls, c)
	}
	return calls
}

// runner sends a call's FCALL args (prepare's layout, with the function set) to a
// server and returns the raw reply.
type runner func(args []any) (any, error)

func fcallArgs(t *testing.T, s *algorithms.Script, c *algorithms.Call) []any {
	t.Helper()
	bogus := c.Op == "bogus"
	if bogus {
		c.Op = algorithms.OpCheck
		defer func() { c.Op = "bogus" }()
	}
	args := prepare(c)
	args[0], args[1] = "fcall", s.Function
	args, err := c.AppendArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	if bogus {
		args[3+len(c.Rules)+1] = "bogus" // ARGV[2], the op
	}
	return args
}

// A batch decides each of its calls as the call alone would: the same calls, in the same
// order, sent one by one to one server and in batches of random sizes to another, get the
// same replies (a malformed call its error, at its place, the calls after it still run).
func TestBatchEqualsCallsAlone(t *testing.T) {
	s := algorithms.Default()
	ctx := context.Background()
	servers := map[string]func(t *testing.T) runner{
		"redis": func(t *testing.T) runner {
			c := redistest.Start(t).Client(t)
			if err := c.FunctionLoad(ctx, s.Library).Err(); err != nil {
				t.Fatal(err)
			}
			return func(args []any) (any, error) { return c.Do(ctx, args...).Result() }
		},
		"luahost": func(t *testing.T) runner {
			h := luahost.New()
			if _, err := h.Do(ctx, "FUNCTION", "LOAD", s.Library); err != nil {
				t.Fatal(err)
			}
			return func(args []any) (any, error) { return h.Do(ctx, algorithms.ArgStrings(args)...) }
		},
	}
	for name, start := range servers {
		t.Run(name, func(t *testing.T) {
			alone, batched := start(t), start(t)
			rng := rand.New(rand.NewPCG(7, 7))
			calls := batchCalls(rng, 400)
			var want []any
			for _, c := range calls {
				v, err := alone(fcallArgs(t, s, c))
				want = append(want, replyOrError(v, err))
			}
			var got []any
			for i := 0; i < len(calls); {
				n := min(1+rng.IntN(12), len(calls)-i)
				group := make([]*queued, n)
				for j := range group {
					group[j] = &queued{args: fcallArgs(t, s, calls[i+j])}
				}
				v, err := batched(batchArgs(group))
				if err != nil {
					t.Fatalf("batch of calls %d..%d: %v", i, i+n-1, err)
				}
				replies, ok := v.([]any)
				if !ok || len(replies) != n {
					t.Fatalf("batch of %d calls answered %#v", n, v)
				}
				for _, r := range replies {
					if e, ok := r.(error); ok {
						got = append(got, replyOrError(nil, e))
					} else {
						got = append(got, replyOrError(r, nil))
					}
				}
				i += n
			}
			errs := 0
			for i := range calls {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("call %d (%s): batched %v, alone %v", i, calls[i].Op, got[i], want[i])
				}
				if _, ok := want[i].(string); ok {
					errs++
				}
			}
			if errs == 0 || errs == len(calls) {
				t.Errorf("%d of %d calls failed: the trace must hold both", errs, len(calls))
			}
		})
	}
}

// replyOrError is a reply as compared: its value without the server's clock (its fourth
// element, which differs from call to call), or its error's message without the server's
// own suffix (the script's sha and line).
func replyOrError(v any, err error) any {
	if err != nil {
		msg, _, _ := strings.Cut(err.Error(), " script: ")
		return msg
	}
	if arr, ok := v.([]any); ok && len(arr) > 3 {
		arr = slices.Clone(arr)
		arr[3] = "server clock"
		return arr
	}
	return v
}

// Batched engines decide concurrently exactly as the limit allows, and a lone decision is
// sent alone. Many goroutines on one gcra key of burst 50: exactly 50 allowed, and the
// server ran fewer FCALLs than decisions.
func TestBatchedEngineUnderConcurrency(t *testing.T) {
	srv := redistest.Start(t)
	b := NewRedis(engineClient(t, srv), Batched(0))
	if b.batch == nil {
		t.Fatal("Batched did not apply to a *redis.Client")
	}
	ctx := context.Background()
	const workers, each = 16, 20
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				ok, err := burstOf50(ctx, b, "hot")
				if err != nil {
					t.Errorf("worker %d call %d: %v", w, i, err)
					return
				}
				if ok {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if allowed != 50 {
		t.Errorf("%d allowed of %d, want the burst of 50", allowed, workers*each)
	}
	fcalls := commandCalls(t, srv, "fcall")
	if fcalls >= workers*each {
		t.Errorf("%d FCALLs for %d decisions: nothing was batched", fcalls, workers*each)
	}
	t.Logf("%d decisions in %d FCALLs", workers*each, fcalls)
}

// A caller that gives up while its call is queued is answered at once, and its call is
// never sent: nothing is charged. The flight in front of it is held by a paused server.
func TestBatchedCallGivenUpWhileQueued(t *testing.T) {
	srv := redistest.Start(t)
	client := engineClient(t, srv)
	b := NewRedis(client, Batched(0))
	if b.detach {
		t.Fatal("the client ignores contexts: its calls would wait on goroutines of their own")
	}
	ctx := context.Background()
	s := algorithms.Default()
	// The library is loaded before the server pauses.
	if _, err := b.Eval(ctx, s, []string{"warm"}, mustArgv(t, gcraCall("warm", 1))); err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	first := make(chan error, 1)
	go func() {
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_, err := b.Eval(fctx, s, []string{"a"}, mustArgv(t, gcraCall("a", 1)))
		first <- err
	}()
	// Wait until the first call is in flight: the batcher is busy.
	for !batcherBusy(b.batch) {
		select {
		case err := <-first:
			t.Fatalf("the first call returned from a paused server: %v", err)
		default:
			runtime.Gosched()
		}
	}
	qctx, cancel := context.WithCancel(ctx)
	queuedErr := make(chan error, 1)
	go func() {
		_, err := b.Eval(qctx, s, []string{"b"}, mustArgv(t, gcraCall("b", 1)))
		queuedErr <- err
	}()
	for batcherQueued(b.batch) == 0 {
		select {
		case err := <-queuedErr:
			t.Fatalf("the second call returned without queueing: %v", err)
		default:
			runtime.Gosched()
		}
	}
	cancel()
	if err := <-queuedErr; err != context.Canceled {
		t.Errorf("the queued call answered %v, want context.Canceled", err)
	}
	if n := batcherQueued(b.batch); n != 0 {
		t.Errorf("%d calls still queued after their caller gave up", n)
	}
	srv.Resume()
	if err := <-first; err != nil {
		t.Errorf("the call in flight: %v", err)
	}
	if n, err := client.Exists(ctx, "b").Result(); err != nil || n != 0 {
		t.Errorf("the given-up call's key exists (%d, %v): it was sent", n, err)
	}
	if n, err := client.Exists(ctx, "a").Result(); err != nil || n != 1 {
		t.Errorf("the call in flight left no key (%d, %v)", n, err)
	}
}

// engineClient is a client of srv with the settings the engine asks for (see Redis).
func engineClient(t *testing.T, srv *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

func mustArgv(t *testing.T, c *algorithms.Call) []string {
	t.Helper()
	argv, err := c.Argv()
	if err != nil {
		t.Fatal(err)
	}
	return argv
}

func batcherBusy(b *batcher) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.busy
}

func batcherQueued(b *batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// A batch holds the calls of one library only: calls of engines on different plans (one
// replaced by a reload, say) that share the backend queue for batches of their own, in
// their order, at most max in one.
func TestBatchTakesOneLibrary(t *testing.T) {
	a, b := &algorithms.Script{Function: "rlctl_a"}, &algorithms.Script{Function: "rlctl_b"}
	bt := &batcher{max: 3, busy: true}
	var order []string
	for i, s := range []*algorithms.Script{a, b, a, a, b, a, a} {
		bt.queue = append(bt.queue, &queued{s: s, key: fmt.Sprint(i)})
	}
	for g := bt.take(); g != nil; g = bt.take() {
		var keys []string
		for _, q := range g {
			if q.s.Function != g[0].s.Function {
				t.Errorf("a batch mixes %s and %s", g[0].s.Function, q.s.Function)
			}
			keys = append(keys, q.key)
		}
		order = append(order, strings.Join(keys, ","))
	}
	if got := strings.Join(order, " "); got != "0,2,3 1,4 5,6" {
		t.Errorf("batches %q, want 0,2,3 then 1,4 then 5,6", got)
	}
	if bt.busy {
		t.Error("the batcher stays busy with nothing queued")
	}
}

// On a Redis Cluster calls batch by hash slot: many goroutines on one hot key (one slot)
// are held to its burst exactly, in fewer FCALLs on its node than decisions, and calls on
// keys of other slots are decided as well.
func TestBatchedClusterHotKey(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	b := NewRedis(c)
	if b.slotBatches == nil {
		t.Fatal("a cluster client is not batched by slot")
	}
	ctx := context.Background()
	node, err := c.MasterForKey(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	before := commandCallsOf(t, node, "fcall")
	const workers, each = 16, 20
	var mu sync.Mutex
	allowed, others := 0, 0
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				key := "hot"
				if i%5 == 4 {
					key = fmt.Sprint("cold", w, "-", i) // other slots, on any node
				}
				ok, err := burstOf50(ctx, b, key)
				if err != nil {
					t.Errorf("worker %d call %d: %v", w, i, err)
					return
				}
				mu.Lock()
				switch {
				case key != "hot" && ok:
					others++
				case key == "hot" && ok:
					allowed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	hot := workers * each * 4 / 5
	if allowed != 50 || others != workers*each-hot {
		t.Errorf("hot key: %d allowed of %d, want the burst of 50; other keys: %d allowed of %d, want all", allowed, hot, others, workers*each-hot)
	}
	fcalls := commandCallsOf(t, node, "fcall") - before
	if fcalls >= workers*each {
		t.Errorf("%d FCALLs on the hot key's node for %d decisions there: nothing was batched", fcalls, hot)
	}
	t.Logf("%d decisions on the hot key in %d FCALLs on its node (with the other keys it holds)", hot, fcalls)
}

// commandCallsOf is INFO commandstats' count of calls of cmd on one node's client.
func commandCallsOf(t *testing.T, c *redis.Client, cmd string) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	return commandCount(t, info, cmd)
}

// burstOf50 decides one request on key, a gcra rule of burst 50 that earns nothing back
// (every call at one instant), through b: whether it was allowed.
func burstOf50(ctx context.Context, b *Redis, key string) (bool, error) {
	c := gcraCall(key, 1_700_000_000_000_000)
	c.Rules[0].Params = []int64{1, 3_600_000_000, 50}
	argv, err := c.Argv()
	if err != nil {
		return false, err
	}
	v, err := b.Eval(ctx, algorithms.Default(), c.Keys(), argv)
	if err != nil {
		return false, err
	}
	r, err := algorithms.DecodeReply(v, 1)
	return r.Allowed, err
}

// boomPolicy is a plugin that raises a Lua error for a cost of 7 and otherwise counts the
// cost on a string key, and a policy that uses it.
var boomPolicy = map[string][]byte{
	"test.hcl": []byte(`
algorithm "boom" {
  source   = "boom.lua"
  params   = { limit = "count" }
  commands = ["GET", "SET"]
  guarantee "none" {}
}

policy "p" {
  rule "r" {
    algorithm = "boom"
    key       = request.user
    limit     = 100
  }
}
`),
	"boom.lua": []byte(`params = {'pos'}
function check(key, now, cost, p)
  if cost == 7 then
    error('boom')
  end
  local n = tonumber(call('GET', key) or '0')
  if n + cost > p[1] then
    return 0, p[1] - n, -1, 0, p[1]
  end
  return 1, p[1] - n - cost, 0, 0, p[1], n + cost
end
function commit(key, n)
  call('SET', key, n)
end
`),
}

// A plugin's runtime error in a batch answers its own call only: the calls before it are
// charged and answered, the calls after it run, on redis-server as on luahost.
func TestBatchIsolatesAPluginError(t *testing.T) {
	cfg, diags := dsl.Parse(boomPolicy)
	if diags.HasErrors() {
		t.Fatal(diags.Errs())
	}
	plan, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := plan.script
	boom, ok := s.Algorithm("boom")
	if !ok {
		t.Fatal("the plan's script has no boom algorithm")
	}
	call := func(key string, cost int64) *queued {
		c := &algorithms.Call{Op: algorithms.OpCheck, Now: 1_700_000_000_000_000, Rules: []algorithms.Rule{
			{Key: key, Algorithm: boom, Cost: cost, Params: []int64{100}},
		}}
		return &queued{args: fcallArgs(t, s, c)}
	}
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	if err := c.FunctionLoad(ctx, s.Library).Err(); err != nil {
		t.Fatal(err)
	}
	v, err := c.Do(ctx, batchArgs([]*queued{call("a", 1), call("b", 7), call("c", 2)})...).Result()
	if err != nil {
		t.Fatalf("the batch failed as a whole: %v", err)
	}
	replies, _ := v.([]any)
	if len(replies) != 3 {
		t.Fatalf("replies %#v", v)
	}
	if _, ok := replies[0].([]any); !ok {
		t.Errorf("the call before the error: %#v", replies[0])
	}
	if e, ok := replies[1].(error); !ok || !strings.Contains(e.Error(), "boom") {
		t.Errorf("the raising call: %#v, want its error", replies[1])
	}
	if _, ok := replies[2].([]any); !ok {
		t.Errorf("the call after the error: %#v", replies[2])
	}
	for key, want := range map[string]string{"a": "1", "c": "2"} {
		if got, err := c.Get(ctx, key).Result(); err != nil || got != want {
			t.Errorf("key %s holds %q (%v), want %s charged", key, got, err, want)
		}
	}
	if n, _ := c.Exists(ctx, "b").Result(); n != 0 {
		t.Error("the raising call wrote its key")
	}
}
