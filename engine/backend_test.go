package engine

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the failure tests kill servers on purpose.
	redis.SetLogger(quietLogger{})
	os.Exit(redistest.Main(m))
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// gcraCall is a request to a gcra rule of 10 per hour with a burst of 10: a cell comes
// back only after 6 minutes, so no real-time delay between calls changes a reply.
func gcraCall(key string, now int64) *algorithms.Call {
	g, _ := algorithms.Lookup("gcra")
	return &algorithms.Call{Op: algorithms.OpCheck, Now: now, Rules: []algorithms.Rule{
		{Key: key, Algorithm: g, Cost: 1, Params: []int64{10, 3_600_000_000, 10}},
	}}
}

func evalCall(t *testing.T, b Backend, c *algorithms.Call) algorithms.Reply {
	t.Helper()
	argv, err := c.Argv()
	if err != nil {
		t.Fatal(err)
	}
	v, err := b.Eval(context.Background(), algorithms.Default(), c.Keys(), argv)
	if err != nil {
		t.Fatalf("Eval: %v", err)
	}
	r, err := algorithms.DecodeReply(v, len(c.Rules))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// scripterOnly is a client with only redis.Scripter's methods (no Process), as a wrapper
// or a client library of one's own may be.
type scripterOnly struct{ redis.Scripter }

// TestScripterOnlyClient: a client without Process runs the engine's calls through its
// Scripter methods, EVALSHA and, after SCRIPT FLUSH, EVAL, with the keys and arguments the
// engine prepares.
func TestScripterOnlyClient(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	e := New(NewRedis(scripterOnly{rdb}), compile(t, `policy "p" {
  rule "r" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 3
    window    = "1h"
  }
}`), WithTimeout(time.Minute))
	ctx := context.Background()
	for i := range 4 {
		if i == 2 {
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		d, err := e.Allow(ctx, Attrs{"user": "u"})
		if err != nil || d.Source != FromBackend {
			t.Fatalf("call %d: %+v %v", i+1, d, err)
		}
		if d.Allowed != (i < 3) || d.Rules[0].Remaining != int64(max(0, 2-i)) {
			t.Fatalf("call %d: allowed %v, remaining %d", i+1, d.Allowed, d.Rules[0].Remaining)
		}
	}
	if n, err := rdb.Exists(ctx, "rl:p:r:fixed_window:u").Result(); err != nil || n != 1 {
		t.Fatalf("the rule's key rl:p:r:fixed_window:u: exists %d %v", n, err)
	}
}

// TestRedisReloadsAfterScriptFlush: on a client that runs EVALSHA, the first call loads
// the script (NOSCRIPT on a fresh server), and after SCRIPT FLUSH the next call still
// succeeds.
func TestRedisReloadsAfterScriptFlush(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	b := NewRedis(rdb, WithoutFunctions())
	ctx := context.Background()
	if r := evalCall(t, b, gcraCall("noscript", algorithms.ServerTime)); !r.Allowed {
		t.Fatalf("first call denied: %+v", r)
	}
	for i := range 3 {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if ok, _ := rdb.ScriptExists(ctx, algorithms.Default().SHA1).Result(); ok[0] {
			t.Fatal("SCRIPT FLUSH left the script loaded")
		}
		r := evalCall(t, b, gcraCall("noscript", algorithms.ServerTime))
		if r.Rules[0].Remaining != int64(8-i) {
			t.Fatalf("after flush %d: remaining %d, want %d (state survives, script reloads)", i+1, r.Rules[0].Remaining, 8-i)
		}
	}
	if libs := libraries(t, rdb); len(libs) != 0 {
		t.Errorf("WithoutFunctions loaded libraries %v", libs)
	}
}

// libraries returns the names of the function libraries rdb's server holds.
func libraries(t *testing.T, rdb *redis.Client) []string {
	t.Helper()
	libs, err := rdb.FunctionList(context.Background(), redis.FunctionListQuery{}).Result()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range libs {
		names = append(names, l.Name)
	}
	return names
}

// TestRedisRunsTheLibrary: on Redis 7 the backend runs the library form with FCALL,
// loading it on the first call, again after FUNCTION FLUSH and after a restart; the state
// and the replies are those of EVALSHA.
func TestRedisRunsTheLibrary(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	b := NewRedis(rdb)
	ctx := context.Background()
	s := algorithms.Default()
	if r := evalCall(t, b, gcraCall("lib", algorithms.ServerTime)); !r.Allowed || r.Rules[0].Remaining != 9 {
		t.Fatalf("first call: %+v", r)
	}
	if libs := libraries(t, rdb); len(libs) != 1 || libs[0] != s.Function {
		t.Fatalf("libraries %v, want [%s]", libs, s.Function)
	}
	if ok, _ := rdb.ScriptExists(ctx, s.SHA1).Result(); ok[0] {
		t.Error("the backend also loaded the EVAL form")
	}
	if n := b.ScriptLoads(); n != 1 {
		t.Errorf("ScriptLoads after the first call = %d, want 1", n)
	}
	for i := range 2 {
		if err := rdb.FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if r := evalCall(t, b, gcraCall("lib", algorithms.ServerTime)); r.Rules[0].Remaining != int64(8-i) {
			t.Fatalf("after FUNCTION FLUSH %d: %+v (state survives, the library reloads)", i+1, r)
		}
	}
	srv.Restart(t)
	if r := evalCall(t, b, gcraCall("lib", algorithms.ServerTime)); !r.Allowed || r.Rules[0].Remaining != 9 {
		t.Fatalf("after a restart (no data kept): %+v", r)
	}
	if b.evalOnly.Load() {
		t.Error("the backend fell back to EVALSHA on a server with functions")
	}
	evalCall(t, b, gcraCall("lib", algorithms.ServerTime))
	if n := b.ScriptLoads(); n != 4 {
		t.Errorf("ScriptLoads = %d, want 4 (first call, two flushes, a restart)", n)
	}
}

// TestRedisWithoutFunctionsUsesEvalsha: a server that refuses functions to the client (an
// ACL without FUNCTION and FCALL, as managed services set) is detected on the first call,
// and the backend runs EVALSHA from then on, with the same replies.
func TestRedisWithoutFunctionsUsesEvalsha(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "-function", "-fcall", "-fcall_ro").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "app", Password: "pw", MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	b := NewRedis(rdb)
	for i := range 3 {
		if r := evalCall(t, b, gcraCall("acl", algorithms.ServerTime)); r.Rules[0].Remaining != int64(9-i) {
			t.Fatalf("call %d: %+v", i+1, r)
		}
	}
	if !b.evalOnly.Load() {
		t.Error("the backend did not switch to EVALSHA")
	}
	if libs := libraries(t, admin); len(libs) != 0 {
		t.Errorf("libraries %v loaded through a client that may not", libs)
	}
}

// TestEngineOnMiniredis: services test with miniredis through go-redis; it has no
// functions, and the engine decides there as on Redis.
func TestEngineOnMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	e := New(NewRedis(rdb), compile(t, `policy "p" {
  rule "r" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 2
    window    = "1h"
  }
}`), WithTimeout(time.Minute)) // miniredis runs Lua on gopher-lua: slow on a loaded machine
	ctx := context.Background()
	var allowed []bool
	for range 3 {
		d, err := e.Allow(ctx, Attrs{"user": "u"})
		if err != nil || d.Source != FromBackend {
			t.Fatalf("%+v %v", d, err)
		}
		allowed = append(allowed, d.Allowed)
	}
	if fmt.Sprint(allowed) != "[true true false]" {
		t.Errorf("allowed %v, want [true true false]", allowed)
	}
}

