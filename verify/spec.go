package verify

import (
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/rlctl/rlctl/algorithms"
)

// spec is what one rule (an algorithm with its parameters) promises, read from the
// algorithm's declared guarantee: the statement the limit property checks, and the scales
// its traffic is generated at.
type spec struct {
	shape algorithms.Shape
	limit int64 // the guarantee's amount: the limit, burst or most in flight
	// window: the window (ShapeWindow), the lease TTL (ShapeInFlight), or the time to
	// refill from empty (ShapeRate), in µs: the scale of generated traffic.
	window       int64
	rate, period int64 // ShapeRate
	// bound is the factor of the statement the algorithm may reach by design (2 for
	// fixed_window's boundary burst); exact when 1.
	bound algorithms.Ratio
	note  string // why bound > 1
	prec  algorithms.Precision
	// skew widens the statement for clients whose clocks differ by up to skew µs (the
	// client-clock property): intervals are judged on the true clock, which the
	// algorithm sees shifted by up to skew.
	skew int64
	// res is the algorithm's declared clock resolution (Precision.Resolution, 0 for
	// 1µs): the limit is judged as if its clock could be off by a tick, and its answers
	// may be early or late by one.
	res int64
	// also are the further statements the algorithm keeps (Guarantee.Also), each a spec
	// of its own with the same precision.
	also []spec
	// err says why the guarantee gives no terms for these parameters.
	err error
}

// specOf returns the spec of algorithm a with wire parameters w, from a's guarantee.
func specOf(a *algorithms.Algorithm, w []int64) spec {
	g := a.Guarantee
	sp := spec{shape: g.Shape, bound: g.Bound, note: g.Why, prec: g.Precision}
	if sp.bound.Den == 0 {
		sp.bound = algorithms.Exact
	}
	t, ok, err := a.TermsOf(w)
	if !ok {
		sp.shape, sp.err, sp.window = algorithms.ShapeNone, err, scaleOf(a, w)
		return sp
	}
	sp.setTerms(t)
	sp.res = g.Precision.Resolution
	more, err := a.AlsoTermsOf(w)
	if err != nil {
		sp.shape, sp.err, sp.window = algorithms.ShapeNone, err, scaleOf(a, w)
		return sp
	}
	for i, t := range more {
		ag := g.Also[i]
		m := spec{shape: ag.Shape, bound: ag.Bound, note: ag.Why, prec: sp.prec, res: sp.res}
		if m.bound.Den == 0 {
			m.bound = algorithms.Exact
		}
		m.setTerms(t)
		sp.also = append(sp.also, m)
	}
	return sp
}

// setTerms sets s's figures from t.
func (s *spec) setTerms(t algorithms.Terms) {
	s.limit, s.window, s.rate, s.period = t.Amount, t.Interval, t.Rate, t.Period
	if s.shape == algorithms.ShapeRate {
		s.window = max(t.Refill(), 1)
	}
}

// statements are s and its further statements, s first.
func (s spec) statements() []spec {
	out := []spec{s}
	for _, m := range s.also {
		m.skew = s.skew
		out = append(out, m)
	}
	return out
}

// widen is how far the algorithm's clock may be from the true one when the limit is
// judged: the client clocks' skew and the clock's tick.
func (s spec) widen() int64 { return s.skew + s.res }

