package engine

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/internal/redistest"
)

// overridePolicy gives each user a burst of 10 at 10 a second, overridable per user; its
// per-address rule is not overridable.
const overridePolicy = `
policy "api" {
  clock = "client"
  rule "per_user" {
    algorithm   = "gcra"
    key         = request.user
    rate        = "10/s"
    burst       = 10
    overridable = true
  }
  rule "per_window" {
    algorithm   = "fixed_window"
    key         = request.user
    limit       = 1000
    window      = "1h"
    overridable = true
  }
  rule "per_ip" {
    algorithm = "fixed_window"
    key       = request.ip
    limit     = 1000
    window    = "1h"
  }
}
`

// TestOverride: an override changes one key's figures at the next decision, carrying what
// the key used (gcra: the cells used, at most the new burst); other keys keep the
// policy's; reading shows it; clearing converts back; an override with an end ends at it
// exactly; and what cannot be overridden says why. On both backends.
func TestOverride(t *testing.T) {
	clock := newFrozen()
	for name, b := range backends(t, clock) {
		t.Run(name, func(t *testing.T) {
			e := New(b, compile(t, overridePolicy), WithClock(clock.now))
			ctx := context.Background()
			acme, bob := Attrs{"user": "acme", "ip": "192.0.2.1"}, Attrs{"user": "bob", "ip": "192.0.2.2"}
			decide := func(step string, a Attrs, allowed bool, remaining, limit int64, retry time.Duration) {
				t.Helper()
				d, err := e.Allow(ctx, a)
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				r := d.Rules[0]
				if d.Allowed != allowed || r.Remaining != remaining || r.Limit != limit || d.RetryAfter != retry {
					t.Fatalf("%s: allowed %v remaining %d limit %d retry-after %v; want %v %d %d %v", step, d.Allowed, r.Remaining, r.Limit, d.RetryAfter, allowed, remaining, limit, retry)
				}
			}
			for i := range 10 {
				decide("burst", acme, true, int64(9-i), 10, 0)
			}
			decide("over", acme, false, 0, 10, 100*time.Millisecond)
			if o, err := e.Override(ctx, acme, "api", "per_user"); err != nil || o != nil {
				t.Fatalf("override before any: %+v %v, want none", o, err)
			}
			if err := e.SetOverride(ctx, acme, "api", "per_user", map[string]string{"rate": "100/s", "burst": "200"}, time.Time{}); err != nil {
				t.Fatal(err)
			}
			// The 10 cells used count against the new burst of 200.
			decide("raised", acme, true, 189, 200, 0)
			decide("another user", bob, true, 9, 10, 0)
			o, err := e.Override(ctx, acme, "api", "per_user")
			if err != nil || o == nil || o.Figures != "rate=100/s burst=200" || o.Own != "rate=10/s burst=10" || o.Limit != "100/s, burst 200" || !o.Until.IsZero() || !strings.Contains(o.Key, "{api:per_user:gcra:acme}") {
				t.Fatalf("override: %+v %v", o, err)
			}
			// Cleared: 11 cells used, at most the policy's burst of 10: the key is full.
			if err := e.ClearOverride(ctx, acme, "api", "per_user"); err != nil {
				t.Fatal(err)
			}
			decide("cleared", acme, false, 0, 10, 100*time.Millisecond)
			if o, err := e.Override(ctx, acme, "api", "per_user"); err != nil || o != nil {
				t.Fatalf("override after clear: %+v %v, want none", o, err)
			}
			// Lowered until 1s from now: 10 cells used carry at most the new burst of 2.
			until := clock.now().Add(time.Second)
			if err := e.SetOverride(ctx, acme, "api", "per_user", map[string]string{"rate": "1/s", "burst": "2"}, until); err != nil {
				t.Fatal(err)
			}
			decide("lowered", acme, false, 0, 2, time.Second)
			if o, _ := e.Override(ctx, acme, "api", "per_user"); o == nil || !o.Until.Equal(until) {
				t.Fatalf("override until: %+v, want until %v", o, until)
			}
			clock.advance(time.Second - time.Microsecond)
			decide("1µs before the end", acme, false, 0, 2, time.Microsecond)
			clock.advance(time.Microsecond)
			// At the end the key holds 1 cell of 2 used under the override (one drained in
			// the second): 1 cell of the policy's 10.
			decide("ended", acme, true, 8, 10, 0)
			if o, err := e.Override(ctx, acme, "api", "per_user"); err != nil || o != nil {
				t.Fatalf("override after its end: %+v %v, want none", o, err)
			}

			// What cannot be overridden says why.
			for _, tc := range []struct {
				rule string
				set  map[string]string
				want string
			}{
				{"per_ip", map[string]string{"limit": "5"}, "not overridable"},
				{"per_user", map[string]string{"limit": "5"}, "gcra takes no limit"},
				{"per_user", map[string]string{"rate": "fast"}, `rate = "fast"`},
				{"per_window", map[string]string{"window": "1m"}, "keeps its window"},
				{"nope", map[string]string{"limit": "5"}, `no rule "nope"`},
			} {
				err := e.SetOverride(ctx, acme, "api", tc.rule, tc.set, time.Time{})
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s %v: %v, want an error saying %q", tc.rule, tc.set, err, tc.want)
				}
			}
			if err := e.SetOverride(ctx, acme, "api", "per_user", map[string]string{"burst": "3"}, clock.now()); !errors.Is(err, ErrRequest) {
				t.Errorf("an until that has passed: %v, want ErrRequest", err)
			}
			// A window override keeps the count: acme was admitted 12 times this hour, over
			// a limit of 3, and has 8 left of 20.
			for _, c := range []struct {
				limit     string
				allowed   bool
				remaining int64
			}{{"3", false, 0}, {"20", true, 8}} {
				if err := e.SetOverride(ctx, acme, "api", "per_window", map[string]string{"limit": c.limit}, time.Time{}); err != nil {
					t.Fatal(err)
				}
				d, err := e.Peek(ctx, acme)
				if r := d.Rules[1]; err != nil || r.Allowed != c.allowed || r.Remaining != c.remaining || strconv.FormatInt(r.Limit, 10) != c.limit {
					t.Fatalf("peek after a window override to %s: %+v %v, want 12 counted", c.limit, d, err)
				}
			}
		})
	}
}

