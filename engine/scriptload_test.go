package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rlctl/rlctl/internal/redistest"
)

// commandCalls returns how many times srv ran cmd ("function|load", "script|load",
// "eval"), from INFO commandstats: what the server saw, not what the client sent.
func commandCalls(t *testing.T, srv *redistest.Server, cmd string) int {
	t.Helper()
	info, err := srv.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	return commandCount(t, info, cmd)
}

// commandCount reads cmd's count of calls from the text of INFO commandstats.
func commandCount(t *testing.T, info, cmd string) int {
	t.Helper()
	calls, err := redistest.CommandCalls(info)
	if err != nil {
		t.Fatal(err)
	}
	return int(calls[cmd])
}

// TestFlushLoadsTheScriptOnce: at a cold start and after each FUNCTION FLUSH (SCRIPT FLUSH
// for the EVALSHA form), 32 callers that all find the script missing at once cost the
// server exactly one load, and every one of their decisions is made by Redis. (Each caller
// used to load the library itself: 24-32 FUNCTION LOADs per flush, queued behind one
// another past the callers' deadlines, and the breaker opened with Redis healthy.)
func TestFlushLoadsTheScriptOnce(t *testing.T) {
	const callers, burst, rounds = 32, 8, 4
	for _, form := range []struct {
		name, flush, load string
		opts              []RedisOption
	}{
		{"fcall", "FUNCTION", "function|load", nil},
		{"evalsha", "SCRIPT", "script|load", []RedisOption{WithoutFunctions()}},
	} {
		t.Run(form.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			o := rdb.Options()
			o.PoolSize, o.ContextTimeoutEnabled, o.MaxRetries = callers, true, -1
			b := NewRedis(rdb, form.opts...)
			var mu sync.Mutex
			var degraded []string
			e := New(b, compile(t, failurePolicy("deny")), WithTimeout(500*time.Millisecond), WithBreaker(3, time.Second),
				WithHooks(Hooks{Degraded: func(_, _ string, err error) {
					mu.Lock()
					degraded = append(degraded, err.Error())
					mu.Unlock()
				}}))
			for round := range rounds {
				if round > 0 { // round 0 is the cold start: nothing was ever loaded
					if _, err := srv.Do(form.flush, "FLUSH"); err != nil {
						t.Fatal(err)
					}
				}
				loads, evals := commandCalls(t, srv, form.load), commandCalls(t, srv, "eval")
				start := make(chan struct{})
				var wg sync.WaitGroup
				var bad []string
				for g := range callers {
					wg.Go(func() {
						<-start
						for i := range burst {
							d, err := e.Allow(context.Background(), Attrs{"user": fmt.Sprint("r", round, "-", g)})
							if err != nil || d.Source != FromBackend {
								mu.Lock()
								bad = append(bad, fmt.Sprintf("caller %d decision %d: source %v err %v %v", g, i, d.Source, err, d.Err))
								mu.Unlock()
							}
						}
					})
				}
				close(start)
				wg.Wait()
				if len(bad) > 0 || len(degraded) > 0 {
					t.Fatalf("round %d: %d of %d decisions not made by Redis (first: %v); degraded: %v", round, len(bad), callers*burst, bad[0:min(1, len(bad))], degraded)
				}
				if n := commandCalls(t, srv, form.load) - loads; n != 1 {
					t.Fatalf("round %d: the server ran %s %d times for %d callers missing the script, want 1", round, form.load, n, callers)
				}
				if n := commandCalls(t, srv, "eval") - evals; n != 0 {
					t.Fatalf("round %d: %d calls fell back to EVAL", round, n)
				}
			}
			if n := b.ScriptLoads(); n != rounds {
				t.Errorf("ScriptLoads = %d, want %d (one per round)", n, rounds)
			}
		})
	}
}
