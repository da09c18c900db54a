package verify

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

const stmtOverride = "from the instant an override is set, changed or cleared, the key decides by the new figures, from what it had used (its remaining under the old figures, taken from what a fresh key has), at most all of the new figures' room; an override with an end is in force until that instant and not a microsecond longer, and from it the rule's own figures apply to what the key used then (gcra, token_bucket and leaky_bucket: every reply is that of a rule of those figures charged what was used at the change; the others: the remaining at the change)"

// ovrStep is one step of an override trace: a request of cost (op ovrRequest), or a
// change: set override figures[q] until until (trace µs, 0: none), or clear.
type ovrStep struct {
	at, cost int64
	op       int
	q        int
	until    int64
}

const (
	ovrRequest = iota
	ovrSet
	ovrClear
)

func (st ovrStep) String(r *ovrRun) string {
	switch st.op {
	case ovrSet:
		s := "override " + r.alg.DescribeParams(r.figures[st.q])
		if st.until > 0 {
			s += " until " + fmtUS(st.until)
		}
		return s
	case ovrClear:
		return "clear the override"
	}
	return fmt.Sprintf("cost %d", st.cost)
}

// ovrRun runs override traces of one overridable rule: the rule as compiled into the
// plan's script on one key, changed at runtime, beside the statement's account of it.
// Where the statement is exact (exact), the account is a twin: a rule of the figures in
// force, not overridable, on a key of its own, charged at each change what the key had
// used; every reply of the key must be the twin's.
type ovrRun struct {
	alg     *algorithms.Algorithm
	rule    algorithms.Rule // the overridable rule (Compiled when the plan has it); Cost per step
	own     []int64
	figures [][]int64
	exact   bool
	slack   int64
	key     string
}

// twinAlgorithms are the built-ins whose state after a change is that of a fresh key of
// the new figures charged what was used: their state is one amount (cells, tokens, a
// level), at most their room, that the change carries. The window algorithms keep what
// they counted, which may be above a lowered limit: no charge of a fresh key gives that.
var twinAlgorithms = []string{"gcra", "token_bucket", "leaky_bucket"}

// ovrState is the statement's account during a trace.
type ovrState struct {
	cur   []int64 // the figures in force
	until int64   // when the override in force ends (trace µs); 0: none or no end
	twin  int     // the twin key's number: a new one at each change
}

func (r *ovrRun) twinRule(params []int64, n int, cost int64) algorithms.Rule {
	return algorithms.Rule{Key: fmt.Sprintf("%s:twin%d", r.key, n), Algorithm: r.alg, Params: params, Cost: cost, Lease: "twin"}
}

// call runs one check of rules at t on g.
func (r *ovrRun) call(g *rig, t int64, rule algorithms.Rule) (algorithms.Reply, error) {
	c := algorithms.Call{Op: algorithms.OpCheck, Skew: r.slack, Rules: []algorithms.Rule{rule}}
	return g.do(t, 0, &c)
}

// fresh returns what a peek of an empty key of figures params reports at t.
func (r *ovrRun) fresh(g *rig, t int64, params []int64, n int) (algorithms.RuleResult, error) {
	rep, err := r.call(g, t, algorithms.Rule{Key: fmt.Sprintf("%s:fresh%d", r.key, n), Algorithm: r.alg, Params: params, Lease: "fresh"})
	if err != nil {
		return algorithms.RuleResult{}, err
	}
	return rep.Rules[0], nil
}

// carry moves the account to figures to at t: the twin of the figures in force tells what
// the key used, and a new twin of figures to is charged that, at most its room.
func (r *ovrRun) carry(g *rig, t int64, s *ovrState, to []int64) error {
	if !r.exact {
		s.cur = to
		return nil
	}
	old, err := r.call(g, t, r.twinRule(s.cur, s.twin, 0))
	if err != nil {
		return err
	}
	f, err := r.fresh(g, t, s.cur, s.twin)
	if err != nil {
		return err
	}
	used := f.Remaining - old.Rules[0].Remaining
	s.twin++
	s.cur = to
	nf, err := r.fresh(g, t, to, s.twin)
	if err != nil {
		return err
	}
	if used = min(used, nf.Remaining); used > 0 {
		if _, err := r.call(g, t, r.twinRule(to, s.twin, used)); err != nil {
			return err
		}
	}
	return nil
}

