package engine

import (
	"testing"
	"time"
)

// TestBreakerTransitions drives the breaker through every transition of its state machine
// on a virtual clock.
func TestBreakerTransitions(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		at      time.Duration
		acquire bool    // acquire a ticket (else resolve the last one)
		outcome outcome // for resolve
		ticket  int     // for resolve: which acquired ticket (index), -1 = last
		allowed bool    // for acquire: want allowed
		state   BreakerState
	}
	acq := func(d time.Duration, allowed bool, s BreakerState) step {
		return step{at: d, acquire: true, allowed: allowed, state: s}
	}
	res := func(d time.Duration, o outcome, s BreakerState) step {
		return step{at: d, outcome: o, ticket: -1, state: s}
	}
	resN := func(d time.Duration, n int, o outcome, s BreakerState) step {
		return step{at: d, outcome: o, ticket: n, state: s}
	}
	ms := time.Millisecond
	cases := map[string][]step{
		"failures below the threshold stay closed; a success resets them": {
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, succeeded, Closed),
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, failed, Open),
		},
		"open refuses until the cooldown, then one probe; its success closes": {
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, failed, Open),
			acq(999*ms, false, Open),
			acq(time.Second, true, HalfOpen),
			acq(time.Second, false, HalfOpen),
			res(time.Second+10*ms, succeeded, Closed),
			acq(time.Second+10*ms, true, Closed),
		},
		"a failed probe reopens for a full cooldown": {
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, failed, Open),
			acq(time.Second, true, HalfOpen), res(1100*ms, failed, Open),
			acq(2099*ms, false, Open),
			acq(2100*ms, true, HalfOpen),
		},
		"an abandoned probe lets the next call probe at once": {
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, failed, Open),
			acq(time.Second, true, HalfOpen), res(1001*ms, abandoned, Open),
			acq(1001*ms, true, HalfOpen), res(1002*ms, succeeded, Closed),
		},
		"a probe that never resolves is replaced after a cooldown, and cannot resolve later": {
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, failed, Open),
			acq(time.Second, true, HalfOpen), // ticket 3: lost
			acq(1999*ms, false, HalfOpen),
			acq(2*time.Second, true, HalfOpen), // ticket 4: the new probe
			resN(2*time.Second, 3, failed, HalfOpen),
			resN(2*time.Second, 4, succeeded, Closed),
		},
		"abandoned calls never count as failures": {
			acq(0, true, Closed), res(0, abandoned, Closed),
			acq(0, true, Closed), res(0, abandoned, Closed),
			acq(0, true, Closed), res(0, abandoned, Closed),
			acq(0, true, Closed), res(0, abandoned, Closed),
			acq(0, true, Closed), res(0, failed, Closed),
		},
		"a call from before the breaker opened cannot close it": {
			acq(0, true, Closed), // ticket 0: slow
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, failed, Open),
			resN(10*ms, 0, succeeded, Open),
			acq(20*ms, false, Open),
		},
		"a non-probe success while half-open does not close it": {
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, failed, Closed),
			acq(0, true, Closed), res(0, failed, Open),
			acq(time.Second, true, HalfOpen),
			resN(time.Second, 0, succeeded, HalfOpen),
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			var changes []string
			b := breaker{threshold: 3, cooldown: time.Second, changed: func(from, to BreakerState) {
				changes = append(changes, from.String()+">"+to.String())
			}}
			var tickets []ticket
			for i, s := range steps {
				if s.acquire {
					tk, ok := b.acquire(func() time.Time { return at(s.at) })
					if ok != s.allowed {
						t.Fatalf("step %d: acquire at %v = %v, want %v", i, s.at, ok, s.allowed)
					}
					if ok {
						tickets = append(tickets, tk)
					}
				} else {
					n := s.ticket
					if n < 0 {
						n = len(tickets) - 1
					}
					b.resolve(tickets[n], s.outcome, func() time.Time { return at(s.at) })
				}
				if got := b.current(); got != s.state {
					t.Fatalf("step %d: state %v, want %v (changes %v)", i, got, s.state, changes)
				}
			}
		})
	}
}
