package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/luahost"
)

// countingBackend counts the calls that reach an in-process backend.
type countingBackend struct {
	*Local
	calls atomic.Int64
}

func (c *countingBackend) Eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error) {
	c.calls.Add(1)
	return c.Local.Eval(ctx, s, keys, argv)
}

// TestDenyCache: within a denial's retry-after the engine answers from memory; at the
// retry-after it asks the backend again, and the request passes.
func TestDenyCache(t *testing.T) {
	clock := newFrozen()
	b := &countingBackend{Local: NewLocal(luahost.New(luahost.WithClock(clockFunc(clock.now))))}
	e := New(b, compile(t, `
policy "c" {
  rule "r" {
    algorithm = "gcra"
    key       = request.user
    rate      = "1/s"
    burst     = 1
  }
}`), WithClock(clock.now), WithDenyCache(100))
	ctx := context.Background()
	req := Attrs{"user": "u"}
	if d, _ := e.Allow(ctx, req); !d.Allowed {
		t.Fatal("first request denied")
	}
	d, _ := e.Allow(ctx, req)
	if d.Allowed || d.Source != FromBackend || d.RetryAfter != time.Second {
		t.Fatalf("second request: %+v", d)
	}
	calls := b.calls.Load()
	clock.advance(400 * time.Millisecond)
	for range 10 {
		d, _ = e.Allow(ctx, req)
		if d.Allowed || d.Source != FromCache || d.RetryAfter != 600*time.Millisecond {
			t.Fatalf("cached denial: %+v", d)
		}
	}
	if b.calls.Load() != calls {
		t.Fatalf("cached denials reached the backend: %d calls", b.calls.Load()-calls)
	}
	if d, _ = e.Peek(ctx, req); d.Source != FromBackend {
		t.Fatalf("a peek must not come from the cache: %+v", d)
	}
	clock.advance(600 * time.Millisecond)
	if d, _ = e.Allow(ctx, req); !d.Allowed || d.Source != FromBackend {
		t.Fatalf("at the retry-after: %+v", d)
	}
}
