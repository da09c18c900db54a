package verify

import (
	"math/rand/v2"
	"slices"

	"github.com/rlctl/rlctl/algorithms"
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
	var anchors []int64 // instants retries were due at, and charges of empty keys, latest last (trace µs)
	empty := s.emptyState()
	anchor := func(at int64) {
		anchors = append(anchors, at)
		if len(anchors) > 8 {
			anchors = anchors[1:]
		}
	}

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
				// Where a retry is due, the algorithm's state changes: an anchor its own
				// periods (a refill step, a window it started at the first request) run
				// from, which epoch-aligned boundaries miss.
				anchor(st.at + res.rr.RetryAfter)
			}
			if res.allowed && st.cost > 0 && res.before == empty {
				// A charge of an empty key starts the algorithm's state: its refill steps
				// or its window may count from here, or from the start of its clock's
				// tick (the declared resolution, else a millisecond's, Redis's unit).
				anchor(st.at)
				tick := s.spec.res
				if tick <= 1 {
					tick = 1000
				}
				if abs := base + st.at; abs%tick != 0 {
					anchor(abs - abs%tick - base)
				}
			}
			if capacity == 0 {
				capacity = res.rr.Limit
			}
		}
		return nil
	}
	// Costs stay within what the rule takes: up to the capacity and a few more, or up to
	// the algorithm's max_cost.
	cost := func() int64 {
		c := max(capacity, 1)
		var n int64
		switch x := rng.IntN(40); {
		case x < 2:
			return 0
		case x < 22:
			n = 1
		case x < 34:
			n = 1 + rng.Int64N(c)
		case x < 37:
			n = c
		default:
			n = c + 1 + rng.Int64N(3)
		}
		return s.costAtMost(n)
	}
	ask := func(at, c int64) error {
		lease++
		return emit(step{at: at, cost: c, lease: lease, probe: rng.IntN(3) == 0})
	}
	// spend asks for c at one instant: one request, or requests of max_cost each where
	// the algorithm takes no more (up to the steps left).
	spend := func(at, c int64) error {
		for {
			part := s.costAtMost(c)
			if err := ask(at, part); err != nil {
				return err
			}
			if c -= part; c <= 0 || len(steps) >= maxSteps {
				return nil
			}
		}
	}
	// drain takes what the rule says remains at at: a peek, then a request of that cost
	// (within max_cost), as a client that spends exactly what it is told is left.
	drain := func(at int64) error {
		if err := ask(at, 0); err != nil {
			return err
		}
		if r := results[len(results)-1].rr.Remaining; r > 0 && len(steps) < maxSteps {
			return spend(at, min(r, max(capacity, 1)))
		}
		return nil
	}
	a := aimsOf(s)
	// scale is the time scale of the next move: mostly the first statement's, now and
	// then another statement's (a multi-period limit's longer windows).
	scale := func() int64 {
		if len(a.scales) > 1 && rng.IntN(3) == 0 {
			return a.scales[rng.IntN(len(a.scales))]
		}
		return w
	}
	// period is the period whose boundaries the next attack straddles: half the time the
	// first statement's window, else one of the periods the rule implies.
	period := func() int64 {
		if rng.IntN(2) == 0 || len(a.periods) == 0 {
			return w
		}
		return a.periods[rng.IntN(len(a.periods))]
	}
	// nextBoundary is the first boundary of period p after t: a multiple of p in absolute
	// time, as aligned windows have them, or now and then one counted from an anchor the
	// algorithm revealed (see anchors).
	nextBoundary := func(t, p int64) int64 {
		if len(anchors) > 0 && rng.IntN(2) == 0 {
			// Mostly the latest: the key's state, and its phase, may have begun anew since.
			a := anchors[len(anchors)-1-rng.IntN(min(len(anchors), 2))]
			if rng.IntN(3) == 0 {
				a = anchors[rng.IntN(len(anchors))]
			}
			if a > t {
				return a
			}
			return a + ((t-a)/p+1)*p
		}
		abs := base + t
		return (abs/p+1)*p - base
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
			// Just before what the declared precision and resolution allow (it may be
			// that late, or a tick early).
			if p := s.spec.prec.RetryAfter + s.spec.res; p > 0 && r > p+1 && d.at+r-p-1 >= now && rng.IntN(2) == 0 {
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
			// A tick late, where a resolution lets the advice be a tick early.
			if tick := s.spec.res; tick > 0 && !results[len(results)-1].allowed {
				now = d.at + r + tick
				if err := ask(now, d.cost); err != nil {
					return steps, results, err
				}
			}
			pinned = nil
		case x < 35:
			// The full boundary burst: the capacity just before a boundary, and again at
			// it; or, half the time, what the rule says is left (drain).
			b := nextBoundary(now, period())
			if b-1 > now {
				now = b - 1
			}
			take := func(at int64) error { return spend(at, max(capacity, 1)) }
			if rng.IntN(2) == 0 {
				take = drain
			}
			if err := take(now); err != nil {
				return steps, results, err
			}
			now = b
			if err := take(now); err != nil {
				return steps, results, err
			}
		case x < 45:
			// A boundary attack: a burst just before a boundary and one at it.
			p := period()
			b := nextBoundary(now, p)
			lead := []int64{1, 1000, 1 + rng.Int64N(max(p/10, 1))}[rng.IntN(3)]
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
		case x < 50:
			// A sweep: the capacity just before a boundary of a period the rule implies,
			// then at that boundary and each next one while they fit in the longest
			// statement's window. An algorithm whose window is really that period (a
			// window rounded to the clock's unit, a month of the wrong length) lets the
			// capacity through at each.
			// Half the time it drains what the rule says is left instead: a bucket that
			// refills in steps then gives a step's worth beyond it at each boundary.
			p := period()
			b := nextBoundary(now, p)
			if b-1 > now {
				now = b - 1
			}
			take := func(at int64) error { return spend(at, max(capacity, 1)) }
			if rng.IntN(2) == 0 {
				take = drain
			}
			if err := take(now); err != nil {
				return steps, results, err
			}
			for k := int64(0); k < 6 && k*p < a.longest && len(steps) < maxSteps; k++ {
				now = b + k*p
				if err := take(now); err != nil {
					return steps, results, err
				}
			}
		case x < 56:
			// A burst at one instant.
			for range 2 + rng.IntN(int(min(capacity+2, 8))) {
				if err := ask(now, cost()); err != nil {
					return steps, results, err
				}
			}
		case x < 63 && len(holding) > 0:
			// Release a lease (a request finished).
			i := rng.IntN(len(holding))
			h := holding[i]
			holding = append(holding[:i], holding[i+1:]...)
			if err := emit(step{at: now, cost: h.cost, release: true, lease: h.lease}); err != nil {
				return steps, results, err
			}
		case x < 67:
			// Idle past every TTL.
			sc := scale()
			now += sc*int64(2+rng.IntN(3)) + rng.Int64N(sc+1)
			if err := ask(now, cost()); err != nil {
				return steps, results, err
			}
		default:
			sc := scale()
			switch y := rng.IntN(10); {
			case y < 2:
			case y < 4:
				now++
			case y < 8:
				now += rng.Int64N(sc/4 + 2)
			default:
				now += rng.Int64N(2*sc + 2)
			}
			if err := ask(now, cost()); err != nil {
				return steps, results, err
			}
		}
	}
	return steps, results, nil
}

