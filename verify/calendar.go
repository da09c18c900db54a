package verify

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/calendar"
	"github.com/rlctl/rlctl/dsl"
)

// PropCalendar is the calendar property of a rule whose window is a calendar period.
const PropCalendar = "calendar"

const stmtCalendar = "each calendar period of the rule's time zone (from its first local instant to the next period's: a day of 23 or 25 hours on a daylight-saving change, a month of 28 to 31 days, a leap year's February) counts on its own and exactly: a request is allowed exactly when what the period allowed before it and its cost fit the limit, remaining is the limit less that, a denial's retry-after and a charged key's reset-after end at the period's end, to the microsecond"

// calSpan is how far verify's calendar traces reach from the trace's start (Epoch): past
// the end of February 2028, a leap year's, so that every period of a month or shorter
// around it, and two years of daylight-saving changes, are within reach.
var calSpan = time.Date(2028, time.March, 31, 0, 0, 0, 0, time.UTC).Sub(Epoch)

// calStep is one request of a calendar trace, at trace time at (µs after Epoch).
type calStep struct{ at, cost int64 }

// calRun runs calendar traces of one rule: the rule as compiled into the plan's script, on
// one key, each request's reply held to the periods the calendar package computes.
type calRun struct {
	rule   algorithms.Rule
	period calendar.Period
	// anchors are the period ends traces gather around (trace µs): those next to the
	// zone's changes, a leap February's, and others.
	anchors []int64
}

// calendarAnchors returns the ends of p's periods within calSpan of Epoch that traces
// should reach: every one for periods of a week or more; for days, those of the days
// around the zone's changes, the month ends, and February 2028's last days.
func calendarAnchors(p calendar.Period) []int64 {
	stop := Epoch.Add(calSpan)
	var odd []time.Time
	for t := Epoch.In(p.Loc); t.Before(stop); {
		_, end := t.ZoneBounds()
		if end.IsZero() || !end.Before(stop) {
			break
		}
		if end.After(t) {
			odd = append(odd, end)
			t = end
		} else {
			t = t.Add(time.Hour)
		}
	}
	var out []int64
	_, end := p.Bounds(Epoch)
	for end.Before(stop) {
		start, next := p.Next(end)
		keep := p.Unit != calendar.Day
		lt := end.In(p.Loc)
		if lt.Day() == 1 || lt.Month() == time.February && lt.Year() == 2028 && lt.Day() >= 28 || lt.Month() == time.March && lt.Year() == 2028 && lt.Day() <= 2 {
			keep = true
		}
		for _, z := range odd {
			if !z.Before(start.Add(-48*time.Hour)) && z.Before(next.Add(48*time.Hour)) {
				keep = true
			}
		}
		if keep {
			out = append(out, end.Sub(Epoch).Microseconds())
		}
		end = next
		_ = start
	}
	return out
}

// gen draws one trace of n requests: around one anchor, some hours before and after it
// (and a period before it, so the period is not empty when its end comes), costs of a
// unit, up to the limit, the limit, and beyond.
func (r *calRun) gen(rng *rand.Rand, n int, limit int64) []calStep {
	if len(r.anchors) == 0 {
		return nil
	}
	b := r.anchors[rng.IntN(len(r.anchors))]
	start, _ := r.period.Bounds(Epoch.Add(time.Duration(b-1) * time.Microsecond))
	first := start.Sub(Epoch).Microseconds()
	hours := int64(6 * time.Hour / time.Microsecond)
	steps := make([]calStep, 0, n)
	for range n {
		var at int64
		switch x := rng.IntN(10); {
		case x < 2:
			at = first + rng.Int64N(max(b-first, 1))
		case x < 6:
			at = b - 1 - rng.Int64N(hours)
		case x < 7:
			at = b - 1 - rng.Int64N(3)
		default:
			at = b + rng.Int64N(hours)
		}
		st := calStep{at: max(at, 0), cost: 1}
		switch y := rng.IntN(12); {
		case y < 4:
			st.cost = 1 + rng.Int64N(max(limit, 1))
		case y == 4:
			st.cost = max(limit, 1)
		case y == 5:
			st.cost = 0
		case y == 6:
			st.cost = limit + 1
		}
		if m := r.rule.Algorithm.MaxCost; m > 0 {
			st.cost = min(st.cost, m)
		}
		steps = append(steps, st)
	}
	slices.SortStableFunc(steps, func(a, b calStep) int { return int(min(max(a.at-b.at, -1), 1)) })
	return steps
}

