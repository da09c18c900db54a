package verify

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/rlctl/rlctl/algorithms"
)

// boundKind is the shape of an algorithm's limit statement.
type boundKind int

const (
	boundNone     boundKind = iota // unknown: the limit property is skipped
	boundWindow                    // at most limit cost in any interval shorter than window
	boundRate                      // at most capacity + rate·T/period cost in any interval of length T
	boundInFlight                  // at most max cost of leases held at any instant
)

// spec is what one rule (an algorithm with its parameters) promises: the statement the
// limit property checks, and the scales its traffic is generated at.
type spec struct {
	kind  boundKind
	limit int64 // limit, capacity, burst or max
	// window: the window (boundWindow), the lease TTL (boundInFlight), or the time to
	// refill from empty (boundRate), in µs: the scale of generated traffic.
	window       int64
	rate, period int64 // boundRate
	// documented is the factor of limit the algorithm is documented to allow in a
	// window-long interval when it does not meet the exact statement (2 for fixed_window's
	// boundary burst and sliding_window's estimate); 1 when the statement is exact.
	documented int64
	note       string // why documented > 1
}

// specOf returns the spec of algorithm a with wire parameters w. Built-in algorithms have
// fixed specs; a plugin gets one from its parameter names: limit (count) and window
// (duration) is a window algorithm held to the exact statement, warned about up to twice
// the limit (what fixed_window and sliding_window allow) and failed beyond it; capacity
// or burst (count) and rate (rate) is a
// rate algorithm; max (count), ttl (duration) and a lease is a concurrency limit. Any
// other plugin has no limit statement.
func specOf(a *algorithms.Algorithm, w []int64) spec {
	switch a.Name {
	case "sliding_log":
		return spec{kind: boundWindow, limit: w[0], window: w[1], documented: 1}
	case "fixed_window":
		return spec{kind: boundWindow, limit: w[0], window: w[1], documented: 2,
			note: "fixed_window allows up to 2×limit in a window-long interval across a window boundary (the boundary burst); use sliding_log, sliding_window or gcra for a smooth limit"}
	case "sliding_window":
		return spec{kind: boundWindow, limit: w[0], window: w[1], documented: 2,
			note: "sliding_window estimates the previous window's requests as spread evenly; traffic bunched at the end of a window gets up to 2×limit through in a window-long interval; use sliding_log where the limit must be exact"}
	case "token_bucket", "leaky_bucket":
		return rateSpec(w[0], w[1], w[2])
	case "gcra":
		return rateSpec(w[2], w[0], w[1])
	case "concurrency":
		return spec{kind: boundInFlight, limit: w[0], window: w[1], documented: 1}
	}
	// A plugin: read the parameter names.
	idx := map[string]int{}
	kinds := map[string]algorithms.Kind{}
	i := 0
	hasLease := false
	for _, p := range a.Params {
		idx[p.Name], kinds[p.Name] = i, p.Kind
		hasLease = hasLease || p.Kind == algorithms.Lease
		if p.Kind == algorithms.Rate {
			i++
		}
		i++
	}
	is := func(name string, k algorithms.Kind) bool {
		kk, ok := kinds[name]
		return ok && kk == k
	}
	switch {
	case is("limit", algorithms.Count) && is("window", algorithms.Duration):
		return spec{kind: boundWindow, limit: w[idx["limit"]], window: w[idx["window"]], documented: 2,
			note: "a plugin with limit and window parameters is warned about up to 2×limit in a window-long interval, the most fixed_window's boundary burst and sliding_window's estimate allow by design, and fails beyond it"}
	case is("rate", algorithms.Rate) && (is("capacity", algorithms.Count) || is("burst", algorithms.Count)):
		c := "capacity"
		if !is(c, algorithms.Count) {
			c = "burst"
		}
		r := idx["rate"]
		return rateSpec(w[idx[c]], w[r], w[r+1])
	case is("max", algorithms.Count) && is("ttl", algorithms.Duration) && hasLease:
		return spec{kind: boundInFlight, limit: w[idx["max"]], window: w[idx["ttl"]], documented: 1}
	}
	return spec{kind: boundNone, window: scaleOf(a, w)}
}

func rateSpec(capacity, rate, period int64) spec {
	refill := mulDiv(capacity, period, rate)
	return spec{kind: boundRate, limit: capacity, rate: rate, period: period, window: max(refill, 1), documented: 1}
}

// scaleOf is the longest duration or period among w: the time scale of an algorithm whose
// meaning is unknown (1s when it has none).
func scaleOf(a *algorithms.Algorithm, w []int64) int64 {
	var s int64
	i := 0
	for _, p := range a.Params {
		switch p.Kind {
		case algorithms.Duration:
			s = max(s, w[i])
		case algorithms.Rate:
			s = max(s, w[i+1])
			i++
		}
		i++
	}
	if s == 0 {
		s = 1_000_000
	}
	return s
}

// statement is the limit property's statement for s, in words.
func (s spec) statement() string {
	switch s.kind {
	case boundWindow:
		return fmt.Sprintf("in every interval shorter than %s, the cost allowed is at most %d", fmtUS(s.window), s.limit)
	case boundRate:
		return fmt.Sprintf("in every interval of length T, the cost allowed is at most %d + T × %s", s.limit, fmtRate(s.rate, s.period))
	case boundInFlight:
		return fmt.Sprintf("at every instant, the cost of leases held (acquired, not released, younger than %s) is at most %d", fmtUS(s.window), s.limit)
	}
	return ""
}

