package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/internal/redistest"
)

// waitPolicy lets each address one request a second, with no burst beyond it.
const waitPolicy = `
policy "p" {
  clock = "client"
  rule "per_ip" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "1/s"
    burst     = 1
  }
}
`

// TestWait: requests that arrive together and may wait are spaced as the rate spaces
// them (the reservations' delays 0, 1s, 2s, ...), one that would wait longer than its
// max delay is denied with the retry-after Allow would give, and a wait that ends early
// gives its slot back to the next one; on both backends.
func TestWait(t *testing.T) {
	clock := newFrozen()
	for name, b := range backends(t, clock) {
		t.Run(name, func(t *testing.T) {
			var slept []time.Duration
			cancel := false
			sleep := func(ctx context.Context, d time.Duration) error {
				slept = append(slept, d)
				if cancel {
					return context.Canceled
				}
				return nil // the clock stands still: every request arrives at once
			}
			e := New(b, compile(t, waitPolicy), WithClock(clock.now), WithSleep(sleep))
			ctx := context.Background()
			ip := Attrs{"ip": "192.0.2.1"}
			for i := range 5 {
				d, err := e.Wait(ctx, ip, 4*time.Second)
				if err != nil || !d.Allowed || d.Delay != time.Duration(i)*time.Second {
					t.Fatalf("request %d: %+v %v; want allowed after %ds", i+1, d, err, i)
				}
			}
			if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}; len(slept) != 4 || slept[3] != want[3] {
				t.Fatalf("slept %v, want %v", slept, want)
			}
			d, err := e.Wait(ctx, ip, 4*time.Second)
			if err != nil || d.Allowed || d.RetryAfter != 5*time.Second || d.Delay != 0 {
				t.Fatalf("6th: %+v %v; want denied, retry-after 5s (a wait beyond 4s)", d, err)
			}
			// A wait cut short gives its slot back: the next waiter gets the same slot.
			cancel = true
			if _, err := e.Wait(ctx, ip, 10*time.Second); !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled wait: %v, want context.Canceled", err)
			}
			cancel = false
			if d, err := e.Wait(ctx, ip, 10*time.Second); err != nil || !d.Allowed || d.Delay != 5*time.Second {
				t.Fatalf("after the cancelled wait: %+v %v; want allowed after 5s, its slot", d, err)
			}
			// Another address waits for nothing.
			if d, err := e.Wait(ctx, Attrs{"ip": "192.0.2.2"}, time.Second); err != nil || !d.Allowed || d.Delay != 0 {
				t.Fatalf("another address: %+v %v", d, err)
			}
			clock.advance(time.Minute)
		})
	}
}

// TestWaitRefusesWhatItCannotReserve: a request whose rules hold concurrency leases, or
// need calls of both clocks, is refused with ErrRequest before anything is charged.
func TestWaitRefusesWhatItCannotReserve(t *testing.T) {
	clock := newFrozen()
	b := backends(t, clock)["luahost"]
	leases := `
policy "p" {
  rule "uploads" {
    algorithm = "concurrency"
    key       = request.ip
    max       = 2
    ttl       = "1m"
  }
}`
	if _, err := New(b, compile(t, leases), WithClock(clock.now)).Wait(context.Background(), Attrs{"ip": "a"}, time.Second); !errors.Is(err, ErrRequest) || !strings.Contains(err.Error(), "leases") {
		t.Fatalf("concurrency: %v, want ErrRequest", err)
	}
	clocks := waitPolicy + strings.Replace(strings.Replace(waitPolicy, `policy "p"`, `policy "q"`, 1), `clock = "client"`, `clock = "server"`, 1)
	if _, err := New(b, compile(t, clocks), WithClock(clock.now)).Wait(context.Background(), Attrs{"ip": "a"}, time.Second); !errors.Is(err, ErrRequest) || !strings.Contains(err.Error(), "one clock") {
		t.Fatalf("two clocks: %v, want ErrRequest", err)
	}
}

// TestWaitOnACluster: on a 3-node Redis Cluster, a sharded policy's request reserves its
// slot in one call to its shard's node, as on one server.
func TestWaitOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	clock := newFrozen()
	sharded := strings.Replace(waitPolicy, `clock = "client"`, `clock = "client"`+"\n  shard = request.ip", 1)
	e := New(NewRedis(cl.Client(t)), compile(t, sharded), WithClock(clock.now), WithTimeout(time.Minute),
		WithSleep(func(context.Context, time.Duration) error { return nil }))
	for _, ip := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
		for i := range 3 {
			d, err := e.Wait(context.Background(), Attrs{"ip": ip}, 2*time.Second)
			if err != nil || !d.Allowed || d.Delay != time.Duration(i)*time.Second {
				t.Fatalf("%s #%d: %+v %v; want allowed after %ds", ip, i+1, d, err, i)
			}
		}
	}
}