// run runs steps on g from an empty keyspace and returns the replies up to the first step
// that breaks the statement, that step's index (-1: none) and what it breaks.
func (r *calRun) run(g *rig, steps []calStep) ([]algorithms.Reply, int, string, error) {
	used := map[int64]int64{} // allowed cost per period, by its first instant
	var outs []algorithms.Reply
	for i, st := range steps {
		rule := r.rule
		rule.Cost, rule.Lease = st.cost, fmt.Sprintf("lease-%d", i)
		rule.Span = algorithms.SpanAround(r.period, time.UnixMicro(g.base+st.at))
		c := algorithms.Call{Op: algorithms.OpCheck, Rules: []algorithms.Rule{rule}}
		rep, err := g.do(st.at, 0, &c)
		if err != nil {
			return outs, -1, "", err
		}
		outs = append(outs, rep)
		if msg := r.check(g.base+st.at, st.cost, rep, used); msg != "" {
			return outs, i, msg, nil
		}
	}
	return outs, -1, "", nil
}

// check holds one reply at instant now (µs since the Unix epoch) to the statement, given
// what each period allowed before (used, updated when allowed).
func (r *calRun) check(now, cost int64, rep algorithms.Reply, used map[int64]int64) string {
	x := rep.Rules[0]
	start, end := r.period.Bounds(time.UnixMicro(now))
	s, e := start.UnixMicro(), end.UnixMicro()
	n, limit := used[s], x.Limit
	period := fmt.Sprintf("the %s from %s to %s", r.period.Unit, start.In(r.period.Loc).Format(time.DateTime+" MST"), end.In(r.period.Loc).Format(time.DateTime+" MST"))
	fits := n+cost <= limit
	switch {
	case rep.Allowed != fits:
		return fmt.Sprintf("%s with %d allowed before it in %s, against a limit of %d", map[bool]string{true: "allowed", false: "denied"}[rep.Allowed], n, period, limit)
	case rep.Allowed:
		n += cost
		used[s] = n
		if x.Remaining != limit-n {
			return fmt.Sprintf("remaining %d, want %d: %d allowed in %s", x.Remaining, limit-n, n, period)
		}
		if n > 0 && x.ResetAfter != e-now {
			return fmt.Sprintf("reset-after %s, want %s: the end of %s", fmtUS(x.ResetAfter), fmtUS(e-now), period)
		}
	case cost <= limit && x.RetryAfter != e-now:
		return fmt.Sprintf("retry-after %s, want %s: the end of %s", fmtUS(x.RetryAfter), fmtUS(e-now), period)
	}
	return ""
}

// calendarProp checks rule ru's calendar (PropCalendar) with wire parameters w on traces
// of its own around its periods' ends, within the verify budget, and shrinks a breach to
// the fewest requests.
func (c *checker) calendarProp(p *dsl.Policy, ru *dsl.Rule, w []int64, i int, params string) (Result, error) {
	res := Result{Policy: p.Name, Rule: ru.Name, Algorithm: ru.Algorithm.Name, Params: params, Property: PropCalendar, Statement: stmtCalendar}
	rng := c.rng(p.Name, ru.Name, params, PropCalendar)
	r := &calRun{
		rule:    algorithms.Rule{Key: fmt.Sprintf("rl:verify:%s:%s:%d:cal", p.Name, ru.Name, i), Algorithm: ru.Algorithm, Params: w, Calendar: true},
		period:  *ru.Calendar,
		anchors: calendarAnchors(*ru.Calendar),
	}
	if ru.HasFurtherKeys() {
		r.rule.Key = fmt.Sprintf("rl:verify:{%s:%s:%d:cal}", p.Name, ru.Name, i)
	}
	if cr := c.plan.Compiled(ru); cr != nil && !ru.Shadow && ru.Box.For == 0 {
		// What production runs: the rule as compiled into the plan's script. A boxed or
		// shadow rule's calendar is its algorithm's, checked written out without them.
		r.rule = r.rule.Compile(cr)
	}
	t := stepTrace[calStep, algorithms.Reply]{
		per:    1,
		gen:    r.gen,
		run:    r.run,
		limit:  replyLimit,
		at:     func(st calStep) int64 { return st.at },
		step:   func(st calStep) string { return fmt.Sprintf("cost %d", st.cost) },
		result: replyText,
		unit:   "requests",
	}
	return t.check(c, rng, res, func(traces, steps, _ int) string {
		return fmt.Sprintf("held on %d traces around %d period ends, %d requests", traces, len(r.anchors), steps)
	})
}
