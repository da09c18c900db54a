package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rlctl/rlctl/internal/redistest"
)

// sharedPolicies holds one on_error = "local" policy per limit shape, each of one rule
// whose limit is 30 (a window's limit, a bucket's capacity, a burst, the leases held at
// once), with a rate too slow to refill during the test; share is their local_share.
func sharedPolicies(share int) string {
	var src string
	for _, r := range []struct{ name, params string }{
		{"log", `algorithm = "sliding_log"` + "\n    limit = 30\n    window = \"1h\""},
		{"window", `algorithm = "fixed_window"` + "\n    limit = 30\n    window = \"1h\"\n    accept_bound = true"},
		{"bucket", `algorithm = "token_bucket"` + "\n    capacity = 30\n    rate = \"1/h\""},
		{"gcra", `algorithm = "gcra"` + "\n    rate = \"1/h\"\n    burst = 30"},
		{"leases", `algorithm = "concurrency"` + "\n    max = 30\n    ttl = \"1h\""},
	} {
		src += fmt.Sprintf(`
policy %[1]q {
  match       = request.path == "/%[1]s"
  on_error    = "local"
  local_share = %[2]d
  rule "r" {
    key = request.user
    %[3]s
  }
}
`, r.name, share, r.params)
	}
	return src
}

// TestLocalShareBoundsAnOutage: three instances share a real redis-server, which is
// killed; each then decides alone on its in-process fallback, starting from empty
// counters. With local_share = 3 each admits exactly floor(30/3) = 10 of a rule's 30, so
// the three together admit at most the limit; with the default (1) each admits the whole
// 30, three times the limit: the over-admission local_share bounds.
func TestLocalShareBoundsAnOutage(t *testing.T) {
	for _, c := range []struct {
		share int
		each  int // allowed per instance per rule during the outage
	}{{3, 10}, {1, 30}} {
		t.Run(fmt.Sprintf("local_share=%d", c.share), func(t *testing.T) {
			srv := redistest.Start(t)
			plan := compile(t, sharedPolicies(c.share))
			clock := newFrozen()
			var fleet []*Engine
			for range 3 {
				fleet = append(fleet, New(NewRedis(srv.Client(t)), plan, WithClock(clock.now), WithBreaker(1, time.Hour), WithTimeout(time.Second)))
			}
			ctx := context.Background()
			paths := []string{"log", "window", "bucket", "gcra", "leases"}
			// Redis decides first: 5 of each rule's 30 are charged there.
			for _, p := range paths {
				for range 5 {
					if d, err := fleet[0].Allow(ctx, Attrs{"path": "/" + p, "user": "u"}); err != nil || !d.Allowed || d.Source != FromBackend {
						t.Fatalf("%s before the outage: %+v, %v", p, d, err)
					}
				}
			}
			srv.Kill(t)
			for i, e := range fleet {
				for _, p := range paths {
					allowed := 0
					for range 40 {
						d, err := e.Allow(ctx, Attrs{"path": "/" + p, "user": "u"})
						if err != nil || d.Source != FromLocal {
							t.Fatalf("instance %d, %s: %+v, %v", i, p, d, err)
						}
						if d.Allowed {
							allowed++
							if d.Rules[0].Limit != int64(c.each) {
								t.Errorf("instance %d, %s: reported limit %d, want the share %d", i, p, d.Rules[0].Limit, c.each)
							}
						}
					}
					if allowed != c.each {
						t.Errorf("instance %d, %s: %d allowed during the outage, want %d", i, p, allowed, c.each)
					}
				}
			}
		})
	}
}

// TestLocalShareReleasesLeases: a lease taken on the fallback is held, and released on
// it, with the shared parameters: after releasing one of its 10, an instance admits
// exactly one more.
func TestLocalShareReleasesLeases(t *testing.T) {
	srv := redistest.Start(t)
	clock := newFrozen()
	e := New(NewRedis(srv.Client(t)), compile(t, sharedPolicies(3)), WithClock(clock.now), WithBreaker(1, time.Hour), WithTimeout(time.Second))
	srv.Kill(t)
	ctx := context.Background()
	req := Attrs{"path": "/leases", "user": "u"}
	var held []*Decision
	for range 10 {
		d, err := e.Allow(ctx, req)
		if err != nil || !d.Allowed || d.Source != FromLocal {
			t.Fatalf("lease %d: %+v, %v", len(held), d, err)
		}
		held = append(held, d)
	}
	if d, err := e.Allow(ctx, req); err != nil || d.Allowed {
		t.Fatalf("an 11th lease of 10: %+v, %v", d, err)
	}
	if h := held[0].held; len(h) != 1 || !slices.Equal(h[0].rule.Params, []int64{10, 3_600_000_000, 0}) {
		t.Fatalf("the lease is held as %+v, want it with the shared parameters", h)
	}
	if err := e.Release(ctx, held[0]); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		if d, err := e.Allow(ctx, req); err != nil || d.Allowed != want {
			t.Fatalf("after a release, request %d: %+v, %v; want allowed %v", i, d, err, want)
		}
	}
}

// TestLocalShareOfAPerRequestLimit: a limit read per request (a lookup table, so the
// compiled rule leaves it to the call) is shared as the constants are: 60 and 30 among 3
// instances are 20 and 10 on each.
func TestLocalShareOfAPerRequestLimit(t *testing.T) {
	srv := redistest.Start(t)
	e := New(NewRedis(srv.Client(t)), compile(t, `
locals {
  tiers = { pro = 60, free = 30 }
}
policy "p" {
  on_error    = "local"
  local_share = 3
  rule "r" {
    algorithm = "sliding_log"
    key       = request.user
    limit     = lookup(local.tiers, request.plan, 30)
    window    = "1h"
  }
}`), WithClock(newFrozen().now), WithBreaker(1, time.Hour), WithTimeout(time.Second))
	srv.Kill(t)
	ctx := context.Background()
	for plan, want := range map[string]int{"pro": 20, "free": 10} {
		allowed := 0
		for range 70 {
			d, err := e.Allow(ctx, Attrs{"user": plan + "-user", "plan": plan})
			if err != nil || d.Source != FromLocal {
				t.Fatalf("%s: %+v, %v", plan, d, err)
			}
			if d.Allowed {
				allowed++
			}
		}
		if allowed != want {
			t.Errorf("%s: %d allowed on the fallback, want %d", plan, allowed, want)
		}
	}
}
