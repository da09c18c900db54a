package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlctl/rlctl/luahost"
)

// perIPLocal is a two-rule per-IP policy that falls back to the local backend.
const perIPLocal = `
policy "p" {
  on_error = "local"
  rule "ip_gcra" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "10/h"
    burst     = 10
  }
  rule "ip_log" {
    algorithm = "sliding_log"
    key       = request.ip
    limit     = 100
    window    = "1h"
  }
}`

// TestLocalFallbackMaxMemory: during an outage, 5,000 distinct IPs through a fallback
// capped at about 500 clients' state: every request is decided locally, the fallback's
// keyspace stays under its cap plus one call's writes, and the hook hears of every
// eviction exactly once. A client seen on every request keeps its state (LRU), so its
// 11th request within the hour is still denied.
func TestLocalFallbackMaxMemory(t *testing.T) {
	clock := newFrozen()
	down := &fakeBackend{inner: NewLocal(luahost.New())}
	down.failWith(func(context.Context, []string) error { return errors.New("connection refused") })
	const limit = 500 * 300
	var evicted atomic.Uint64
	e := New(down, compile(t, perIPLocal), WithClock(clock.now), WithBreaker(1, time.Hour),
		WithLocalMaxMemory(limit, luahost.AllKeysLRU),
		WithHooks(Hooks{Evicted: func(n uint64) { evicted.Add(n) }}))
	ctx := context.Background()
	hot := Attrs{"ip": "192.0.2.1"}
	hotAllowed := 0
	for i := range 5000 {
		d, err := e.Allow(ctx, Attrs{"ip": fmt.Sprintf("10.0.%d.%d", i/256, i%256)})
		if err != nil || d.Source != FromLocal || !d.Allowed {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
		if i%250 == 0 {
			d, err := e.Allow(ctx, hot)
			if err != nil || d.Source != FromLocal {
				t.Fatalf("hot request %d: %+v, %v", i, d, err)
			}
			if d.Allowed {
				hotAllowed++
			}
		}
		h := e.local.(*Native).local.h
		if used := h.MemoryUsage(); used > limit+2048 {
			t.Fatalf("request %d: the fallback holds %d bytes, cap %d", i, used, limit)
		}
	}
	h := e.local.(*Native).local.h
	if hotAllowed != 10 {
		t.Errorf("the client seen all along was allowed %d of 20 requests, want its burst of 10", hotAllowed)
	}
	if n := h.Evicted(); n < 8000 || evicted.Load() != n {
		t.Errorf("the host evicted %d keys, the hook heard of %d", n, evicted.Load())
	}
}

// TestLocalNoEvictionIsBackendFailure: an embedded backend full under noeviction answers
// with Redis's OOM error, which the engine classifies as a backend failure and decides by
// on_error, as it would for a Redis at maxmemory.
func TestLocalNoEvictionIsBackendFailure(t *testing.T) {
	clock := newFrozen()
	h := luahost.New(luahost.WithClock(clockFunc(clock.now)), luahost.WithMaxMemory(100*300, luahost.NoEviction))
	e := New(NewLocal(h), compile(t, strings.Replace(perIPLocal, `"local"`, `"deny"`, 1)), WithClock(clock.now))
	ctx := context.Background()
	var d *Decision
	for i := 0; i < 1000; i++ {
		var err error
		if d, err = e.Allow(ctx, Attrs{"ip": fmt.Sprintf("10.0.%d.%d", i/256, i%256)}); err != nil {
			t.Fatal(err)
		}
		if d.Source != FromBackend {
			break
		}
	}
	if d.Source != FromFailDeny || d.Allowed || Classify(d.Err) != ClassBackend ||
		!strings.HasPrefix(d.Err.Error(), "OOM command not allowed when used memory > 'maxmemory'.") {
		t.Fatalf("a full noeviction host decided %+v (err %v, class %v)", d, d.Err, Classify(d.Err))
	}
	if h.Evicted() != 0 {
		t.Errorf("noeviction evicted %d keys", h.Evicted())
	}
}
