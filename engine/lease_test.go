package engine

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// leasePolicy is a hot global key served from leases of 10 units, stacked on a per-user
// limit that is not leased; holdFor is lease_for (empty: the window).
func leasePolicy(holdFor string) string {
	hold := ""
	if holdFor != "" {
		hold = fmt.Sprintf("lease_for = %q", holdFor)
	}
	return fmt.Sprintf(`
policy "api" {
  clock = "client"
  rule "global" {
    algorithm = "fixed_window"
    key       = "all"
    limit     = 100
    window    = "10s"
    lease_size = 10
    %s
  }
  rule "per_user" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 30
    window    = "10s"
  }
}
`, hold)
}

// TestLeasesNeverExceedTheLimit runs 8 engines leasing one key of one backend, with
// random users, costs and clock steps, and after every decision holds the backend's count
// of the window to what the engines admitted in it plus what they hold unspent: every
// unit is charged before it is spent, a denial by the unleased rule gives the leased
// units back, a slice's leftover goes back when its hold ends, and nothing is lost or
// spent twice. So the admitted never pass the limit; and a denied engine never sees
// another hold more than a lease.
func TestLeasesNeverExceedTheLimit(t *testing.T) {
	for _, hold := range []string{"", "3s"} {
		clock := newFrozen()
		for name, b := range backends(t, clock) {
			t.Run(fmt.Sprintf("%s/lease_for=%q", name, hold), func(t *testing.T) {
				plan := compile(t, leasePolicy(hold))
				var calls, decisions atomic.Int64
				engines := make([]*Engine, 8)
				for i := range engines {
					// No deadline: under make test's load a Redis call can pass the default
					// 50ms, and a decision made without the backend would break the count.
					engines[i] = New(b, plan, WithClock(clock.now), WithTimeout(0), WithLogger(slog.New(slog.DiscardHandler)), WithHooks(Hooks{Called: func(CallStats) { calls.Add(1) }}))
				}
				ctx := context.Background()
				rng := rand.New(rand.NewPCG(uint64(len(hold)), 33))
				admitted := map[int64]int64{}
				userAdmitted := map[string]int64{}
				window := int64(10_000_000)
				key := ""
				var trace []string
				defer func() {
					if t.Failed() {
						for _, l := range trace[max(len(trace)-12, 0):] {
							t.Log(l)
						}
					}
				}()
				for step := range 3000 {
					if rng.IntN(20) == 0 {
						clock.advance(time.Duration(rng.IntN(2_000_000)) * time.Microsecond)
					}
					i := rng.IntN(len(engines))
					user := fmt.Sprint("u", rng.IntN(6))
					n := int64(1 + rng.IntN(3))
					d, err := engines[i].AllowN(ctx, Attrs{"user": user}, n)
					trace = append(trace, fmt.Sprintf("step %d t=%d engine %d %s n=%d: %v %v %+v", step, clock.us.Load(), i, user, n, d.Allowed, d.Source, d.Rules))
					if err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
					decisions.Add(1)
					win := clock.us.Load() / window
					if d.Allowed {
						admitted[win] += n
						userAdmitted[fmt.Sprint(win, user)] += n
						key = d.Rules[0].Key
					} else if d.Rules[d.Decider].Rule == "global" {
						for j, o := range engines {
							if h := o.Leased(d.Rules[0].Key); j != i && h > 10 {
								t.Fatalf("step %d: engine %d denied while engine %d holds %d units, above the lease", step, i, j, h)
							}
						}
					}
					if admitted[win] > 100 || userAdmitted[fmt.Sprint(win, user)] > 30 {
						t.Fatalf("step %d: window %d admitted %d (user %s %d), above the limit", step, win, admitted[win], user, userAdmitted[fmt.Sprint(win, user)])
					}
					if key == "" {
						continue
					}
					held := int64(0)
					for _, o := range engines {
						held += o.Leased(key)
					}
					p, err := engines[0].Peek(ctx, Attrs{"user": user})
					if err != nil {
						t.Fatal(err)
					}
					if p.Source != FromBackend {
						t.Fatalf("step %d: the peek was decided without the backend (source %v): %v", step, p.Source, p.Err)
					}
					if count := p.Rules[0].Limit - p.Rules[0].Remaining; count != admitted[win]+held {
						t.Fatalf("step %d: the backend counts %d in the window, the engines admitted %d and hold %d", step, count, admitted[win], held)
					}
				}
				total := int64(0)
				for _, n := range admitted {
					total += n
				}
				if len(admitted) < 5 || total < 400 {
					t.Fatalf("the trace admitted %d in %d windows: too few to test anything", total, len(admitted))
				}
				// A decision makes at most one backend call of its own (the per-user rule),
				// plus the peek; the global rule's takes are the rest.
				if c := calls.Load(); c > 2*decisions.Load()+decisions.Load()/3 {
					t.Fatalf("%d backend calls for %d decisions: the leases saved few", c, decisions.Load())
				}
				for _, o := range engines {
					if err := o.ReturnLeases(ctx); err != nil {
						t.Fatal(err)
					}
				}
				p, err := engines[0].Peek(ctx, Attrs{"user": "u0"})
				if err != nil {
					t.Fatal(err)
				}
				if count, win := p.Rules[0].Limit-p.Rules[0].Remaining, clock.us.Load()/window; count != admitted[win] {
					t.Fatalf("after every lease was returned the backend counts %d, the engines admitted %d", count, admitted[win])
				}
			})
		}
	}
}

