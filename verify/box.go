package verify

import (
	"fmt"
	"math/rand/v2"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

const stmtBox = "after a denial by the rule of a cost that can fit (an offence), every request of the key is denied, uncharged, until the block ends: block_for after the offence, or on a repeat offence within block_max of the last block's end, twice that block up to block_max; meanwhile remaining is 0 and retry-after is the block's end (later only when the rule alone would still deny), and from the block's end the rule decides as it would had the blocked requests never come"

// boxStep is one request of a penalty box trace: its instant (trace µs) and cost.
type boxStep struct{ at, cost int64 }

// boxOutcome is what a box trace's step got from the boxed rule (a) and, for the rule
// alone, from its twin (b: the request itself when the key was not blocked, else a peek).
type boxOutcome struct {
	a, b algorithms.Reply
}

// boxRun runs penalty box traces of one rule: the rule as compiled, box included, on one
// key, and the same algorithm and parameters without the box (its twin) on another, which
// gets every request the box's record says is not blocked, and a peek for the others.
type boxRun struct {
	box   algorithms.Box
	boxed algorithms.Rule // Key, Algorithm, Params, Box (or Compiled); Cost per step
	twin  algorithms.Rule
	slack int64
}

// boxRecord is the statement's account of the key's last block.
type boxRecord struct{ end, length int64 }

// offence returns the length of the block an offence at t starts after last.
func (r *boxRun) offence(last boxRecord, t int64) int64 {
	return r.box.Length(last.end, last.length, t)
}

// step runs st on g after the record rec (the statement's), and returns its outcome, the
// record after it, and what breaks the statement ("" for nothing).
func (r *boxRun) step(g *rig, st boxStep, rec boxRecord) (boxOutcome, boxRecord, string, error) {
	a, b := r.boxed, r.twin
	a.Cost, b.Cost = st.cost, st.cost
	blocked := st.at < rec.end
	if blocked {
		b.Cost = 0
	}
	cb := algorithms.Call{Op: algorithms.OpCheck, Skew: r.slack, Rules: []algorithms.Rule{b}}
	rb, err := g.do(st.at, 0, &cb)
	if err != nil {
		return boxOutcome{}, rec, "", err
	}
	ca := algorithms.Call{Op: algorithms.OpCheck, Skew: r.slack, Rules: []algorithms.Rule{a}}
	ra, err := g.do(st.at, 0, &ca)
	if err != nil {
		return boxOutcome{}, rec, "", err
	}
	out := boxOutcome{a: ra, b: rb}
	x, y := ra.Rules[0], rb.Rules[0]
	if blocked {
		wait := rec.end - st.at
		switch {
		case ra.Allowed:
			return out, rec, fmt.Sprintf("allowed %s before the end of the block the offence at %s started", fmtUS(wait), fmtUS(rec.end-rec.length)), nil
		case x.Remaining != 0:
			return out, rec, fmt.Sprintf("blocked, but reports remaining %d", x.Remaining), nil
		case st.cost > y.Limit && x.RetryAfter != algorithms.Never:
			return out, rec, fmt.Sprintf("a cost above the limit (%d) is told to retry after %s: it never fits", y.Limit, fmtUS(x.RetryAfter)), nil
		case st.cost <= y.Remaining && x.RetryAfter != wait:
			return out, rec, fmt.Sprintf("retry-after %s, but the block ends in %s and the rule alone allows the request", fmtUS(x.RetryAfter), fmtUS(wait)), nil
		case x.RetryAfter != algorithms.Never && x.RetryAfter < wait:
			return out, rec, fmt.Sprintf("retry-after %s, before the block's end in %s", fmtUS(x.RetryAfter), fmtUS(wait)), nil
		case x.ResetAfter < wait:
			return out, rec, fmt.Sprintf("reset-after %s, before the block's end in %s", fmtUS(x.ResetAfter), fmtUS(wait)), nil
		}
		return out, rec, "", nil
	}
	want, next := y, rec
	if !rb.Allowed && st.cost > 0 && y.RetryAfter != algorithms.Never {
		n := r.offence(rec, st.at)
		next = boxRecord{end: st.at + n, length: n}
		want.Remaining, want.RetryAfter, want.ResetAfter = 0, max(y.RetryAfter, n), max(y.ResetAfter, n)
	}
	switch {
	case ra.Allowed != rb.Allowed && rb.Allowed:
		return out, next, "denied where the rule alone allows it, and no block was running", nil
	case ra.Allowed != rb.Allowed:
		return out, next, "allowed where the rule alone denies it", nil
	case x != want:
		return out, next, fmt.Sprintf("reports %s, want %s", resultText(ra.Allowed, x), resultText(ra.Allowed, want)), nil
	}
	return out, next, "", nil
}

// run runs steps on g from an empty keyspace and returns the outcomes up to the first
// step that breaks the statement, that step's index (-1: none) and what it breaks.
func (r *boxRun) run(g *rig, steps []boxStep) ([]boxOutcome, int, string, error) {
	var rec boxRecord
	var outs []boxOutcome
	for i, st := range steps {
		o, next, msg, err := r.step(g, st, rec)
		if err != nil {
			return outs, -1, "", err
		}
		outs = append(outs, o)
		if msg != "" {
			return outs, i, msg, nil
		}
		rec = next
	}
	return outs, -1, "", nil
}

// genBox draws one trace of n steps over about span µs: bursts that offend, requests at
// the block's end and a microsecond either side of it (and of the end of block_max's
// memory), peeks, costs that never fit and pauses.
func (r *boxRun) genBox(rng *rand.Rand, n int, span, limit int64) []boxStep {
	var steps []boxStep
	var t int64
	var rec boxRecord
	scale := max(span/8, 1)
	for range n {
		switch x := rng.IntN(20); {
		case x < 8: // a burst
			t += rng.Int64N(3)
		case x < 13 && rec.end > 0:
			t = max(t, rec.end-1+rng.Int64N(3))
		case x < 15 && rec.end > 0 && r.box.Escalates():
			t = max(t, rec.end+r.box.Max-1+rng.Int64N(3))
		default:
			t += rng.Int64N(scale + 1)
		}
		cost := int64(1)
		switch y := rng.IntN(12); {
		case y == 0:
			cost = 0
		case y == 1:
			cost = limit + 1
		case y < 4:
			cost = 1 + rng.Int64N(max(limit, 1))
		}
		steps = append(steps, boxStep{at: t, cost: cost})
		// Track blocks as the statement does, assuming a denial offends: enough to aim
		// at the ends of blocks.
		if t >= rec.end && rng.IntN(3) == 0 {
			n := r.offence(rec, t)
			rec = boxRecord{end: t + n, length: n}
		}
	}
	return steps
}

// penaltyBox checks rule ru's penalty box (PropBox) with wire parameters w on traces of
// its own, within the verify budget, and shrinks a breach to the fewest requests.
func (c *checker) penaltyBox(p *dsl.Policy, ru *dsl.Rule, w []int64, i int, params string) (Result, error) {
	res := Result{Policy: p.Name, Rule: ru.Name, Algorithm: ru.Algorithm.Name, Params: params, Property: PropBox, Statement: stmtBox}
	sub := c.subject(p, ru, w, i)
	key := fmt.Sprintf("rl:verify:{%s:%s:%d:box}", p.Name, ru.Name, i)
	r := &boxRun{
		box:   ru.Box,
		boxed: algorithms.Rule{Key: key, Algorithm: ru.Algorithm, Params: w, Box: ru.Box},
		twin:  algorithms.Rule{Key: fmt.Sprintf("rl:verify:{%s:%s:%d:alone}", p.Name, ru.Name, i), Algorithm: ru.Algorithm, Params: w},
		slack: p.ClockSkew,
	}
	if cr := c.plan.Compiled(ru); cr != nil && !ru.Shadow {
		// What production runs: the rule as compiled into the plan's script.
		r.boxed = r.boxed.Compile(cr)
	}
	span := max(c.span(sub), 4*ru.Box.For, 2*ru.Box.Max)
	t := stepTrace[boxStep, boxOutcome]{
		per:    2,
		gen:    func(rng *rand.Rand, n int, limit int64) []boxStep { return r.genBox(rng, n, span, limit) },
		run:    r.run,
		limit:  func(o boxOutcome) int64 { return o.b.Rules[0].Limit },
		at:     func(st boxStep) int64 { return st.at },
		step:   func(st boxStep) string { return fmt.Sprintf("cost %d", st.cost) },
		result: func(o boxOutcome) string { return resultText(o.a.Allowed, o.a.Rules[0]) },
		unit:   "requests",
	}
	return t.check(c, c.rng(p.Name, ru.Name, params, PropBox), res, func(traces, _, calls int) string {
		return fmt.Sprintf("held on %d traces, %d requests", traces, calls/2)
	})
}
