package verify

import (
	"math/rand/v2"
)

// genRule generates one adversarial single-rule trace and runs it as it goes, so that it
// can aim at what the rule answers: retries exactly at (and 1µs before) an advised
// retry-after, bursts straddling window boundaries, bursts at one instant, costs of 0, 1,
// the capacity and more than it, idle gaps past every TTL, and (for leases) releases.
// The trace covers about span µs of virtual time and has at most maxSteps steps. A step
// whose call fails ends the trace: the steps come back with it, the results without it,
// and a *callError. With clk, each request comes from one of its clients, whose clock is
// off the true one (the steps' times) by its skew; without, every clock is true and a
// third of the requests are probed.
func genRule(rng *rand.Rand, s *subject, g *rig, span int64, maxSteps int, clk *clocks) ([]step, []result, error) {
	w := max(s.spec.window, 1)
	capacity := s.spec.limit
	var steps []step
	var results []result
	var now int64
	lease := 0
	type held struct {
		lease int
		cost  int64
	}
	var holding []held
	var lastDenied *step
	var lastRetry int64

	// pinned, when set, is the clock offset of the client a retry comes from: the one
	// that was told when to retry.
	var pinned *int64
	emit := func(st step) error {
		switch {
		case clk != nil && pinned != nil:
			st.skew = *pinned
		case clk != nil:
			st.skew = clk.next(rng)
		}
		res, err := s.exec(g, st)
		if err != nil {
			steps = append(steps, st)
			return &callError{step: len(steps) - 1, err: err}
		}
		steps = append(steps, st)
		results = append(results, res)
		if st.release || res.allowed {
			lastDenied = nil // the state may have changed: an old advice no longer applies
		}
		if !st.release {
			if res.allowed && st.cost > 0 && s.lease >= 0 {
				holding = append(holding, held{st.lease, st.cost})
			}
			if !res.allowed && res.rr.RetryAfter > 0 {
				cp := st
				lastDenied, lastRetry = &cp, res.rr.RetryAfter
			}
			if capacity == 0 {
				capacity = res.rr.Limit
			}
		}
		return nil
	}
	cost := func() int64 {
		c := max(capacity, 1)
		switch x := rng.IntN(40); {
		case x < 2:
			return 0
		case x < 22:
			return 1
		case x < 34:
			return 1 + rng.Int64N(c)
		case x < 37:
			return c
		default:
			return c + 1 + rng.Int64N(3)
		}
	}
	ask := func(at, c int64) error {
		lease++
		return emit(step{at: at, cost: c, lease: lease, probe: rng.IntN(3) == 0})
	}
	// nextBoundary is the first multiple of w (in absolute time, as windows align) after t.
	nextBoundary := func(t int64) int64 {
		abs := base + t
		return (abs/w+1)*w - base
	}
	for len(steps) < maxSteps && now <= span {
		switch x := rng.IntN(100); {
		case x < 30 && lastDenied != nil && lastDenied.at+lastRetry >= now:
			// Retry as advised: early (must be denied), then on time (must pass), from the
			// client that was advised.
			d, r := *lastDenied, lastRetry
			lastDenied = nil
			pinned = &d.skew
			if r > 2 && d.at+r-1 > now && rng.IntN(4) == 0 {
				now += rng.Int64N(d.at + r - 1 - now)
				if err := ask(now, d.cost); err != nil {
					return steps, results, err
				}
			}
			// Just before what the declared precision allows (it may be that late).
			if p := s.spec.prec.RetryAfter; p > 0 && r > p+1 && d.at+r-p-1 >= now && rng.IntN(2) == 0 {
				now = d.at + r - p - 1
				if err := ask(now, d.cost); err != nil {
					return steps, results, err
				}
			}
			if r > 1 && d.at+r-1 >= now && rng.IntN(2) == 0 {
				now = d.at + r - 1
				if err := ask(now, d.cost); err != nil {
					return steps, results, err
				}
			}
			now = d.at + r
			if err := ask(now, d.cost); err != nil {
				return steps, results, err
			}
			pinned = nil
		case x < 35:
			// The full boundary burst: the capacity just before a window boundary, and
			// again at it.
			b := nextBoundary(now)
			if b-1 > now {
				now = b - 1
			}
			if err := ask(now, max(capacity, 1)); err != nil {
				return steps, results, err
			}
			now = b
			if err := ask(now, max(capacity, 1)); err != nil {
				return steps, results, err
			}
		case x < 45:
			// A boundary attack: a burst just before a window boundary and one at it.
			b := nextBoundary(now)
			lead := []int64{1, 1000, 1 + rng.Int64N(max(w/10, 1))}[rng.IntN(3)]
			if b-lead > now {
				now = b - lead
			}
			for range 1 + rng.IntN(3) {
				if err := ask(now, cost()); err != nil {
					return steps, results, err
				}
			}
			now = b + rng.Int64N(2)
			for range 1 + rng.IntN(3) {
				if err := ask(now, cost()); err != nil {
					return steps, results, err
				}
			}
		case x < 52:
			// A burst at one instant.
			for range 2 + rng.IntN(int(min(capacity+2, 8))) {
				if err := ask(now, cost()); err != nil {
					return steps, results, err
				}
			}
		case x < 60 && len(holding) > 0:
			// Release a lease (a request finished).
			i := rng.IntN(len(holding))
			h := holding[i]
			holding = append(holding[:i], holding[i+1:]...)
			if err := emit(step{at: now, cost: h.cost, release: true, lease: h.lease}); err != nil {
				return steps, results, err
			}
		case x < 64:
			// Idle past every TTL.
			now += w*int64(2+rng.IntN(3)) + rng.Int64N(w+1)
			if err := ask(now, cost()); err != nil {
				return steps, results, err
			}
		default:
			switch y := rng.IntN(10); {
			case y < 2:
			case y < 4:
				now++
			case y < 8:
				now += rng.Int64N(w/4 + 2)
			default:
				now += rng.Int64N(2*w + 2)
			}
			if err := ask(now, cost()); err != nil {
				return steps, results, err
			}
		}
	}
	return steps, results, nil
}

// clocks are the skewed clocks of a client-clock trace's clients: each is off the true
// clock by an offset within ±skew/2 (so two differ by at most skew), starting at the
// extremes, and now and then steps to another offset in that range, back or forth.
type clocks struct {
	skew    int64
	offsets []int64
	last    int // the client of the previous request
}

func newClocks(rng *rand.Rand, skew int64) *clocks {
	h := skew / 2
	return &clocks{skew: skew, offsets: []int64{-h, skew - h, rng.Int64N(skew+1) - h}}
}

// next returns the offset of the client the next request comes from: half the time the
// client after the previous one (clients taking turns is what exposes state that a clock
// running behind moves back), else one at random.
func (c *clocks) next(rng *rand.Rand) int64 {
	i := rng.IntN(len(c.offsets))
	if rng.IntN(2) == 0 {
		i = (c.last + 1) % len(c.offsets)
	}
	c.last = i
	if rng.IntN(16) == 0 {
		h := c.skew / 2
		c.offsets[i] = []int64{-h, c.skew - h, rng.Int64N(c.skew+1) - h}[rng.IntN(3)]
	}
	return c.offsets[i]
}
