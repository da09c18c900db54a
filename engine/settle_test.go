package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/internal/redistest"
)

// tokensPolicy lets each user spend 1,000 tokens a minute (one every 60ms), all at once
// at most.
const tokensPolicy = `
policy "llm" {
  clock = "client"
  rule "tokens" {
    algorithm = "gcra"
    key       = request.user
    rate      = "1000/m"
    burst     = 1000
  }
}
`

// remaining peeks at attrs' first rule.
func remaining(t *testing.T, e *Engine, attrs Attrs) (int64, bool, time.Duration) {
	t.Helper()
	d, err := e.Peek(context.Background(), attrs)
	if err != nil || len(d.Rules) == 0 {
		t.Fatalf("peek: %+v %v", d, err)
	}
	return d.Rules[0].Remaining, d.Allowed, d.RetryAfter
}

// TestSettle: an overdraft is owed and denies until it is earned back, exactly; an
// estimate above the true cost is given back while the reservation's charge still
// weighs, and only that much later; a reservation settles once; on both backends.
func TestSettle(t *testing.T) {
	clock := newFrozen()
	for name, b := range backends(t, clock) {
		t.Run(name, func(t *testing.T) {
			e := New(b, compile(t, tokensPolicy), WithClock(clock.now))
			ctx := context.Background()
			ann := Attrs{"user": "ann-" + name}
			res, err := e.Reserve(ctx, ann, 100)
			if err != nil || !res.Decision.Allowed || res.Decision.Rules[0].Remaining != 900 {
				t.Fatalf("reserve 100: %+v %v", res, err)
			}
			if err := res.Settle(ctx, 300); err != nil {
				t.Fatal(err)
			}
			if r, ok, _ := remaining(t, e, ann); r != 700 || !ok {
				t.Fatalf("after settling 300: remaining %d (allowed %v), want 700", r, ok)
			}
			if err := res.Settle(ctx, 300); !errors.Is(err, ErrRequest) {
				t.Fatalf("second settle: %v, want ErrRequest", err)
			}
			// 700 fit; 1,500 are used: 1,800 in all, a debt of 800 tokens past the burst.
			res, err = e.Reserve(ctx, ann, 700)
			if err != nil || !res.Decision.Allowed {
				t.Fatalf("reserve 700: %+v %v", res, err)
			}
			if err := res.Settle(ctx, 1500); err != nil {
				t.Fatal(err)
			}
			d, err := e.Allow(ctx, ann)
			// A request of 1 token waits until 1,801 tokens' time less the burst's: 801 × 60ms.
			if want := 801 * 60 * time.Millisecond; err != nil || d.Allowed || d.RetryAfter != want || d.Rules[0].Remaining != 0 {
				t.Fatalf("in debt: %+v %v; want denied, retry-after %v, remaining 0", d, err, want)
			}
			// A reservation denied for the debt settles nothing.
			denied, err := e.Reserve(ctx, ann, 1)
			if err != nil || denied.Decision.Allowed {
				t.Fatalf("reserve in debt: %+v %v", denied, err)
			}
			if err := denied.Settle(ctx, 5000); err != nil {
				t.Fatal(err)
			}
			clock.advance(801*60*time.Millisecond - time.Microsecond)
			if d, err := e.Allow(ctx, ann); err != nil || d.Allowed || d.RetryAfter != time.Microsecond {
				t.Fatalf("1µs before the debt is earned back: %+v %v", d, err)
			}
			clock.advance(time.Microsecond)
			if d, err := e.Allow(ctx, ann); err != nil || !d.Allowed {
				t.Fatalf("when the debt is earned back: %+v %v", d, err)
			}

			// Below the estimate: the difference comes back at once.
			bob := Attrs{"user": "bob-" + name}
			res, err = e.Reserve(ctx, bob, 500)
			if err != nil || !res.Decision.Allowed {
				t.Fatalf("reserve 500: %+v %v", res, err)
			}
			if err := res.Settle(ctx, 100); err != nil {
				t.Fatal(err)
			}
			if r, _, _ := remaining(t, e, bob); r != 900 {
				t.Fatalf("after settling 100 of 500: remaining %d, want 900", r)
			}
			clock.advance(time.Hour)
			// Late, only what the charge still weighs: 29s after a charge of 500 tokens
			// (30s of them), under a second's worth (less the engine's 50ms timeout) is
			// left: 15 tokens of the 500.
			res, err = e.Reserve(ctx, bob, 500)
			if err != nil || !res.Decision.Allowed {
				t.Fatalf("reserve 500: %+v %v", res, err)
			}
			clock.advance(29 * time.Second)
			if r, _, _ := remaining(t, e, bob); r != 983 {
				t.Fatalf("29s after: remaining %d, want 983", r)
			}
			if err := res.Settle(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if r, _, _ := remaining(t, e, bob); r != 998 {
				t.Fatalf("after a late settlement of 0: remaining %d, want 998 (15 tokens given back)", r)
			}
			clock.advance(time.Hour)

			// An estimate of 0 charges nothing, and settles the whole cost.
			cy := Attrs{"user": "cy-" + name}
			res, err = e.Reserve(ctx, cy, 0)
			if err != nil || !res.Decision.Allowed {
				t.Fatalf("reserve 0: %+v %v", res, err)
			}
			if err := res.Settle(ctx, 250); err != nil {
				t.Fatal(err)
			}
			if r, _, _ := remaining(t, e, cy); r != 750 {
				t.Fatalf("after settling 250 of 0: remaining %d, want 750", r)
			}
		})
	}
}

// TestSettleWindows: a window's count is given back while its window runs, and nothing
// once it has ended; a rule that carries no debt refuses an overdraft before anything is
// charged, and still settles below its estimate.
func TestSettleWindows(t *testing.T) {
	clock := newFrozen()
	src := `
policy "p" {
  clock = "client"
  rule "hourly" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 100
    window    = "1h"
  }
  rule "log" {
    algorithm = "sliding_log"
    key       = request.user
    limit     = 100
    window    = "1h"
  }
}
`
	for name, b := range backends(t, clock) {
		t.Run(name, func(t *testing.T) {
			e := New(b, compile(t, src), WithClock(clock.now))
			ctx := context.Background()
			clock.advance(time.Duration(3_600_000_000-clock.us.Load()%3_600_000_000) * time.Microsecond) // a window's start
			u := Attrs{"user": "u-" + name}
			res, err := e.Reserve(ctx, u, 10)
			if err != nil || !res.Decision.Allowed {
				t.Fatalf("reserve: %+v %v", res, err)
			}
			if err := res.Settle(ctx, 11); !errors.Is(err, ErrRequest) || !strings.Contains(err.Error(), "sliding_log carries no debt") {
				t.Fatalf("overdraft on sliding_log: %v, want ErrRequest", err)
			}
			if r, _, _ := remaining(t, e, u); r != 90 {
				t.Fatalf("after a refused overdraft: remaining %d, want 90 (nothing charged)", r)
			}
			if err := res.Settle(ctx, 4); err != nil {
				t.Fatal(err)
			}
			if r, _, _ := remaining(t, e, u); r != 96 {
				t.Fatalf("after settling 4 of 10: remaining %d, want 96", r)
			}
			// The window ends: a reservation made in it gives nothing back in the next.
			res, err = e.Reserve(ctx, u, 10)
			if err != nil || !res.Decision.Allowed {
				t.Fatalf("reserve: %+v %v", res, err)
			}
			clock.advance(time.Hour)
			if _, err := e.AllowN(ctx, u, 50); err != nil {
				t.Fatal(err)
			}
			if err := res.Settle(ctx, 0); err != nil {
				t.Fatal(err)
			}
			d, err := e.Peek(ctx, u)
			if err != nil || d.Rules[0].Remaining != 50 {
				t.Fatalf("the next window after a late settlement: %+v %v; want fixed_window remaining 50", d.Rules, err)
			}
		})
	}
}

// TestSettleOnACluster: a request whose two rules lie in different hash slots of a
// 3-node Redis Cluster settles its overdraft on both nodes.
func TestSettleOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	clock := newFrozen()
	src := tokensPolicy + strings.Replace(strings.Replace(tokensPolicy, `policy "llm"`, `policy "tenant"`, 1), "request.user", "request.tenant", 1)
	e := New(NewRedis(cl.Client(t)), compile(t, src), WithClock(clock.now), WithTimeout(time.Minute))
	ctx := context.Background()
	attrs := Attrs{"user": "ann", "tenant": "acme"}
	res, err := e.Reserve(ctx, attrs, 10)
	if err != nil || !res.Decision.Allowed || len(res.Decision.Rules) != 2 {
		t.Fatalf("reserve: %+v %v", res, err)
	}
	if Slot(res.Decision.Rules[0].Key) == Slot(res.Decision.Rules[1].Key) {
		t.Fatalf("keys %s and %s share a slot: the test needs two", res.Decision.Rules[0].Key, res.Decision.Rules[1].Key)
	}
	if err := res.Settle(ctx, 1200); err != nil {
		t.Fatal(err)
	}
	// Each key peeked beside a fresh one (a denial leaves the later slots' rules out):
	// 1,200 tokens used, 200 past the burst, so a peek waits 200 × 60ms.
	for i, other := range []Attrs{{"user": "ann", "tenant": "other"}, {"user": "zed", "tenant": "acme"}} {
		d, err := e.Peek(ctx, other)
		if err != nil || d.Allowed || len(d.Rules) <= i {
			t.Fatalf("%v: %+v %v", other, d, err)
		}
		if r := d.Rules[i]; r.Allowed || r.RetryAfter != 200*60*time.Millisecond || r.Key != res.Decision.Rules[i].Key {
			t.Errorf("%s: %+v; want denied for 12s", res.Decision.Rules[i].Key, r)
		}
	}
}
