package engine

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlctl/rlctl/internal/redistest"
)

func failurePolicy(mode string) string {
	return fmt.Sprintf(`
policy "f_%s" {
  on_error = %q
  rule "per_user" {
    algorithm = "gcra"
    key       = request.user
    rate      = "1000/s"
    burst     = 1000
  }
}`, mode, mode)
}

// TestRedisKilledMidLoad kills redis-server under load and restarts it: while it is down
// every decision follows the policy's on_error, nothing panics or returns an error, and
// decisions come from Redis again once it is back; no goroutine is left behind.
func TestRedisKilledMidLoad(t *testing.T) {
	want := map[string]struct {
		src     Source
		allowed bool
	}{
		"allow": {FromFailOpen, true},
		"deny":  {FromFailDeny, false},
		"local": {FromLocal, true},
	}
	for mode, w := range want {
		t.Run(mode, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			before := runtime.NumGoroutine()
			var degraded atomic.Int64
			e := New(NewRedis(rdb), compile(t, failurePolicy(mode)),
				WithTimeout(100*time.Millisecond), WithBreaker(3, 100*time.Millisecond),
				WithHooks(Hooks{Degraded: func(string, string, error) { degraded.Add(1) }}))

			var phase atomic.Int32 // 0 up, 1 down, 2 back up
			var mu sync.Mutex
			seen := map[int32]map[Source]int{0: {}, 1: {}, 2: {}}
			var bad []string
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := 0; i < 100_000; i++ {
						select {
						case <-stop:
							return
						default:
						}
						p := phase.Load()
						d, err := e.Allow(context.Background(), Attrs{"user": fmt.Sprint("u", g, "-", i%50)})
						mu.Lock()
						switch {
						case err != nil:
							bad = append(bad, err.Error())
						case p == 1 && d.Source != FromBackend && (d.Source != w.src || d.Allowed != w.allowed):
							bad = append(bad, fmt.Sprintf("down: source %d allowed %v", d.Source, d.Allowed))
						default:
							seen[p][d.Source]++
						}
						mu.Unlock()
						// Degraded decisions cost nothing; without a pause eight
						// goroutines would starve the breaker's probe of the two CPUs.
						time.Sleep(20 * time.Microsecond)
					}
				})
			}
			time.Sleep(150 * time.Millisecond)
			phase.Store(1)
			srv.Kill(t)
			time.Sleep(400 * time.Millisecond)
			srv.Restart(t)
			phase.Store(2)
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				back := seen[2][FromBackend]
				mu.Unlock()
				if back > 100 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			close(stop)
			wg.Wait()

			if len(bad) > 0 {
				t.Fatalf("%d bad decisions, first: %s", len(bad), bad[0])
			}
			if seen[0][FromBackend] == 0 {
				t.Fatalf("no decision from Redis before the kill: %v", seen)
			}
			if seen[1][w.src] == 0 || degraded.Load() == 0 {
				t.Fatalf("no %d-sourced decision while Redis was down: %v", w.src, seen)
			}
			if seen[2][FromBackend] <= 100 {
				t.Fatalf("decisions did not resume from Redis after the restart: %v", seen)
			}
			rdb.Close()
			waitGoroutines(t, before)
		})
	}
}

// waitGoroutines fails unless the goroutine count comes back to at most n (plus the
// runtime's own) within a few seconds.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	var now int
	for range 100 {
		if now = runtime.NumGoroutine(); now <= n+2 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	t.Fatalf("goroutines: %d before, %d after\n%s", n, now, buf[:runtime.Stack(buf, true)])
}

// TestScriptFlushMidLoad: FUNCTION FLUSH (SCRIPT FLUSH for the EVALSHA form) while
// requests flow is invisible to callers: decisions are made by Redis after every flush, and
// the flushed script is loaded again. (It used to SCRIPT FLUSH a server that ran the
// library form, which that flush does not touch, and it passed with no decision made.)
func TestScriptFlushMidLoad(t *testing.T) {
	for _, form := range []struct {
		name, flush string
		opts        []RedisOption
	}{
		{"fcall", "FUNCTION", nil},
		{"evalsha", "SCRIPT", []RedisOption{WithoutFunctions()}},
	} {
		t.Run(form.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			b := NewRedis(rdb, form.opts...)
			e := New(b, compile(t, failurePolicy("deny")), WithTimeout(time.Second))
			var failures atomic.Int64
			var decided atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := 0; i < 100_000; i++ {
						select {
						case <-stop:
							return
						default:
						}
						d, err := e.Allow(context.Background(), Attrs{"user": fmt.Sprint("f", g)})
						if err != nil || d.Source != FromBackend {
							failures.Add(1)
						}
						decided.Add(1)
					}
				})
			}
			const flushes = 20
			for f := range flushes {
				// Each flush lands while decisions flow: at least 50 are made after it.
				at := decided.Load()
				if _, err := srv.Do(form.flush, "FLUSH"); err != nil {
					t.Fatal(err)
				}
				for start := time.Now(); decided.Load() < at+50; time.Sleep(time.Millisecond) {
					if time.Since(start) > 10*time.Second {
						close(stop)
						wg.Wait()
						t.Fatalf("flush %d: %d decisions in 10s after it", f, decided.Load()-at)
					}
				}
			}
			close(stop)
			wg.Wait()
			if failures.Load() != 0 {
				t.Fatalf("%d of %d decisions failed or degraded across %s FLUSH", failures.Load(), decided.Load(), form.flush)
			}
			// A flush that the decisions after it did not reach may share a load with the
			// next one, but the script was lost and loaded again.
			if n := b.ScriptLoads(); n < 2 || n > flushes+1 {
				t.Fatalf("ScriptLoads = %d after %d flushes, want 2 to %d", n, flushes, flushes+1)
			}
		})
	}
}
