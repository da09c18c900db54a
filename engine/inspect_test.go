package engine

import (
	"context"
	"testing"
	"time"
)

// TestInspect: Inspect reports each rule's peek, the block running, the override in force
// and the list memberships, and charges nothing. On both backends.
func TestInspect(t *testing.T) {
	const src = `
policy "api" {
  clock = "client"
  rule "per_ip" {
    algorithm = "fixed_window"
    key       = request.ip
    limit     = 2
    window    = "1h"
    block_for = "10m"
    deny      = list("banned")
  }
  rule "per_user" {
    algorithm   = "gcra"
    key         = request.user
    rate        = "1/s"
    burst       = 5
    overridable = true
    exempt      = list("staff")
  }
  rule "plain" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 100
    window    = "1h"
  }
}
`
	clock := newFrozen()
	for name, b := range backends(t, clock) {
		t.Run(name, func(t *testing.T) {
			e := New(b, compile(t, src), WithClock(clock.now))
			ctx := context.Background()
			req := Attrs{"ip": "192.0.2.1", "user": "acme"}
			inspect := func() []Inspection {
				t.Helper()
				in, err := e.Inspect(ctx, req)
				if err != nil || len(in) != 3 {
					t.Fatalf("inspect: %+v %v", in, err)
				}
				return in
			}
			in := inspect()
			if !in[0].Allowed || in[0].Remaining != 2 || !in[0].BlockedUntil.IsZero() || len(in[0].Lists) != 1 || in[0].Lists[0].Member || !in[0].Lists[0].Deny {
				t.Fatalf("fresh per_ip: %+v", in[0])
			}
			if in[1].Override != nil || len(in[1].Lists) != 1 || in[1].Lists[0].List != "staff" || in[1].Lists[0].Deny || in[2].Lists != nil {
				t.Fatalf("fresh per_user, plain: %+v %+v", in[1], in[2])
			}
			for range 3 { // two allowed, the third denied: the offence starts a block
				if _, err := e.Allow(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.SetOverride(ctx, req, "api", "per_user", map[string]string{"burst": "50"}, clock.now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if _, err := e.AddToList(ctx, "staff", req); err != nil {
				t.Fatal(err)
			}
			clock.advance(time.Minute)
			in = inspect()
			if in[0].Allowed || in[0].BlockedUntil.IsZero() || in[0].BlockedUntil.Sub(clock.now()) != 9*time.Minute || in[0].RetryAfter != 9*time.Minute {
				t.Fatalf("blocked per_ip: %+v (now %v)", in[0], clock.now())
			}
			o := in[1].Override
			if o == nil || o.Figures != "rate=1/s burst=50" || !o.Until.Equal(clock.now().Add(59*time.Minute)) || !in[1].Lists[0].Member {
				t.Fatalf("per_user: %+v %+v", in[1], o)
			}
			// Inspecting charged nothing: the same again.
			again := inspect()
			if again[0].Remaining != in[0].Remaining || again[1].Remaining != in[1].Remaining || again[2].Remaining != in[2].Remaining {
				t.Fatalf("a second inspection differs: %+v, then %+v", in, again)
			}
		})
	}
}
