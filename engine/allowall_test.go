package engine

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// descriptorPolicy limits what a gateway describes of one client request: its address and
// its path, each a request of AllowAll (as Envoy sends two descriptors).
const descriptorPolicy = `
policy "edge" {
  rule "per_ip" {
    algorithm = "fixed_window"
    when      = request.remote_address != ""
    key       = request.remote_address
    limit     = 2
    window    = "1h"
  }
  rule "per_path" {
    algorithm = "fixed_window"
    when      = request.path != ""
    key       = request.path
    limit     = 10
    window    = "1h"
  }
}`

// TestAllowAllIsOneDecision: the rules of several requests are charged all or nothing, and
// each result says which request it belongs to, on Redis and on luahost.
func TestAllowAllIsOneDecision(t *testing.T) {
	clock := newFrozen()
	ctx := context.Background()
	for name, b := range backends(t, clock) {
		t.Run(name, func(t *testing.T) {
			e := New(b, compile(t, descriptorPolicy), WithClock(clock.now), WithTimeout(0))
			rs := []dsl.Request{Attrs{"remote_address": "10.0.0.1"}, Attrs{"path": "/a"}}
			for i := range 4 {
				d, err := e.AllowAll(ctx, rs, nil)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed != (i < 2) || len(d.Rules) != 2 {
					t.Fatalf("call %d: %+v", i+1, d)
				}
				if d.Rules[0].Rule != "per_ip" || d.Rules[0].Request != 0 || d.Rules[1].Rule != "per_path" || d.Rules[1].Request != 1 {
					t.Fatalf("call %d: rules %+v", i+1, d.Rules)
				}
				if !d.Allowed && (d.Decider != 0 || d.Rules[1].Remaining != 8) {
					t.Fatalf("call %d: denied by per_ip, per_path must keep 8 (not charged): %+v", i+1, d)
				}
			}
			// Units per request; 0 peeks at that request.
			d, err := e.AllowAll(ctx, []dsl.Request{Attrs{"remote_address": "10.0.0.2"}, Attrs{"path": "/a"}}, []int64{2, 0})
			if err != nil || !d.Allowed || d.Rules[0].Remaining != 0 || d.Rules[1].Remaining != 8 {
				t.Fatalf("2 units and a peek: %+v %v", d, err)
			}
			// A key two requests share is one counter, charged both their units, and
			// listed under each.
			same := []dsl.Request{Attrs{"remote_address": "10.0.0.3"}, Attrs{"remote_address": "10.0.0.3"}}
			d, err = e.AllowAll(ctx, same, nil)
			if err != nil || !d.Allowed || len(d.Rules) != 2 || d.Rules[0].Remaining != 0 || d.Rules[1].Remaining != 0 || d.Rules[1].Request != 1 {
				t.Fatalf("a shared key: %+v %v", d, err)
			}
			d, err = e.AllowAll(ctx, same[:1], nil)
			if err != nil || d.Allowed {
				t.Fatalf("the shared key was not charged twice: %+v %v", d, err)
			}
			// Three units against a limit of 2: the merged cost is checked, not each part.
			d, err = e.AllowAll(ctx, []dsl.Request{Attrs{"remote_address": "10.0.0.4"}, Attrs{"remote_address": "10.0.0.4"}}, []int64{1, 2})
			if err != nil || d.Allowed {
				t.Fatalf("1+2 units on a limit of 2 passed: %+v %v", d, err)
			}
			if p, _ := e.Peek(ctx, Attrs{"remote_address": "10.0.0.4"}); p.Rules[0].Remaining != 2 {
				t.Fatalf("the denied batch charged the key: %+v", p.Rules[0])
			}
			if _, err := e.AllowAll(ctx, rs, []int64{1}); err == nil {
				t.Error("a cost list of the wrong length was accepted")
			}
			if _, err := e.AllowAll(ctx, rs, []int64{1, -1}); err == nil {
				t.Error("a negative cost was accepted")
			}
		})
	}
}

// TestAllowAllOnACluster: requests whose keys live in different slots are still one
// decision: a denial in one slot gives back what the other slots charged.
func TestAllowAllOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	clock := newFrozen()
	ctx := context.Background()
	e := New(NewRedis(cl.Client(t)), compile(t, descriptorPolicy), WithClock(clock.now), WithTimeout(time.Minute)) // a loaded machine must not fail a call open
	// Find a path whose key is in another slot than the address's.
	ip := Attrs{"remote_address": "10.1.1.1"}
	var path Attrs
	pd, err := e.Peek(ctx, ip)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; path == nil; i++ {
		p := Attrs{"path": "/p" + string(rune('a'+i))}
		d, err := e.Peek(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if Slot(d.Rules[0].Key) != Slot(pd.Rules[0].Key) {
			path = p
		}
	}
	for range 2 {
		if d, err := e.Allow(ctx, ip); err != nil || !d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
	}
	d, err := e.AllowAll(ctx, []dsl.Request{path, ip}, nil)
	if err != nil || d.Allowed {
		t.Fatalf("the address is spent, the batch must be denied: %+v %v", d, err)
	}
	if p, err := e.Peek(ctx, path); err != nil || p.Rules[0].Remaining != 10 {
		t.Fatalf("the path's slot kept its charge after the denial: %+v %v", p, err)
	}
}

// TestAllowAllLargeBatch: the map path of merge (over 32 rules) merges shared keys as the
// scan does.
func TestAllowAllLargeBatch(t *testing.T) {
	e := New(NewLocal(luahost.New()), compile(t, descriptorPolicy))
	rs := make([]dsl.Request, 40)
	for i := range rs {
		rs[i] = Attrs{"remote_address": "10.9.9." + strconv.Itoa(i%20)} // each address twice
	}
	d, err := e.AllowAll(context.Background(), rs, nil)
	if err != nil || !d.Allowed || len(d.Rules) != 40 {
		t.Fatalf("%+v %v", d, err)
	}
	for i, r := range d.Rules {
		if r.Remaining != 0 || r.Request != i {
			t.Fatalf("rule %d: %+v, want the address's limit of 2 spent by its two requests", i, r)
		}
	}
}