// TestLocalReloadsAfterFunctionFlush: the same contract on luahost, which runs the
// library form: after FUNCTION FLUSH the next call loads the library again and finds the
// key's state as the last call left it.
func TestLocalReloadsAfterFunctionFlush(t *testing.T) {
	clock := luahost.NewManualClock(time.Unix(1_800_000_000, 0))
	h := luahost.New(luahost.WithClock(clock))
	b := NewLocal(h)
	evalCall(t, b, gcraCall("noscript", algorithms.ServerTime))
	if _, err := h.Do(context.Background(), "FUNCTION", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	if r := evalCall(t, b, gcraCall("noscript", algorithms.ServerTime)); r.Rules[0].Remaining != 8 {
		t.Fatalf("after flush: %+v", r)
	}
	list, err := h.Do(context.Background(), "FUNCTION", "LIST")
	if err != nil || len(list.([]any)) != 1 {
		t.Fatalf("FUNCTION LIST after the reload: %v, %v; want the one library", list, err)
	}
}

// TestPipelinedMatchesUnbatched: concurrent decisions through a pipelined backend decide
// as one at a time would: a limit of 50 admits exactly 50 of 200 concurrent requests.
func TestPipelinedMatchesUnbatched(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	e := New(NewRedis(rdb, Pipelined()), compile(t, `policy "p" {
  rule "r" {
    algorithm = "sliding_log"
    key       = request.user
    limit     = 50
    window    = "1h"
  }
}`), WithTimeout(5*time.Second))
	var wg sync.WaitGroup
	var allowed, failed atomic.Int64
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := e.Allow(context.Background(), Attrs{"user": "u"})
			switch {
			case err != nil || d.Source != FromBackend:
				failed.Add(1)
			case d.Allowed:
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	if allowed.Load() != 50 || failed.Load() != 0 {
		t.Fatalf("allowed %d, failed %d; want 50 allowed, 0 failed", allowed.Load(), failed.Load())
	}
}

// TestPipelinedCallerLeavesAtItsDeadline: a caller whose deadline passes while its call
// waits in the pipeline (the server stalled) returns at that deadline, and the call, run
// when the server resumes, charges nothing.
func TestPipelinedCallerLeavesAtItsDeadline(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	e := New(NewRedis(rdb, Pipelined()), compile(t, `policy "p" {
  on_error = "deny"
  rule "r" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 5
    window    = "1h"
  }
}`), WithTimeout(100*time.Millisecond))
	ctx := context.Background()
	if d, err := e.Allow(ctx, Attrs{"user": "u"}); err != nil || !d.Allowed {
		t.Fatalf("before the stall: %+v %v", d, err)
	}
	srv.Pause(t)
	start := time.Now()
	d, err := e.Allow(ctx, Attrs{"user": "u"})
	took := time.Since(start)
	srv.Resume()
	if err != nil || d.Source == FromBackend {
		t.Fatalf("during the stall: %+v %v", d, err)
	}
	if took > 2*time.Second {
		t.Errorf("the caller waited %v with a 100ms deadline", took)
	}
	// The pipeline is one ordered stream: the peek runs after the stalled call.
	p, err := e.Peek(ctx, Attrs{"user": "u"})
	if err != nil {
		t.Fatal(err)
	}
	if p == nil || p.Source != FromBackend || p.Rules[0].Remaining != 4 {
		t.Fatalf("after the stall: %+v %v (want 4 remaining: the late call charged nothing)", p, err)
	}
}
