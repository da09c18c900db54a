package verify

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

// PropDelay is the delay property of a rate rule: requests that wait for their turn
// (engine.Engine.Wait, httplimit.WithDelay).
const PropDelay = "delay"

const stmtDelay = "a request that may wait (engine.Wait) goes on at once when the rule allows it, else waits for the earliest slot within its max delay: the requests, each at the instant it goes on (its arrival plus its wait), keep the rate's limit statement; one is denied only when its retry-after is beyond its max delay, and a wait is never beyond it"

// dlyStep is one request of a delay trace: at trace time at, of cost, that may wait up to
// max µs.
type dlyStep struct{ at, cost, max int64 }

// dlyRun runs delay traces of one rate rule: the rule as compiled into the plan's script,
// on one key, every request an OpDelay call.
type dlyRun struct {
	rule algorithms.Rule
	sp   spec
}

// gen draws one trace of n requests over about span µs: clumps that outrun the rate (so
// that requests wait), costs of a unit and more, max delays from none to a few periods.
func (r *dlyRun) gen(rng *rand.Rand, n int, span, limit int64) []dlyStep {
	var steps []dlyStep
	var t int64
	scale := max(span/8, 1)
	for range n {
		if rng.IntN(3) > 0 {
			t += rng.Int64N(3)
		} else {
			t += rng.Int64N(scale + 1)
		}
		st := dlyStep{at: t, cost: 1, max: rng.Int64N(2*scale + 1)}
		switch y := rng.IntN(10); {
		case y < 3:
			st.cost = 1 + rng.Int64N(max(limit, 1))
		case y == 3:
			st.cost = limit + 1
		case y == 4:
			st.max = 0
		}
		steps = append(steps, st)
	}
	return steps
}

// run runs steps on g from an empty keyspace and returns the replies up to the first step
// that breaks the statement, that step's index (-1: none) and what it breaks.
func (r *dlyRun) run(g *rig, steps []dlyStep) ([]algorithms.Reply, int, string, error) {
	var outs []algorithms.Reply
	var gs []grant // the requests that went on, at the instant each did
	for i, st := range steps {
		rule := r.rule
		rule.Cost, rule.Lease = st.cost, fmt.Sprintf("lease-%d", i)
		c := algorithms.Call{Op: algorithms.OpDelay, MaxDelay: st.max, Rules: []algorithms.Rule{rule}}
		rep, err := g.do(st.at, 0, &c)
		if err != nil {
			return outs, -1, "", err
		}
		outs = append(outs, rep)
		x := rep.Rules[0]
		switch {
		case rep.Allowed && (rep.Delay < 0 || rep.Delay > st.max):
			return outs, i, fmt.Sprintf("allowed after a wait of %s, beyond its max delay of %s", fmtUS(rep.Delay), fmtUS(st.max)), nil
		case !rep.Allowed && x.RetryAfter >= 0 && x.RetryAfter <= st.max:
			return outs, i, fmt.Sprintf("denied with a retry-after of %s, within its max delay of %s: it should have waited", fmtUS(x.RetryAfter), fmtUS(st.max)), nil
		case rep.Allowed && st.cost > 0:
			gs = append(gs, grant{step: i, at: st.at + rep.Delay, cost: st.cost, endStep: -1})
		}
	}
	// The requests in the order they go on. A breach is one of the trace up to its latest
	// request too: a request's wait depends on the requests before it only.
	slices.SortStableFunc(gs, func(a, b grant) int { return int(min(max(a.at-b.at, -1), 1)) })
	if e := r.sp.worst(gs, algorithms.Exact); e != nil {
		bad := 0
		for k := e.from; k <= e.to; k++ {
			bad = max(bad, gs[k].step)
		}
		return outs[:bad+1], bad, limitViolation(r.sp, gs, e, Fail).msg + ", counting each request at the instant it goes on (arrival + wait)", nil
	}
	return outs, -1, "", nil
}

// delayProp checks rule ru's waits (PropDelay) with wire parameters w on traces of their
// own, within the verify budget, and shrinks a breach to the fewest requests.
func (c *checker) delayProp(p *dsl.Policy, ru *dsl.Rule, w []int64, i int, params string) (Result, error) {
	res := Result{Policy: p.Name, Rule: ru.Name, Algorithm: ru.Algorithm.Name, Params: params, Property: PropDelay, Statement: stmtDelay}
	sub := c.subject(p, ru, w, i)
	rng := c.rng(p.Name, ru.Name, params, PropDelay)
	r := &dlyRun{
		rule: algorithms.Rule{Key: fmt.Sprintf("rl:verify:%s:%s:%d:delay", p.Name, ru.Name, i), Algorithm: ru.Algorithm, Params: w},
		sp:   sub.spec,
	}
	if ru.HasFurtherKeys() {
		r.rule.Key = fmt.Sprintf("rl:verify:{%s:%s:%d:delay}", p.Name, ru.Name, i)
	}
	if cr := c.plan.Compiled(ru); cr != nil && !ru.Shadow && ru.Box.For == 0 && !ru.Lists.Any() {
		// What production runs: the rule as compiled into the plan's script. A boxed,
		// listed or shadow rule's waits are its algorithm's, checked written out without
		// them.
		r.rule = r.rule.Compile(cr)
	}
	span := c.span(sub)
	t := stepTrace[dlyStep, algorithms.Reply]{
		per:    1,
		gen:    func(rng *rand.Rand, n int, limit int64) []dlyStep { return r.gen(rng, n, span, limit) },
		run:    r.run,
		limit:  replyLimit,
		at:     func(st dlyStep) int64 { return st.at },
		step:   func(st dlyStep) string { return fmt.Sprintf("cost %d, may wait %s", st.cost, fmtUS(st.max)) },
		result: delayText,
		unit:   "requests",
	}
	return t.check(c, rng, res, func(traces, steps, _ int) string {
		return fmt.Sprintf("held on %d traces, %d requests", traces, steps)
	})
}

// delayText describes a delay call's reply: replyText, and the wait when there was one.
func delayText(rep algorithms.Reply) string {
	s := replyText(rep)
	if rep.Allowed && rep.Delay > 0 {
		s += ", after a wait of " + fmtUS(rep.Delay)
	}
	return s
}

// waits reports whether rule ru's requests may wait and verify checks them so (PropDelay):
// a built-in of a rate, without concurrency leases.
func waits(ru *dsl.Rule) bool {
	return algorithms.IsBuiltin(ru.Algorithm) && ru.Algorithm.Guarantee.Shape == algorithms.ShapeRate && !ru.Algorithm.HasLease()
}