// aims are what the traffic of a rule aims at: the time scales of its statements, and
// the periods whose boundaries an algorithm may act at.
type aims struct {
	scales  []int64 // the statements' windows (a rate's refill), shortest first
	longest int64   // the longest of them
	// periods: the statements' windows, the parameters' durations and rates' periods,
	// each also rounded down and up to the clock's units, and the clock's units (and a
	// week, 30 and 365 days) up to the longest window: the boundaries of every window an
	// algorithm might really keep, whatever it declares.
	periods []int64
}

// clockUnits are the units an algorithm's clock or periods may be rounded to, µs.
var clockUnits = []int64{1_000, 1_000_000, 60_000_000, 3_600_000_000, 86_400_000_000}

// calendarish are periods algorithms hard-code, µs: a week, 30 days, a year of 365 days.
var calendarish = []int64{7 * 86_400_000_000, 30 * 86_400_000_000, 365 * 86_400_000_000}

func aimsOf(s *subject) aims {
	a := aims{scales: s.spec.scales()} // never empty: the first statement's is there
	a.longest = a.scales[len(a.scales)-1]
	add := func(p int64) {
		if p >= 1 && p <= 2*a.longest && !slices.Contains(a.periods, p) {
			a.periods = append(a.periods, p)
		}
	}
	var durations []int64
	durations = append(durations, a.scales...)
	i := 0
	for _, p := range s.alg.Params {
		switch p.Kind {
		case algorithms.Duration:
			durations = append(durations, s.params[i])
		case algorithms.Rate:
			durations = append(durations, s.params[i+1])
			if s.params[i] > 0 {
				durations = append(durations, s.params[i+1]/s.params[i])
			}
			i++
		}
		i++
	}
	for _, d := range durations {
		add(d)
		for _, u := range clockUnits {
			if d > u {
				add(d / u * u)
				add((d + u - 1) / u * u)
			}
		}
	}
	for _, u := range clockUnits {
		add(u)
	}
	for _, u := range calendarish {
		add(u)
	}
	slices.Sort(a.periods)
	return a
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