// step runs st on g after the account s, and returns the key's reply, and what breaks the
// statement ("" for nothing).
func (r *ovrRun) step(g *rig, i int, st ovrStep, s *ovrState) (algorithms.Reply, string, error) {
	if s.until > 0 && st.at >= s.until {
		// The override ended at its until: the account carries what the key used then.
		if err := r.carry(g, s.until, s, r.own); err != nil {
			return algorithms.Reply{}, "", err
		}
		s.until = 0
	}
	if st.op == ovrRequest {
		a := r.rule
		a.Cost, a.Lease = st.cost, fmt.Sprintf("lease-%d", i)
		ra, err := r.call(g, st.at, a)
		if err != nil || !r.exact {
			return ra, "", err
		}
		b := r.twinRule(s.cur, s.twin, st.cost)
		b.Lease = a.Lease
		rb, err := r.call(g, st.at, b)
		if err != nil {
			return ra, "", err
		}
		return ra, r.compare(ra, rb, s), nil
	}
	// A change: the key's remaining before it, the change, and a peek after it.
	peek := r.rule
	peek.Cost, peek.Lease = 0, "peek"
	before, err := r.call(g, st.at, peek)
	if err != nil {
		return before, "", err
	}
	f, err := r.fresh(g, st.at, s.cur, -1)
	if err != nil {
		return before, "", err
	}
	to, until := r.own, int64(0)
	c := algorithms.Call{Op: algorithms.OpOverride, Skew: r.slack, Rules: []algorithms.Rule{peek}}
	if st.op == ovrSet {
		to, until = r.figures[st.q], st.until
		c.Override = &algorithms.Override{Params: to}
		if until > 0 {
			c.Override.Until = g.base + until
		}
	}
	if _, err := g.do(st.at, 0, &c); err != nil {
		return before, "", err
	}
	if err := r.carry(g, st.at, s, to); err != nil {
		return before, "", err
	}
	s.until = until
	after, err := r.call(g, st.at, peek)
	if err != nil {
		return after, "", err
	}
	nf, err := r.fresh(g, st.at, to, -2)
	if err != nil {
		return after, "", err
	}
	used := f.Remaining - before.Rules[0].Remaining
	want := max(nf.Remaining-max(used, 0), 0)
	x := after.Rules[0]
	switch {
	case x.Limit != nf.Limit:
		return after, fmt.Sprintf("after the change the key reports a limit of %d, but its figures (%s) have %d", x.Limit, r.alg.DescribeParams(to), nf.Limit), nil
	case before.Rules[0].Remaining == 0 && !r.exact:
		// A window algorithm's count may be above the old limit: the key used at
		// least all of it.
		if x.Remaining > want {
			return after, fmt.Sprintf("after the change the key has %d remaining, want at most %d: it had used all %d of the old figures, and the new figures have %d", x.Remaining, want, f.Remaining, nf.Remaining), nil
		}
	case x.Remaining != want:
		return after, fmt.Sprintf("after the change the key has %d remaining, want %d: it had used %d of %d, and the new figures have %d", x.Remaining, want, used, f.Remaining, nf.Remaining), nil
	}
	if r.exact {
		rb, err := r.call(g, st.at, r.twinRule(s.cur, s.twin, 0))
		if err != nil {
			return after, "", err
		}
		return after, r.compare(after, rb, s), nil
	}
	return after, "", nil
}

// compare returns what breaks the statement when the key answered a and its twin b.
func (r *ovrRun) compare(a, b algorithms.Reply, s *ovrState) string {
	x, y := a.Rules[0], b.Rules[0]
	figures := "the rule's own figures"
	if !slices.Equal(s.cur, r.own) {
		figures = "the override's figures (" + r.alg.DescribeParams(s.cur) + ")"
	}
	switch {
	case a.Allowed && !b.Allowed:
		return "allowed where " + figures + ", from what the key had used, deny it"
	case !a.Allowed && b.Allowed:
		return "denied where " + figures + ", from what the key had used, allow it"
	case x.Limit != y.Limit || x.Remaining != y.Remaining || x.RetryAfter != y.RetryAfter:
		return fmt.Sprintf("reports %s, want %s by %s", resultText(a.Allowed, x), resultText(b.Allowed, y), figures)
	}
	return ""
}

// run runs steps on g from an empty keyspace and returns the key's replies up to the
// first step that breaks the statement, that step's index (-1: none) and what it breaks.
func (r *ovrRun) run(g *rig, steps []ovrStep) ([]algorithms.Reply, int, string, error) {
	s := ovrState{cur: r.own}
	var outs []algorithms.Reply
	for i, st := range steps {
		rep, msg, err := r.step(g, i, st, &s)
		if err != nil {
			return outs, -1, "", err
		}
		outs = append(outs, rep)
		if msg != "" {
			return outs, i, msg, nil
		}
	}
	return outs, -1, "", nil
}