// TestOverrideOnACluster: overrides set, read and decide on a real 3-node cluster, in a
// sharded policy and not.
func TestOverrideOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	ctx := context.Background()
	for _, shard := range []string{"", `shard = request.tenant`} {
		src := `
policy "p" {
  ` + shard + `
  rule "a" {
    algorithm   = "sliding_window"
    key         = request.tenant
    limit       = 1
    window      = "1h"
    overridable = true
  }
}
`
		e := New(NewRedis(cl.Client(t)), compile(t, src), WithTimeout(time.Minute))
		a := Attrs{"tenant": "t-" + strings.TrimSpace(shard)}
		if d, err := e.Allow(ctx, a); err != nil || !d.Allowed {
			t.Fatalf("%q: 1st: %+v %v", shard, d, err)
		}
		if d, err := e.Allow(ctx, a); err != nil || d.Allowed {
			t.Fatalf("%q: 2nd: %+v %v, want denied", shard, d, err)
		}
		if err := e.SetOverride(ctx, a, "p", "a", map[string]string{"limit": "3"}, time.Time{}); err != nil {
			t.Fatalf("%q: %v", shard, err)
		}
		for i := range 2 {
			if d, err := e.Allow(ctx, a); err != nil || !d.Allowed || d.Rules[0].Limit != 3 {
				t.Fatalf("%q: after the override, call %d: %+v %v", shard, i+1, d, err)
			}
		}
		if d, err := e.Allow(ctx, a); err != nil || d.Allowed {
			t.Fatalf("%q: 4th: %+v %v, want denied at 3", shard, d, err)
		}
		if o, err := e.Override(ctx, a, "p", "a"); err != nil || o == nil || o.Figures != "limit=3 window=1h" {
			t.Fatalf("%q: override: %+v %v", shard, o, err)
		}
	}
}
