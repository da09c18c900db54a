package engine

import (
	"context"
	"testing"

	"github.com/rlctl/rlctl/dsl"
)

// TestUnlimited: Decision.Unlimited names the requests an unlimited block of a matching
// policy names, for Allow, Peek and each request of AllowAll, and they charge nothing.
func TestUnlimited(t *testing.T) {
	clock := newFrozen()
	for name, b := range backends(t, clock) {
		t.Run(name, func(t *testing.T) {
			e := New(b, compile(t, `
policy "p" {
  match = request.domain == "d"
  rule "per_ip" {
    algorithm = "fixed_window"
    when      = request.ip != "127.0.0.1"
    key       = request.ip
    limit     = 1
    window    = "1h"
  }
  unlimited "loopback" {
    when = request.ip == "127.0.0.1"
  }
}
`), WithClock(clock.now))
			ctx := context.Background()
			local, other := Attrs{"domain": "d", "ip": "127.0.0.1"}, Attrs{"domain": "d", "ip": "10.0.0.1"}
			for range 3 {
				d, err := e.Allow(ctx, local)
				if err != nil || !d.Allowed || len(d.Rules) != 0 || !d.Unlimited(0) {
					t.Fatalf("Allow(loopback): %+v %v, want allowed, no rule, unlimited", d, err)
				}
			}
			if d, err := e.Peek(ctx, Attrs{"domain": "x", "ip": "127.0.0.1"}); err != nil || d.Unlimited(0) {
				t.Errorf("a request of another domain: %+v %v, want not unlimited", d, err)
			}
			d, err := e.AllowAll(ctx, []dsl.Request{other, local}, nil)
			if err != nil || !d.Allowed || d.Unlimited(0) || !d.Unlimited(1) || len(d.Rules) != 1 {
				t.Errorf("AllowAll(other, loopback): %+v %v, want request 1 unlimited and one rule", d, err)
			}
		})
	}
}

// TestUnlimitedReplaces: an unlimited block's replaces drops the rules it names from a
// decision it names a request of (envoyproxy/ratelimit's replaces on an unlimited
// descriptor), in Allow and across the requests of AllowAll, and from no other.
func TestUnlimitedReplaces(t *testing.T) {
	clock := newFrozen()
	for name, b := range backends(t, clock) {
		t.Run(name, func(t *testing.T) {
			e := New(b, compile(t, `
policy "p" {
  match = true
  rule "tenant" {
    algorithm = "fixed_window"
    when      = request.tenant != ""
    key       = request.tenant
    limit     = 1
    window    = "1h"
  }
  unlimited "internal" {
    when     = request.internal == "yes"
    replaces = ["tenant"]
  }
}
`), WithClock(clock.now))
			ctx := context.Background()
			tenant, internal := Attrs{"tenant": "t1"}, Attrs{"tenant": "t1", "internal": "yes"}
			if d, err := e.Allow(ctx, tenant); err != nil || !d.Allowed || len(d.Rules) != 1 {
				t.Fatalf("first: %+v %v, want allowed by tenant", d, err)
			}
			for range 3 {
				d, err := e.Allow(ctx, internal)
				if err != nil || !d.Allowed || len(d.Rules) != 0 || !d.Unlimited(0) {
					t.Fatalf("internal: %+v %v, want allowed, tenant replaced", d, err)
				}
			}
			if d, err := e.Allow(ctx, tenant); err != nil || d.Allowed {
				t.Errorf("tenant again: %+v %v, want denied (its limit of 1 is used)", d, err)
			}
			// Across requests: the internal one drops the other's tenant rule too.
			d, err := e.AllowAll(ctx, []dsl.Request{tenant, Attrs{"internal": "yes"}}, nil)
			if err != nil || !d.Allowed || len(d.Rules) != 0 || !d.Unlimited(1) {
				t.Errorf("AllowAll(tenant, internal): %+v %v, want allowed with tenant replaced", d, err)
			}
		})
	}
}
