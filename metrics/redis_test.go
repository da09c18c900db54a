package metrics

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// TestWatchRedis: on a real redis-server, rlctl_script_loads_total reads the watched
// backend's ScriptLoads at each scrape (a fresh server, then each FUNCTION FLUSH, makes
// one), and when a reload replaces the backend the count goes on from the replaced
// one's instead of falling back to the new backend's own.
func TestWatchRedis(t *testing.T) {
	srv := redistest.Start(t)
	plan := compile(t, denyOnError)
	m := New()
	reg := registered(t, m)
	var last float64
	scrape := func(step string, want float64) {
		t.Helper()
		got := value(t, reg, "rlctl_script_loads_total")
		if got != want {
			t.Errorf("%s: rlctl_script_loads_total = %v, want %v", step, got, want)
		}
		if got < last {
			t.Errorf("%s: rlctl_script_loads_total went back from %v to %v", step, last, got)
		}
		last = got
	}
	flush := func() {
		t.Helper()
		if _, err := srv.Do("FUNCTION", "FLUSH"); err != nil {
			t.Fatal(err)
		}
	}
	run := func(e *engine.Engine) {
		t.Helper()
		if d := allow(t, e, "u"); d.Source != engine.FromBackend {
			t.Fatalf("decision not made by Redis: %+v", d)
		}
	}

	scrape("before any backend", 0)
	first := engine.NewRedis(srv.Client(t))
	m.WatchRedis(first)
	e := engine.New(first, plan, engine.WithHooks(m.Hooks()), engine.WithTimeout(time.Minute))
	run(e)
	scrape("first call on a fresh server", 1)
	flush()
	run(e)
	run(e)
	scrape("after FUNCTION FLUSH", 2)

	// A reload: a new backend on a new client; the server still holds the library.
	second := engine.NewRedis(srv.Client(t))
	m.WatchRedis(second)
	scrape("after the swap", 2)
	e = engine.New(second, plan, engine.WithHooks(m.Hooks()), engine.WithTimeout(time.Minute))
	run(e)
	scrape("the new backend's first call", 2)
	flush()
	run(e)
	scrape("after another FUNCTION FLUSH", 3)
	m.WatchRedis(second)
	scrape("watching the same backend again", 3)
	m.WatchRedis(nil)
	scrape("watching nothing", 3)
	if first.ScriptLoads()+second.ScriptLoads() != 3 {
		t.Errorf("the backends counted %d and %d loads; the test expects 2 and 1", first.ScriptLoads(), second.ScriptLoads())
	}
	wantSeries(t, reg, "rlctl_script_loads_total 3", "rlctl_script_loads_total")
}

// TestWatchRedisBatches: rlctl_batched_calls_total and rlctl_batches_total read the
// watched backend's Batches: decisions made one after another go alone and count in
// neither; concurrent ones on a real redis-server share script calls, each counted once,
// and the counts go on from a replaced backend's.
func TestWatchRedisBatches(t *testing.T) {
	srv := redistest.Start(t)
	plan := compile(t, denyOnError)
	m := New()
	reg := registered(t, m)
	first := engine.NewRedis(srv.Client(t))
	m.WatchRedis(first)
	e := engine.New(first, plan, engine.WithHooks(m.Hooks()), engine.WithTimeout(time.Minute))
	for range 3 {
		allow(t, e, "u")
	}
	if c, b := value(t, reg, "rlctl_batched_calls_total"), value(t, reg, "rlctl_batches_total"); c != 0 || b != 0 {
		t.Errorf("decisions one after another: %v batched calls in %v batches, want none", c, b)
	}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 20 {
				allow(t, e, fmt.Sprint("u", w, "-", i))
			}
		})
	}
	wg.Wait()
	calls, batches := first.Batches()
	if batches == 0 || calls < 2*batches || calls > 320 {
		t.Fatalf("16 concurrent callers: %d calls in %d batches", calls, batches)
	}
	if c, b := value(t, reg, "rlctl_batched_calls_total"), value(t, reg, "rlctl_batches_total"); c != float64(calls) || b != float64(batches) {
		t.Errorf("scraped %v calls in %v batches, the backend counts %d in %d", c, b, calls, batches)
	}
	m.WatchRedis(engine.NewRedis(srv.Client(t)))
	if c := value(t, reg, "rlctl_batched_calls_total"); c != float64(calls) {
		t.Errorf("after a reload's new backend: %v batched calls, want the replaced one's %d", c, calls)
	}
}