// scales are the time scales of s's statements, shortest first: what its traffic aims at.
func (s spec) scales() []int64 {
	var out []int64
	for _, m := range s.statements() {
		if w := max(m.window, 1); !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// exactAll reports whether every statement of s is exact.
func (s spec) exactAll() bool {
	for _, m := range s.statements() {
		if !m.exact() {
			return false
		}
	}
	return true
}

// noLimit says why a spec has no limit statement.
func (s spec) noLimit() string {
	if s.err != nil {
		return "the guarantee gives no limit for these parameters: " + s.err.Error()
	}
	return `the algorithm declares no limit (guarantee "none"), so there is nothing to hold it to`
}

// exact reports whether the spec's bound is the statement itself.
func (s spec) exact() bool { return s.bound.IsExact() }

// scaleOf is the longest duration or period among w: the time scale of an algorithm whose
// limit is unknown (1s when it has none).
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

// statement is the limit property's statement for s, in words: each of its statements,
// joined by "and".
func (s spec) statement() string {
	var parts []string
	for _, m := range s.statements() {
		parts = append(parts, m.clause())
	}
	st := strings.Join(parts, "; and ")
	if st == "" {
		return ""
	}
	if s.res > 0 {
		st += fmt.Sprintf(", judged at the algorithm's declared clock resolution of %s (its clock may be a tick off the true one)", fmtUS(s.res))
	}
	if s.skew > 0 {
		st = fmt.Sprintf("with client clocks up to %s apart, each stepping back and forth within that, judged on the true clock: ", fmtUS(s.skew)) + st
	}
	return st
}

// clause is one statement of s in words, with the intervals widened as judged.
func (s spec) clause() string {
	var st string
	switch s.shape {
	case algorithms.ShapeWindow:
		st = fmt.Sprintf("in every interval shorter than %s, the cost allowed is at most %d", fmtUS(s.window-s.widen()), s.limit)
	case algorithms.ShapeRate:
		st = fmt.Sprintf("in every interval of length T, the cost allowed is at most %d + T × %s", s.limit, fmtRate(s.rate, s.period))
		if w := s.widen(); w > 0 {
			st = fmt.Sprintf("in every interval of length T, the cost allowed is at most %d + (T + %s) × %s", s.limit, fmtUS(w), fmtRate(s.rate, s.period))
		}
	case algorithms.ShapeInFlight:
		st = fmt.Sprintf("at every instant, the cost of leases held (acquired, not released, younger than %s) is at most %d", fmtUS(s.window-s.widen()), s.limit)
	default:
		return ""
	}
	if !s.exact() {
		st += fmt.Sprintf(" (by design at most %s× that: %s)", s.bound, s.note)
	}
	return st
}

// fmtRate prints n per `per` µs as algorithms.FormatRate does: "20/h".
func fmtRate(n, per int64) string { return algorithms.FormatRate(n, per) }

func fmtUS(us int64) string { return algorithms.FormatDuration(us) }

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
// the statement scaled by factor, or nil when it holds. For ShapeInFlight the grants'
// ends must be set.
func (s spec) worst(gs []grant, factor algorithms.Ratio) *excess {
	return s.worstWidened(gs, factor, s.widen())
}

// worstWidened is worst with the intervals judged widened by widen µs (a window shorter
// by it, a rate's T longer): negative to judge them narrowed, as a denial is.
func (s spec) worstWidened(gs []grant, factor algorithms.Ratio, widen int64) *excess {
	if factor.Den == 0 {
		factor = algorithms.Exact
	}
	limit := factor.Of(s.limit)
	var w *excess
	better := func(e excess) {
		if w == nil || e.allowed*w.bound > w.allowed*e.bound || (e.allowed*w.bound == w.allowed*e.bound && e.to-e.from < w.to-w.from) {
			w = &e
		}
	}
	switch s.shape {
	case algorithms.ShapeWindow:
		win := s.window - widen
		if win <= 0 {
			return nil
		}
		var sum int64
		i := 0
		for j := range gs {
			sum += gs[j].cost
			for gs[j].at-gs[i].at >= win {
				sum -= gs[i].cost
				i++
			}
			if sum > limit {
				better(excess{from: i, to: j, allowed: sum, bound: limit, span: gs[j].at - gs[i].at})
			}
		}
	case algorithms.ShapeRate:
		// With the factor num/den, a breach is i <= j with
		//   sum(i..j)·period·den > num·(limit·period + (t_j - t_i + skew)·rate).
		// With prefix sums S, P = period·den and R = rate·num, the left side minus the
		// time term is (S_j·P - t_j·R) + (t_i·R - S_(i-1)·P): for each j, the best i is
		// the running maximum of the second part. Big integers: t·rate can pass 2^63.
		num, den := big.NewInt(factor.Num), big.NewInt(factor.Den)
		P := new(big.Int).Mul(big.NewInt(s.period), den)
		R := new(big.Int).Mul(big.NewInt(s.rate), num)
		lp := new(big.Int).Mul(big.NewInt(s.limit), big.NewInt(s.period))
		lp.Mul(lp, num)
		lp.Add(lp, new(big.Int).Mul(big.NewInt(widen), R))
		var sum int64
		var best big.Int
		bestI := -1
		var a, b, x big.Int
		for j := range gs {
			// Candidate i = j: t_j·R - S_(j-1)·P.
			a.Mul(big.NewInt(gs[j].at), R)
			b.Mul(big.NewInt(sum), P)
			a.Sub(&a, &b)
			if bestI < 0 || a.Cmp(&best) > 0 {
				best.Set(&a)
				bestI = j
			}
			sum += gs[j].cost
			// (S_j·P - t_j·R) + best > lp?
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
	case algorithms.ShapeInFlight:
		life := s.window - widen
		if life <= 0 {
			return nil
		}
		for j := range gs {
			var sum int64
			first := j
			for i := 0; i <= j; i++ {
				g := gs[i]
				released := g.endStep >= 0 && g.endStep < gs[j].step
				if !released && gs[j].at < g.at+life {
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
func describeParams(a *algorithms.Algorithm, w []int64) string { return a.DescribeParams(w) }
