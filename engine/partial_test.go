package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rlctl/rlctl/internal/redistest"
)

// AllowAtMost grants the largest number of units that fits, then what is left, then
// denies with the wait for one unit, on every algorithm that charges by cost and on both
// backends.
func TestAllowAtMost(t *testing.T) {
	clock := newFrozen()
	for name, b := range backends(t, clock) {
		for alg, params := range limitOf100 {
			if alg == "concurrency" {
				continue
			}
			t.Run(name+"/"+alg, func(t *testing.T) {
				src := fmt.Sprintf("policy \"p\" {\n  rule \"r\" {\n    algorithm = %q\n    key = \"%s-%s\"\n    %s\n  }\n}\n", alg, name, alg, params)
				e := New(b, compile(t, src), WithClock(clock.now))
				ctx := context.Background()
				for i, want := range []int64{60, 40, 0} {
					d, err := e.AllowAtMost(ctx, Attrs{}, 60)
					if err != nil {
						t.Fatal(err)
					}
					if d.Granted != want || d.Allowed != (want > 0) {
						t.Fatalf("call %d: granted %d (allowed %v), want %d", i+1, d.Granted, d.Allowed, want)
					}
					if got := d.Rules[0].Cost; got != 60 {
						t.Fatalf("call %d: the rule's cost is %d, want the 60 units asked", i+1, got)
					}
					if want == 0 && (d.RetryAfter <= 0 || d.Rules[0].Remaining != 0) {
						t.Fatalf("denied with retry-after %v and remaining %d, want the wait for one unit and 0", d.RetryAfter, d.Rules[0].Remaining)
					}
				}
				if d, err := e.Peek(ctx, Attrs{}); err != nil || d.Rules[0].Remaining != 0 {
					t.Fatalf("after 100 units granted: %+v %v, want remaining 0", d, err)
				}
			})
		}
	}
}

// In a stack the grant is the least any enforcing rule allows, counted in units of each
// rule's cost; a shadow rule does not cap it; every rule is charged the grant.
func TestAllowAtMostStack(t *testing.T) {
	clock := newFrozen()
	const src = `
policy "p" {
  rule "user" {
    algorithm = "fixed_window"
    key       = "u"
    limit     = 10
    window    = "1h"
  }
  rule "tenant" {
    algorithm = "gcra"
    key       = "t"
    rate      = "1/h"
    burst     = 13
    cost      = 2
  }
  rule "trial" {
    algorithm = "fixed_window"
    key       = "s"
    limit     = 1
    window    = "1h"
    shadow    = true
  }
}
`
	for name, b := range backends(t, clock) {
		t.Run(name, func(t *testing.T) {
			e := New(b, compile(t, src), WithClock(clock.now))
			ctx := context.Background()
			d, err := e.AllowAtMost(ctx, Attrs{}, 10)
			if err != nil {
				t.Fatal(err)
			}
			// tenant's 13 fit 6 units of 2.
			if !d.Allowed || d.Granted != 6 {
				t.Fatalf("granted %d (allowed %v), want 6", d.Granted, d.Allowed)
			}
			if u, tn := d.Rules[0].Remaining, d.Rules[1].Remaining; u != 4 || tn != 1 {
				t.Fatalf("remaining user %d, tenant %d; want 4 and 1 (each charged 6 units)", u, tn)
			}
			d, err = e.AllowAtMost(ctx, Attrs{}, 10)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed || d.Granted != 0 || d.Rules[d.Decider].Rule != "tenant" {
				t.Fatalf("with 1 left on tenant (a unit costs 2): %+v, want denied by tenant", d)
			}
			// One unit (2) needs one more token: an hour at 1/h, less the time gcra has already counted.
			if d.RetryAfter <= 0 || d.RetryAfter > time.Hour {
				t.Fatalf("retry-after %v, want the wait for one unit (at most an hour)", d.RetryAfter)
			}
		})
	}
}

// Requests AllowAtMost cannot decide are refused before any call.
func TestAllowAtMostRefuses(t *testing.T) {
	const src = `
policy "p" {
  rule "conns" {
    algorithm = "concurrency"
    key       = "c"
    max       = 3
    ttl       = "1m"
  }
}
`
	clock := newFrozen()
	b := backends(t, clock)["luahost"]
	e := New(b, compile(t, src), WithClock(clock.now))
	for _, n := range []int64{0, -1, 1} {
		if _, err := e.AllowAtMost(context.Background(), Attrs{}, n); !errors.Is(err, ErrRequest) {
			t.Fatalf("AllowAtMost(%d) on a concurrency rule: %v, want ErrRequest", n, err)
		}
	}
}

// On a Redis Cluster, rules in two slots: whichever slot is asked first, the grant is the
// smaller rule's and the other rule keeps only that charge (the first slot gives back
// what it granted beyond it).
func TestAllowAtMostOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	ctx := context.Background()
	for i, limits := range [][2]int{{10, 4}, {4, 10}} {
		src := fmt.Sprintf(`
policy "p" {
  rule "a" {
    algorithm = "fixed_window"
    key       = "a%d"
    limit     = %d
    window    = "1h"
  }
  rule "b" {
    algorithm = "fixed_window"
    key       = "b%d"
    limit     = %d
    window    = "1h"
  }
}
`, i, limits[0], i, limits[1])
		e := New(NewRedis(cl.Client(t)), compile(t, src), WithTimeout(time.Minute))
		d, err := e.AllowAtMost(ctx, Attrs{}, 8)
		if err != nil {
			t.Fatal(err)
		}
		if Slot(d.Rules[0].Key) == Slot(d.Rules[1].Key) {
			t.Fatalf("keys %s and %s share a slot: the test needs two", d.Rules[0].Key, d.Rules[1].Key)
		}
		if !d.Allowed || d.Granted != 4 {
			t.Fatalf("limits %v: granted %d (allowed %v), want 4", limits, d.Granted, d.Allowed)
		}
		p, err := e.Peek(ctx, Attrs{})
		if err != nil {
			t.Fatal(err)
		}
		for k := range 2 {
			if want := int64(limits[k] - 4); p.Rules[k].Remaining != want {
				t.Fatalf("limits %v: rule %s has %d remaining, want %d (charged the grant only)", limits, p.Rules[k].Rule, p.Rules[k].Remaining, want)
			}
		}
	}
}
