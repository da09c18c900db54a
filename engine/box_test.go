package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/internal/redistest"
)

// boxPolicy limits each address to a burst of 2 at one a second, blocking an address for
// 10s on its first offence, and twice its last block (up to 40s) on a repeat offence
// within 40s of the last block's end.
const boxPolicy = `
policy "p" {
  clock = "client"
  rule "per_ip" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "1/s"
    burst     = 2
    block_for = "10s"
    block_max = "40s"
  }
}
`

// TestPenaltyBox: a denial blocks the key for block_for exactly (retry-after the block's
// end, not a microsecond more or less), the block neither charges nor is extended by
// the requests it refuses, other keys are untouched, and repeat offences double the block
// up to block_max, forgotten block_max after a block ends; on both backends.
func TestPenaltyBox(t *testing.T) {
	clock := newFrozen()
	for name, b := range backends(t, clock) {
		t.Run(name, func(t *testing.T) {
			e := New(b, compile(t, boxPolicy), WithClock(clock.now))
			ctx := context.Background()
			ip := Attrs{"ip": "192.0.2.1"}
			decide := func(step string, a Attrs, allowed bool, retry time.Duration) {
				t.Helper()
				d, err := e.Allow(ctx, a)
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				if d.Allowed != allowed || d.RetryAfter != retry {
					t.Fatalf("%s: allowed %v, retry-after %v; want %v, %v", step, d.Allowed, d.RetryAfter, allowed, retry)
				}
				if !allowed && d.Rules[0].Remaining != 0 {
					t.Fatalf("%s: denied with remaining %d, want 0", step, d.Rules[0].Remaining)
				}
			}
			decide("1st", ip, true, 0)
			decide("2nd", ip, true, 0)
			decide("offence", ip, false, 10*time.Second)
			decide("another address", Attrs{"ip": "192.0.2.2"}, true, 0)
			clock.advance(5 * time.Second)
			decide("5s into the block", ip, false, 5*time.Second)
			clock.advance(5*time.Second - time.Microsecond)
			decide("1µs before the end", ip, false, time.Microsecond)
			clock.advance(time.Microsecond)
			// The refusals were not charged: the burst is whole again after 10s.
			decide("at the end", ip, true, 0)
			decide("at the end, 2nd", ip, true, 0)
			decide("repeat offence", ip, false, 20*time.Second)
			clock.advance(20 * time.Second)
			decide("after 20s", ip, true, 0)
			decide("after 20s, 2nd", ip, true, 0)
			decide("third offence", ip, false, 40*time.Second)
			clock.advance(40 * time.Second)
			decide("after 40s", ip, true, 0)
			decide("after 40s, 2nd", ip, true, 0)
			decide("at the ceiling", ip, false, 40*time.Second)
			// block_max after the block's end, the record is forgotten.
			clock.advance(80 * time.Second)
			decide("forgiven", ip, true, 0)
			decide("forgiven, 2nd", ip, true, 0)
			decide("a first offence again", ip, false, 10*time.Second)
			// Reset unblocks, and forgets the last block: the next offence is a first.
			if err := e.Reset(ctx, ip); err != nil {
				t.Fatal(err)
			}
			decide("reset", ip, true, 0)
			decide("reset, 2nd", ip, true, 0)
			decide("an offence after the reset", ip, false, 10*time.Second)
		})
	}
}

