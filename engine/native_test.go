package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/luahost"
)

// nativePolicy has rules the native store decides (a stack of three built-ins, a leaky
// bucket, a calendar-free fixed window with a lease) beside rules it leaves to the script
// (a penalty box, an overridable rule, lists, a calendar, concurrency), some on the same
// keys' requests, so that keys move between the store and the host.
const nativePolicy = `
policy "api" {
  rule "per_ip" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "10/s"
    burst     = 5
  }
  rule "per_user" {
    algorithm = "token_bucket"
    key       = request.user
    capacity  = 8
    rate      = "4/s"
  }
  rule "per_tenant" {
    algorithm = "fixed_window"
    key       = request.tenant
    limit     = 20
    window    = "2s"
  }
}
policy "plain" {
  match = request.path == "/plain"
  rule "window" {
    algorithm = "sliding_window"
    key       = request.user
    limit     = 6
    window    = "3s"
  }
  rule "meter" {
    algorithm = "leaky_bucket"
    key       = request.ip
    capacity  = 4
    rate      = "2/s"
    shadow    = true
  }
}
policy "login" {
  match = request.path == "/login"
  rule "tries" {
    algorithm = "sliding_window"
    key       = request.ip
    limit     = 3
    window    = "1s"
    block_for = "5s"
  }
  rule "listed" {
    algorithm = "leaky_bucket"
    key       = request.user
    capacity  = 4
    rate      = "2/s"
    exempt    = list("vip")
  }
}
policy "quota" {
  match = request.path == "/quota"
  rule "month" {
    algorithm = "fixed_window"
    key       = request.tenant
    limit     = 50
    window    = "calendar_month"
  }
  rule "cap" {
    algorithm   = "token_bucket"
    key         = request.user
    capacity    = 5
    rate        = "1/s"
    overridable = true
  }
}
policy "uploads" {
  match = request.path == "/upload"
  rule "running" {
    algorithm = "concurrency"
    key       = request.user
    max       = 2
    ttl       = "10s"
  }
  rule "bytes" {
    algorithm = "gcra"
    key       = request.user
    rate      = "3/s"
    burst     = 3
  }
}
`

// TestNativeDecidesAsLocal runs the same random operations of every kind (Allow, AllowN,
// AllowAtMost, Wait, Peek, Reserve and Settle, Release, Reset, overrides, lists) on an
// engine on the native backend and on one on luahost, on one virtual clock, and wants
// the same decisions, and the same keys afterwards as Redis would hold them.
func TestNativeDecidesAsLocal(t *testing.T) {
	plan := compile(t, nativePolicy)
	ctx := context.Background()
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 9))
		clock := luahost.NewManualClock(time.Date(2030, 1, 31, 23, 59, 50, 0, time.UTC))
		nh, lh := luahost.New(luahost.WithClock(clock)), luahost.New(luahost.WithClock(clock))
		nb := NewNative(nh)
		engines := [2]*Engine{
			New(nb, plan, WithClock(clock.Now), WithTimeout(0)),
			New(NewLocal(lh), plan, WithClock(clock.Now), WithTimeout(0)),
		}
		for _, e := range engines {
			e.leasePrefix = "lease-" // the same concurrency lease names on both
		}
		var held [2][]*Decision
		var reserved [2][]*Reservation
		for step := range 150 {
			clock.Advance(time.Duration(rng.IntN(4)) * []time.Duration{time.Microsecond, 37 * time.Millisecond, 400 * time.Millisecond, 3 * time.Second}[rng.IntN(4)])
			req := Attrs{
				"ip":     fmt.Sprint("10.0.0.", rng.IntN(3)),
				"user":   fmt.Sprint("u", rng.IntN(3)),
				"tenant": fmt.Sprint("t", rng.IntN(2)),
				"path":   []string{"/", "/", "/plain", "/login", "/quota", "/upload"}[rng.IntN(6)],
			}
			op, n := rng.IntN(12), rng.Int64N(4)
			var out [2]string
			for i, e := range engines {
				out[i] = nativeStep(ctx, e, op, req, n, &held[i], &reserved[i])
			}
			if out[0] != out[1] {
				t.Fatalf("seed %d step %d: op %d %v\n native %s\n luahost %s", seed, step, op, req, out[0], out[1])
			}
		}
		// Every key as Redis would hold it: the store hands its keys to its host.
		keys := lh.Keys()
		nb.store.Hand(append(keys, nh.Keys()...), func() {})
		if got := strings.Join(nh.Keys(), " "); got != strings.Join(keys, " ") {
			t.Fatalf("seed %d: keys\n native  %s\n luahost %s", seed, got, strings.Join(keys, " "))
		}
		for _, k := range keys {
			a, _ := lh.Dump(k)
			b, _ := nh.Dump(k)
			if a != b {
				t.Fatalf("seed %d: key %s\n native  %s\n luahost %s", seed, k, b, a)
			}
		}
	}
}

// nativeStep runs operation op on e and renders what it returned.
func nativeStep(ctx context.Context, e *Engine, op int, req Attrs, n int64, held *[]*Decision, reserved *[]*Reservation) string {
	show := func(d *Decision, err error) string {
		if err != nil {
			return "error: " + err.Error()
		}
		var b strings.Builder
		fmt.Fprintf(&b, "allowed=%v granted=%d delay=%v retry=%v source=%v", d.Allowed, d.Granted, d.Delay, d.RetryAfter, d.Source)
		for _, r := range d.Rules {
			fmt.Fprintf(&b, " [%s.%s %v rem=%d lim=%d retry=%v reset=%v]", r.Policy, r.Rule, r.Allowed, r.Remaining, r.Limit, r.RetryAfter, r.ResetAfter)
		}
		return b.String()
	}
	switch op {
	case 0, 1, 2:
		d, err := e.Allow(ctx, req)
		if err == nil && d.Holds() {
			*held = append(*held, d)
		}
		return show(d, err)
	case 3:
		return show(e.AllowN(ctx, req, n))
	case 4:
		return show(e.AllowAtMost(ctx, req, n+1))
	case 5:
		return show(e.Wait(ctx, req, time.Duration(n)*300*time.Millisecond))
	case 6:
		return show(e.Peek(ctx, req))
	case 7:
		r, err := e.Reserve(ctx, req, n)
		if err != nil {
			return "error: " + err.Error()
		}
		*reserved = append(*reserved, r)
		return show(r.Decision, nil)
	case 8:
		if len(*reserved) == 0 {
			return "none"
		}
		r := (*reserved)[0]
		*reserved = (*reserved)[1:]
		return fmt.Sprint(r.Settle(ctx, n*2))
	case 9:
		if len(*held) == 0 {
			return show(e.Allow(ctx, req))
		}
		d := (*held)[0]
		*held = (*held)[1:]
		return fmt.Sprint(e.Release(ctx, d))
	case 10:
		if n == 0 {
			return fmt.Sprint(e.Reset(ctx, req))
		}
		if n == 1 {
			_, err := e.AddToList(ctx, "vip", req)
			return fmt.Sprint(err)
		}
		_, err := e.RemoveFromList(ctx, "vip", req)
		return fmt.Sprint(err)
	default:
		if n < 2 {
			return fmt.Sprint(e.ClearOverride(ctx, req, "quota", "cap"))
		}
		return fmt.Sprint(e.SetOverride(ctx, req, "quota", "cap", map[string]string{"capacity": fmt.Sprint(n * 3)}, time.Time{}))
	}
}
