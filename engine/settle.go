package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

// Reservation is a request charged an estimate of its cost before the cost is known
// (Reserve), and settled once with the true cost (Settle): the tokens an LLM call used,
// the bytes a download sent, or 0 for an outcome that does not count.
//
// A reservation that is never settled keeps its estimate as its cost: nothing expires or
// is given back, and the charge is earned back as any charge is.
type Reservation struct {
	// Decision is the admission: allowed when the estimate fitted every enforcing rule.
	Decision *Decision

	e        *Engine
	estimate int64
	start    time.Time        // the engine's clock when Reserve began
	unit     map[string]int64 // each rule key's cost per unit of the request
	mu       sync.Mutex
	settled  bool
}

// Reserve decides a request whose true cost is known only after it ran: it charges
// estimate units (each rule its cost expression times estimate, all or nothing, as AllowN)
// and returns the reservation, which Settle settles with the true cost. An estimate of 0
// charges nothing and admits the request unless a rule's key is in debt (see Settle).
//
// A request that a rule holding concurrency leases applies to is refused with ErrRequest
// (a lease is released, not settled). Reserve returns an error only when AllowN would;
// a denial is a reservation whose Decision is denied, which settles nothing.
func (e *Engine) Reserve(ctx context.Context, r dsl.Request, estimate int64) (*Reservation, error) {
	if estimate < 0 || estimate > algorithms.MaxInt {
		return nil, fmt.Errorf("%w: estimate %d out of range [0, 2^53]", ErrRequest, estimate)
	}
	start := e.clock()
	rules, unl, err := e.rulesOf(r, 1, "a reservation cannot hold; use Allow and Release")
	if err != nil {
		return nil, err
	}
	unit := make(map[string]int64, len(rules))
	for i := range rules {
		p := &rules[i]
		c := p.call.Cost
		unit[p.call.Key] = c
		if estimate > 0 && c > algorithms.MaxInt/estimate {
			return nil, fmt.Errorf("%w: policy %q rule %q: cost %d × %d is too large", ErrRequest, p.policy.Name, p.rule.Name, c, estimate)
		}
		if m := p.call.Algorithm.MaxCost; m > 0 && c*estimate > m {
			return nil, fmt.Errorf("%w: policy %q rule %q: a cost of %d, where algorithm %q takes at most %d a request (max_cost)", ErrRequest, p.policy.Name, p.rule.Name, c*estimate, p.call.Algorithm.Name, m)
		}
		p.call.Cost = c * estimate
	}
	d, err := e.run(ctx, rules, rules, nil, estimate > 0, 0, -1, true)
	if err != nil {
		return nil, err
	}
	if unl {
		d.unlimited = unlimitedFirst
	}
	if d.Allowed {
		d.Granted = estimate
	}
	return &Reservation{Decision: d, e: e, estimate: estimate, start: start, unit: unit}, nil
}

// Settle settles the reservation with the request's true cost, actual units, once; a
// second Settle is refused with ErrRequest. A denied reservation, or one the backend
// did not charge (a fail-open or fail-deny decision), settles nothing.
//
// Above the estimate, each rule is charged the overdraft (its cost times actual −
// estimate) without a check, in one atomic call per hash slot: a key may go past its
// limit into a debt, and is denied until its algorithm has earned the debt back (the
// retry-after of its denials is exact): a rate's debt at its rate, a fixed_window's a
// limit per window after the one it was settled in (a calendar rule's for at most the two
// periods after it: a debt past that is held to it). Only fixed_window, token_bucket,
// leaky_bucket and gcra carry a debt: an overdraft on any other rule (sliding_window,
// sliding_log, concurrency, a plugin's) is refused with ErrRequest before anything is
// charged, and the reservation stays open.
//
// Below the estimate, each rule is given back the difference, but never more than the
// reservation's charge still weighs on the key: a window's count while its window runs,
// a rate's units until its reset-after since the reservation has passed (less the
// engine's timeout, for the refund's way to the backend). A late refund gives back less,
// or nothing, so that what it gives back is never capacity that later requests used
// (a plugin's rule, or an overridden rate, is given back nothing).
//
// The guarantee: over any interval, the true costs of the reservations admitted in it
// exceed the rules' statements by at most the overdrafts of those still open at the
// interval's last admission; for a caller that settles before it reserves again, at most
// one request's overdraft (verify's settle property checks it).
func (res *Reservation) Settle(ctx context.Context, actual int64) error {
	if actual < 0 || actual > algorithms.MaxInt {
		return fmt.Errorf("%w: actual cost %d out of range [0, 2^53]", ErrRequest, actual)
	}
	res.mu.Lock()
	defer res.mu.Unlock()
	if res.settled {
		return fmt.Errorf("%w: the reservation is settled already", ErrRequest)
	}
	e, d := res.e, res.Decision
	diff := actual - res.estimate
	if !d.Allowed || diff == 0 || len(d.charges) == 0 {
		res.settled = true
		return nil
	}
	elapsed := e.clock().Sub(res.start) + e.timeout
	results := make(map[string]*RuleResult, len(d.Rules))
	for i := range d.Rules {
		results[d.Rules[i].Key] = &d.Rules[i]
	}
	var calls []charged
	for _, c := range d.charges {
		call := algorithms.Call{Op: algorithms.OpRefund, Now: c.call.Now, Skew: c.call.Skew}
		if diff > 0 {
			call.Op, call.Now = algorithms.OpOwe, algorithms.ServerTime
			if c.client {
				call.Now = e.clock().UnixMicro()
			}
		}
		for _, r := range c.call.Rules {
			u := res.unit[r.Key]
			if diff > 0 {
				if u > 0 && diff > algorithms.MaxInt/u {
					return fmt.Errorf("%w: an overdraft of %d × %d is too large", ErrRequest, diff, u)
				}
				if u > 0 && !r.Algorithm.CarriesDebt() {
					return fmt.Errorf("%w: rule key %s: %s carries no debt, so the request cannot settle above its estimate of %d", ErrRequest, r.Key, r.Algorithm.Name, res.estimate)
				}
				r.Cost = u * diff
			} else {
				if rr := results[r.Key]; rr != nil {
					r.Cost = r.Refundable(u*-diff, rr.ResetAfter.Microseconds(), elapsed.Microseconds())
				} else {
					r.Cost = 0
				}
			}
			if r.Cost > 0 {
				call.Rules = append(call.Rules, r)
			}
		}
		if len(call.Rules) > 0 {
			calls = append(calls, charged{call: call, local: c.local, client: c.client})
		}
	}
	res.settled = true
	if diff < 0 {
		e.refund(ctx, calls)
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	for _, c := range calls {
		var err error
		if c.local {
			_, err = e.exec(ctx, e.localBackend(), &c.call)
		} else {
			_, _, err = e.call(ctx, &c.call)
		}
		if err != nil {
			e.logs.log(e, "settle", "rlctl: a settlement's overdraft could not be charged; the key does not owe it", "err", err)
			return fmt.Errorf("settle: %w", err)
		}
	}
	return nil
}
