package httplimit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/httplimit"
)

// TestWithDelay: with WithDelay, requests past the burst wait for their turn (on the
// rig's virtual clock) and are served, spaced at the rule's rate; one whose turn is
// beyond the max delay is refused with 429 and the Retry-After it would wait.
func TestWithDelay(t *testing.T) {
	var mu sync.Mutex
	var waited []time.Duration
	var g *rig
	sleep := func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waited = append(waited, d)
		mu.Unlock()
		return nil // the clock stands still: the requests arrive together
	}
	g = newRig(t, `
policy "p" {
  clock = "client"
  rule "per_ip" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "2/s"
    burst     = 2
  }
}`, rigOpts{mw: []httplimit.Option{httplimit.WithDelay(2 * time.Second)}, engine: []engine.Option{engine.WithSleep(sleep)}})
	for i := range 6 {
		if r := g.get("/"); r.status != 200 {
			t.Fatalf("request %d: %d, want 200 after its wait", i+1, r.status)
		}
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second}
	if len(waited) != len(want) {
		t.Fatalf("waited %v, want %v", waited, want)
	}
	for i := range want {
		if waited[i] != want[i] {
			t.Fatalf("waited %v, want %v", waited, want)
		}
	}
	r := g.get("/")
	if r.status != 429 || r.header.Get("Retry-After") != "3" {
		t.Fatalf("7th: %d, Retry-After %q; want 429, 3 (2.5s, a wait beyond 2s, rounded up)", r.status, r.header.Get("Retry-After"))
	}
}