// genOverride draws one trace of n steps over about span µs: bursts, changes to and from
// the candidate figures (some with an end), requests a microsecond either side of an end
// and at it, and pauses.
func (r *ovrRun) genOverride(rng *rand.Rand, n int, span, limit int64) []ovrStep {
	var steps []ovrStep
	var t, until int64
	scale := max(span/8, 1)
	for range n {
		switch x := rng.IntN(20); {
		case x < 8:
			t += rng.Int64N(3)
		case x < 12 && until > t:
			t = until - 1 + rng.Int64N(3)
		default:
			t += rng.Int64N(scale + 1)
		}
		st := ovrStep{at: t, cost: 1}
		switch y := rng.IntN(10); {
		case y == 0:
			st.op = ovrClear
			until = 0
		case y < 3:
			st.op, st.q = ovrSet, rng.IntN(len(r.figures))
			if rng.IntN(2) == 0 {
				st.until = t + 1 + rng.Int64N(2*scale)
			}
			until = st.until
		case y < 5:
			st.cost = 1 + rng.Int64N(max(limit, 1))
		case y == 5:
			st.cost = 0
		}
		if r.alg.MaxCost > 0 {
			st.cost = min(st.cost, r.alg.MaxCost)
		}
		steps = append(steps, st)
	}
	return steps
}

// overrideFigures draws up to four figures a key of a rule of a with wire parameters own
// may take: some of its values scaled up or down, each a valid override.
func overrideFigures(rng *rand.Rand, a *algorithms.Algorithm, own []int64) [][]int64 {
	var out [][]int64
	for try := 0; try < 64 && len(out) < 4; try++ {
		q := slices.Clone(own)
		for j := range q {
			if a.IsLeaseSlot(j) || rng.IntN(2) == 0 {
				continue
			}
			switch rng.IntN(4) {
			case 0:
				q[j] = max(q[j]/2, 1)
			case 1:
				q[j] *= 2
			case 2:
				q[j] *= 10
			default:
				q[j]++
			}
		}
		if slices.Equal(q, own) || a.CheckOverride(own, q) != nil || slices.ContainsFunc(out, func(o []int64) bool { return slices.Equal(o, q) }) {
			continue
		}
		out = append(out, q)
	}
	return out
}

// override checks rule ru's overrides (PropOverride) with wire parameters w on traces of
// their own, within the verify budget, and shrinks a breach to the fewest steps.
func (c *checker) override(p *dsl.Policy, ru *dsl.Rule, w []int64, i int, params string) (Result, error) {
	res := Result{Policy: p.Name, Rule: ru.Name, Algorithm: ru.Algorithm.Name, Params: params, Property: PropOverride, Statement: stmtOverride}
	sub := c.subject(p, ru, w, i)
	rng := c.rng(p.Name, ru.Name, params, PropOverride)
	r := &ovrRun{
		alg:   ru.Algorithm,
		rule:  algorithms.Rule{Key: fmt.Sprintf("rl:verify:{%s:%s:%d:ovr}", p.Name, ru.Name, i), Algorithm: ru.Algorithm, Params: w, Overridable: true},
		own:   w,
		exact: slices.Contains(twinAlgorithms, ru.Algorithm.Name),
		slack: p.ClockSkew,
	}
	r.key = r.rule.Key
	r.figures = overrideFigures(rng, ru.Algorithm, w)
	if len(r.figures) == 0 {
		res.Status = Skip
		res.Detail = "no other figures a key of this rule could take were found"
		return res, nil
	}
	if cr := c.plan.Compiled(ru); cr != nil && !ru.Shadow && ru.Box.For == 0 {
		// What production runs: the rule as compiled into the plan's script.
		r.rule = r.rule.Compile(cr)
	}
	span := c.span(sub)
	t := stepTrace[ovrStep, algorithms.Reply]{
		per:    3,
		gen:    func(rng *rand.Rand, n int, limit int64) []ovrStep { return r.genOverride(rng, n, span, limit) },
		run:    r.run,
		limit:  replyLimit,
		at:     func(st ovrStep) int64 { return st.at },
		step:   func(st ovrStep) string { return st.String(r) },
		result: replyText,
		unit:   "steps",
	}
	return t.check(c, rng, res, func(traces, steps, _ int) string {
		return fmt.Sprintf("held on %d traces, %d steps (figures %s)", traces, steps, r.describeFigures())
	})
}

// replyLimit is the limit a one-rule reply reports (0 for a reply without rules).
func replyLimit(rep algorithms.Reply) int64 {
	if len(rep.Rules) == 0 {
		return 0
	}
	return rep.Rules[0].Limit
}

// replyText describes a one-rule reply in a counterexample ("" for a reply without rules).
func replyText(rep algorithms.Reply) string {
	if len(rep.Rules) == 0 {
		return ""
	}
	return resultText(rep.Allowed, rep.Rules[0])
}

func (r *ovrRun) describeFigures() string {
	var s []string
	for _, q := range r.figures {
		s = append(s, r.alg.DescribeParams(q))
	}
	return strings.Join(s, "; ")
}