// fmtRate prints n per `per` µs as a whole amount per second, minute, hour or day when
// one is (rates arrive reduced: "1024/h" is 1 per 3.515625s), else as n/period.
func fmtRate(n, per int64) string {
	for _, u := range []struct {
		us   int64
		name string
	}{{1e6, "s"}, {60e6, "m"}, {3600e6, "h"}, {86400e6, "d"}} {
		if u.us >= per && n <= math.MaxInt64/u.us && (n*u.us)%per == 0 {
			return fmt.Sprintf("%d/%s", n*u.us/per, u.name)
		}
	}
	return fmt.Sprintf("%d/%s", n, fmtUS(per))
}

func fmtUS(us int64) string { return fmtDur(time.Duration(us) * time.Microsecond) }

// grant is one allowed charge of a trace.
type grant struct {
	step int   // index of the step (or client) in the trace
	at   int64 // µs
	cost int64
	// endStep is the step that released the lease (boundInFlight; -1: never released).
	endStep int
}

// excess is a breach of a bound: the grants from..to (indexes into the grants) hold
// `allowed` where the bound is `bound`.
type excess struct {
	from, to       int
	allowed, bound int64
	span           int64 // µs from the first grant to the last
}

// worst returns the largest excess of grants (in step order, times non-decreasing) over
// limit×factor, or nil when the bound holds. For boundInFlight the grants' ends must be
// set.
func (s spec) worst(gs []grant, factor int64) *excess {
	limit := s.limit * factor
	var w *excess
	better := func(e excess) {
		if w == nil || e.allowed*w.bound > w.allowed*e.bound || (e.allowed*w.bound == w.allowed*e.bound && e.to-e.from < w.to-w.from) {
			w = &e
		}
	}
	switch s.kind {
	case boundWindow:
		var sum int64
		i := 0
		for j := range gs {
			sum += gs[j].cost
			for gs[j].at-gs[i].at >= s.window {
				sum -= gs[i].cost
				i++
			}
			if sum > limit {
				better(excess{from: i, to: j, allowed: sum, bound: limit, span: gs[j].at - gs[i].at})
			}
		}
	case boundRate:
		// A breach is i <= j with sum(i..j)·period > limit·period + (t_j - t_i)·rate.
		// With prefix sums S, the left side minus the time term is
		// (S_j·period - t_j·rate) + (t_i·rate - S_(i-1)·period): for each j, the best i
		// is the running maximum of the second part. Big integers: t·rate can pass 2^63.
		P, R := big.NewInt(s.period), big.NewInt(s.rate)
		lp := new(big.Int).Mul(big.NewInt(limit), P)
		var sum int64
		var best big.Int
		bestI := -1
		var a, b, x big.Int
		for j := range gs {
			// Candidate i = j: t_j·rate - S_(j-1)·period.
			a.Mul(big.NewInt(gs[j].at), R)
			b.Mul(big.NewInt(sum), P)
			a.Sub(&a, &b)
			if bestI < 0 || a.Cmp(&best) > 0 {
				best.Set(&a)
				bestI = j
			}
			sum += gs[j].cost
			// (S_j·period - t_j·rate) + best > limit·period?
			x.Mul(big.NewInt(sum), P)
			b.Mul(big.NewInt(gs[j].at), R)
			x.Sub(&x, &b)
			x.Add(&x, &best)
			if x.Cmp(lp) > 0 {
				i := bestI
				var allowed int64
				for k := i; k <= j; k++ {
					allowed += gs[k].cost
				}
				dt := gs[j].at - gs[i].at
				bound := new(big.Int).Mul(big.NewInt(dt), R)
				bound.Add(bound, lp)
				bound.Quo(bound, P) // what may pass in dt, rounded down
				better(excess{from: i, to: j, allowed: allowed, bound: bound.Int64(), span: dt})
			}
		}
	case boundInFlight:
		for j := range gs {
			var sum int64
			first := j
			for i := 0; i <= j; i++ {
				g := gs[i]
				released := g.endStep >= 0 && g.endStep < gs[j].step
				if !released && gs[j].at < g.at+s.window {
					sum += g.cost
					first = min(first, i)
				}
			}
			if sum > limit {
				better(excess{from: first, to: j, allowed: sum, bound: limit, span: gs[j].at - gs[first].at})
			}
		}
	}
	return w
}

// describeParams renders wire parameters by name: "limit=5 window=1m".
func describeParams(a *algorithms.Algorithm, w []int64) string {
	var parts []string
	i := 0
	for _, p := range a.Params {
		switch p.Kind {
		case algorithms.Count:
			parts = append(parts, fmt.Sprintf("%s=%d", p.Name, w[i]))
		case algorithms.Duration:
			parts = append(parts, fmt.Sprintf("%s=%s", p.Name, fmtUS(w[i])))
		case algorithms.Rate:
			parts = append(parts, p.Name+"="+fmtRate(w[i], w[i+1]))
			i++
		}
		i++
	}
	return strings.Join(parts, " ")
}