// TestPenaltyBoxShadowAndStack: in a stack, a boxed rule blocks its key when it denies
// even if another rule decides the call; a shadow boxed rule records its block and
// reports it without refusing anything.
func TestPenaltyBoxShadowAndStack(t *testing.T) {
	const src = `
policy "p" {
  clock = "client"
  rule "tight" {
    algorithm = "fixed_window"
    key       = "all"
    limit     = 1
    window    = "1m"
  }
  rule "boxed" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 1
    window    = "1m"
    block_for = "1h"
  }
  rule "shadowed" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 1
    window    = "1m"
    block_for = "2h"
    shadow    = true
  }
}
`
	clock := newFrozen()
	for name, b := range backends(t, clock) {
		t.Run(name, func(t *testing.T) {
			e := New(b, compile(t, src), WithClock(clock.now))
			ctx := context.Background()
			u := Attrs{"user": "u"}
			if d, err := e.Allow(ctx, u); err != nil || !d.Allowed {
				t.Fatalf("1st: %+v %v", d, err)
			}
			d, err := e.Allow(ctx, u)
			if err != nil || d.Allowed || d.Decider != 0 {
				t.Fatalf("2nd: %+v %v, want a denial decided by rule tight", d, err)
			}
			// The shadow rule's block is reported, never enforced: the decision's wait is
			// the enforcing rules'.
			if d.RetryAfter != time.Hour || d.Rules[1].RetryAfter != time.Hour || d.Rules[2].RetryAfter != 2*time.Hour {
				t.Fatalf("2nd: retry-after %v (rules %v, %v), want 1h overall, 1h and 2h by rule", d.RetryAfter, d.Rules[1].RetryAfter, d.Rules[2].RetryAfter)
			}
			// An hour and a minute later, every window has passed: boxed lets u through, the
			// shadow rule reports its block (1h left) without refusing.
			clock.advance(time.Hour + time.Minute)
			d, err = e.Allow(ctx, u)
			if err != nil || !d.Allowed {
				t.Fatalf("after the block: %+v %v, want allowed", d, err)
			}
			if r := d.Rules[2]; r.Allowed || r.RetryAfter != time.Hour-time.Minute {
				t.Fatalf("shadow rule: allowed %v, retry-after %v; want its block reported, 59m left", r.Allowed, r.RetryAfter)
			}
		})
	}
}

// TestPenaltyBoxOnACluster: a boxed rule's block lives in its key's slot, so a stack of
// boxed rules in different slots, unsharded and sharded, is decided on a real 3-node
// cluster, and the block holds there.
func TestPenaltyBoxOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	ctx := context.Background()
	for _, shard := range []string{"", `shard = request.tenant`} {
		src := `
policy "p" {
  ` + shard + `
  rule "a" {
    algorithm = "token_bucket"
    key       = "${request.tenant}:a"
    capacity  = 1
    rate      = "1/h"
    block_for = "1h"
  }
  rule "b" {
    algorithm = "sliding_window"
    key       = "${request.tenant}:b"
    limit     = 5
    window    = "1h"
    block_for = "1m"
  }
}
`
		e := New(NewRedis(cl.Client(t)), compile(t, src), WithTimeout(time.Minute))
		a := Attrs{"tenant": "t-" + strings.TrimSpace(shard)}
		d, err := e.Allow(ctx, a)
		if err != nil || !d.Allowed {
			t.Fatalf("%q: 1st: %+v %v", shard, d, err)
		}
		if shard == "" && Slot(d.Rules[0].Key) == Slot(d.Rules[1].Key) {
			t.Fatalf("keys %s and %s share a slot: the test needs two", d.Rules[0].Key, d.Rules[1].Key)
		}
		for i := range 2 {
			d, err = e.Allow(ctx, a)
			if err != nil || d.Allowed || d.Decider != 0 {
				t.Fatalf("%q: call %d: %+v %v, want denied by rule a", shard, i+2, d, err)
			}
			if d.RetryAfter < 59*time.Minute || d.RetryAfter > time.Hour {
				t.Fatalf("%q: call %d: retry-after %v, want the block's end (at most 1h)", shard, i+2, d.RetryAfter)
			}
		}
		// A peek shows the block. Sharded, one call decides both rules: b was not charged
		// while a was denied, nor blocked. (Unsharded, the slots are decided in turn and a
		// peek stops at the first that refuses.)
		p, err := e.Peek(ctx, a)
		if err != nil || p.Allowed || p.Rules[0].Remaining != 0 || p.Rules[0].RetryAfter < 59*time.Minute {
			t.Fatalf("%q: peek: %+v %v, want rule a blocked", shard, p, err)
		}
		if shard != "" && (len(p.Rules) != 2 || !p.Rules[1].Allowed || p.Rules[1].Remaining != 4) {
			t.Fatalf("%q: peek: %+v, want rule b allowing 4", shard, p.Rules)
		}
	}
}