// TestLeasesOnRedisUnderConcurrency: 8 engines of 4 goroutines each lease one key of a
// real redis-server on its clock, asking for more than the limit. The admitted never pass
// the limit, the server's count is what they admitted plus what they hold, and most
// decisions made no call.
func TestLeasesOnRedisUnderConcurrency(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := context.Background()
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	plan := compile(t, `
policy "api" {
  rule "global" {
    algorithm = "fixed_window"
    key       = "all"
    limit     = 3000
    window    = "100h"
    lease_size = 50
  }
}
`)
	b := NewRedis(rdb)
	var calls atomic.Int64
	engines := make([]*Engine, 8)
	for i := range engines {
		engines[i] = New(b, plan, WithTimeout(5*time.Second), WithLogger(slog.New(slog.DiscardHandler)), WithHooks(Hooks{Called: func(CallStats) { calls.Add(1) }}))
	}
	start := time.Now()
	var admitted, decisions atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for _, e := range engines {
		for range 4 {
			wg.Go(func() {
				for range 150 {
					d, err := e.Allow(ctx, Attrs{})
					if err != nil {
						errs <- err
						return
					}
					decisions.Add(1)
					if d.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	window := (100 * time.Hour).Microseconds()
	if start.UnixMicro()/window != time.Now().UnixMicro()/window {
		t.Skip("the run crossed a window boundary: its counts are split between two windows")
	}
	held := int64(0)
	for _, e := range engines {
		held += e.Leased("rl:api:global:fixed_window:all")
	}
	p, err := engines[0].Peek(ctx, Attrs{})
	if err != nil {
		t.Fatal(err)
	}
	count := p.Rules[0].Limit - p.Rules[0].Remaining
	t.Logf("%d decisions, %d admitted, %d held, %d counted, %d backend calls", decisions.Load(), admitted.Load(), held, count, calls.Load())
	if admitted.Load() > 3000 || count != admitted.Load()+held {
		t.Fatalf("admitted %d, held %d, counted %d: want admitted + held = counted <= 3000", admitted.Load(), held, count)
	}
	if admitted.Load() < 3000-8*50 {
		t.Fatalf("admitted %d of 3000 with 4800 asked: more than the engines' leases were lost", admitted.Load())
	}
	if c := calls.Load(); c*20 > decisions.Load() {
		t.Fatalf("%d backend calls for %d decisions: leases of 50 should make at most one in 20", c, decisions.Load())
	}
	for _, e := range engines {
		if err := e.ReturnLeases(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if p, err = engines[0].Peek(ctx, Attrs{}); err != nil || p.Rules[0].Limit-p.Rules[0].Remaining != admitted.Load() {
		t.Fatalf("after the leases were returned: %+v %v, want a count of %d", p, err, admitted.Load())
	}
}

// hookedBackend runs before ahead of each call whose argv names op (a prefix of the
// dispatcher's op argument, such as "most" or "refund").
type hookedBackend struct {
	Backend
	op     string
	before func()
}

func (b *hookedBackend) Eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error) {
	for _, a := range argv {
		if b.before != nil && strings.HasPrefix(a, b.op) {
			f := b.before
			b.before = nil
			f()
			break
		}
	}
	return b.Backend.Eval(ctx, s, keys, argv)
}

// TestLeaseReturnedDuringATake: units a take brings after ReturnLeases go back to the
// backend, and the request is decided there, so the count is what was admitted.
func TestLeaseReturnedDuringATake(t *testing.T) {
	clock := newFrozen()
	b := &hookedBackend{Backend: NewLocal(luahost.New(luahost.WithClock(clockFunc(clock.now)))), op: "most"}
	e := New(b, compile(t, leasePolicy("")), WithClock(clock.now))
	ctx := context.Background()
	b.before = func() {
		if err := e.ReturnLeases(ctx); err != nil {
			t.Error(err)
		}
	}
	d, err := e.Allow(ctx, Attrs{"user": "ann"})
	if err != nil || !d.Allowed || d.Source != FromBackend {
		t.Fatalf("%+v %v: want allowed on the backend", d, err)
	}
	p, err := e.Peek(ctx, Attrs{"user": "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if count := p.Rules[0].Limit - p.Rules[0].Remaining; count != 1 || e.Leased(p.Rules[0].Key) != 0 {
		t.Fatalf("the backend counts %d and the engine holds %d, want 1 and 0", count, e.Leased(p.Rules[0].Key))
	}
}

// TestLeaseRefundOutsideTheSlicesLock: a slice's leftover goes back at its hold's end
// with the slice unlocked, so the key's other decisions never wait for the refund.
func TestLeaseRefundOutsideTheSlicesLock(t *testing.T) {
	clock := newFrozen()
	b := &hookedBackend{Backend: NewLocal(luahost.New(luahost.WithClock(clockFunc(clock.now)))), op: "refund"}
	e := New(b, compile(t, leasePolicy("3s")), WithClock(clock.now))
	ctx := context.Background()
	d, err := e.Allow(ctx, Attrs{"user": "ann"})
	if err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	s := e.leases.m[d.Rules[0].Key]
	refunded := false
	b.before = func() {
		refunded = true
		if !s.mu.TryLock() {
			t.Error("the refund runs with the slice locked")
			return
		}
		s.mu.Unlock()
	}
	clock.advance(4 * time.Second)
	// The decision's own slice ends it, not a sweep of every slice.
	e.leases.swept.Store(clock.now().UnixMicro())
	if d, err = e.Allow(ctx, Attrs{"user": "ann"}); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	if !refunded {
		t.Fatal("the hold ended with no refund")
	}
}

// TestLeasePlanWithoutLeasedRules: on a plan with a leased rule, a request no rule
// applies to is no_rules, and one only unleased rules apply to is decided on the backend.
func TestLeasePlanWithoutLeasedRules(t *testing.T) {
	clock := newFrozen()
	b := NewLocal(luahost.New(luahost.WithClock(clockFunc(clock.now))))
	e := New(b, compile(t, `
policy "leased" {
  match = request.user != ""
  rule "global" {
    algorithm  = "fixed_window"
    key        = "all"
    limit      = 100
    window     = "1m"
    lease_size = 10
  }
}
policy "plans" {
  match = request.plan != ""
  rule "per_plan" {
    algorithm = "fixed_window"
    key       = request.plan
    limit     = 5
    window    = "1m"
  }
}
`), WithClock(clock.now))
	ctx := context.Background()
	if d, err := e.Allow(ctx, Attrs{}); err != nil || d.Source != FromNoRules {
		t.Fatalf("no rule: %+v %v, want no_rules", d, err)
	}
	if d, err := e.Allow(ctx, Attrs{"plan": "pro"}); err != nil || d.Source != FromBackend || !d.Allowed {
		t.Fatalf("an unleased rule: %+v %v, want allowed on the backend", d, err)
	}
	if d, err := e.Allow(ctx, Attrs{"user": "ann"}); err != nil || d.Source != FromBackend || !d.Allowed {
		t.Fatalf("the leased rule's first take: %+v %v", d, err)
	}
	if d, err := e.Allow(ctx, Attrs{"user": "ann"}); err != nil || d.Source != FromLease || !d.Allowed {
		t.Fatalf("the leased rule from its slice: %+v %v", d, err)
	}
}
