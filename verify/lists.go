package verify

import (
	"fmt"
	"math/rand/v2"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

const stmtLists = "from the decision after a key is put on the rule's deny list until the one after it is taken off, every request of the key is denied, remaining 0, retry-after at least the list's deny_retry (-1 for a cost that can never fit), uncharged; while it is on the exempt list (and not the deny list) every request is allowed, retry-after 0, uncharged, with the remaining a peek sees; otherwise the rule decides as it would had the listed requests never come"

// lstStep is one step of a list trace: a request of cost (op lstRequest), or a list
// change: put the key on list (lstAdd) or take it off (lstRemove).
type lstStep struct {
	at, cost int64
	op       int
	deny     bool // the change's list: the deny list, else the exempt list
}

const (
	lstRequest = iota
	lstAdd
	lstRemove
)

func (st lstStep) String(r *lstRun) string {
	list := r.rule.Lists.Exempt
	if st.deny {
		list = r.rule.Lists.Deny
	}
	switch st.op {
	case lstAdd:
		return "put on " + list
	case lstRemove:
		return "take off " + list
	}
	return fmt.Sprintf("cost %d", st.cost)
}

// lstRun runs list traces of one rule with lists: the rule as compiled into the plan's
// script on one key, put on and taken off its lists, beside a twin (the same rule without
// lists, on a key of its own) that gets every request the key's lists leave to the rule,
// and a peek for the others.
type lstRun struct {
	rule  algorithms.Rule
	twin  algorithms.Rule
	slack int64
}

func (r *lstRun) call(g *rig, t int64, rule algorithms.Rule) (algorithms.Reply, error) {
	c := algorithms.Call{Op: algorithms.OpCheck, Skew: r.slack, Rules: []algorithms.Rule{rule}}
	return g.do(t, 0, &c)
}

// step runs st on g with the key's membership on (exempt, deny), and returns the key's
// reply, and what breaks the statement ("" for nothing).
func (r *lstRun) step(g *rig, i int, st lstStep, on *[2]bool) (algorithms.Reply, string, error) {
	if st.op != lstRequest {
		c := algorithms.Call{Op: algorithms.OpList, Skew: r.slack, List: r.rule.Lists.Exempt, Action: algorithms.ListAdd, Rules: []algorithms.Rule{r.rule}}
		if st.deny {
			c.List = r.rule.Lists.Deny
		}
		if st.op == lstRemove {
			c.Action = algorithms.ListRemove
		}
		c.Rules[0].Lease = "list"
		rep, err := g.do(st.at, 0, &c)
		if err != nil {
			return rep, "", err
		}
		k := 0
		if st.deny {
			k = 1
		}
		on[k] = st.op == lstAdd
		if rep.Member != on[k] {
			return rep, fmt.Sprintf("the change reports membership %v, want %v", rep.Member, on[k]), nil
		}
		return rep, "", nil
	}
	a, b := r.rule, r.twin
	a.Cost, b.Cost = st.cost, st.cost
	a.Lease = fmt.Sprintf("lease-%d", i)
	b.Lease = a.Lease
	listed := on[0] || on[1]
	if listed {
		b.Cost = 0
	}
	ra, err := r.call(g, st.at, a)
	if err != nil {
		return ra, "", err
	}
	rb, err := r.call(g, st.at, b)
	if err != nil {
		return ra, "", err
	}
	x, y := ra.Rules[0], rb.Rules[0]
	switch {
	case on[1]:
		never := st.cost > y.Limit
		switch {
		case ra.Allowed:
			return ra, "allowed while on the deny list", nil
		case x.Remaining != 0:
			return ra, fmt.Sprintf("denied by the deny list, but reports remaining %d", x.Remaining), nil
		case never && x.RetryAfter != algorithms.Never:
			return ra, fmt.Sprintf("a cost above the limit (%d) is told to retry after %s: it never fits", y.Limit, fmtUS(x.RetryAfter)), nil
		case !never && x.RetryAfter < r.rule.Lists.DenyRetry:
			return ra, fmt.Sprintf("retry-after %s, before the deny list's %s", fmtUS(x.RetryAfter), fmtUS(r.rule.Lists.DenyRetry)), nil
		}
	case on[0]:
		switch {
		case !ra.Allowed:
			return ra, "denied while on the exempt list", nil
		case x.RetryAfter != 0 || x.Remaining != y.Remaining || x.Limit != y.Limit:
			return ra, fmt.Sprintf("exempt, reports %s, want the peek's %s", resultText(ra.Allowed, x), resultText(true, y)), nil
		}
	case ra.Allowed != rb.Allowed || x.Limit != y.Limit || x.Remaining != y.Remaining || x.RetryAfter != y.RetryAfter:
		return ra, fmt.Sprintf("reports %s, want %s: the rule alone, as if the listed requests had never come", resultText(ra.Allowed, x), resultText(rb.Allowed, y)), nil
	}
	return ra, "", nil
}

// run runs steps on g from an empty keyspace and returns the key's replies up to the
// first step that breaks the statement, that step's index (-1: none) and what it breaks.
func (r *lstRun) run(g *rig, steps []lstStep) ([]algorithms.Reply, int, string, error) {
	var on [2]bool
	var outs []algorithms.Reply
	for i, st := range steps {
		rep, msg, err := r.step(g, i, st, &on)
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

// genLists draws one trace of n steps over about span µs: bursts, costs up to the limit
// and beyond, and changes of the key's lists between them.
func (r *lstRun) genLists(rng *rand.Rand, n int, span, limit int64) []lstStep {
	var steps []lstStep
	var t int64
	scale := max(span/8, 1)
	for range n {
		if rng.IntN(2) == 0 {
			t += rng.Int64N(3)
		} else {
			t += rng.Int64N(scale + 1)
		}
		st := lstStep{at: t, cost: 1}
		switch y := rng.IntN(12); {
		case y < 2:
			st.op = lstAdd
		case y < 3:
			st.op = lstRemove
		case y < 5:
			st.cost = 1 + rng.Int64N(max(limit, 1))
		case y == 5:
			st.cost = 0
		case y == 6:
			st.cost = limit + 1
		}
		if st.op != lstRequest {
			st.deny = r.rule.Lists.Exempt == "" || r.rule.Lists.Deny != "" && rng.IntN(2) == 0
		}
		if m := r.rule.Algorithm.MaxCost; m > 0 {
			st.cost = min(st.cost, m)
		}
		steps = append(steps, st)
	}
	return steps
}

// lists checks rule ru's lists (PropLists) with wire parameters w on traces of their own,
// within the verify budget, and shrinks a breach to the fewest steps.
func (c *checker) lists(p *dsl.Policy, ru *dsl.Rule, w []int64, i int, params string) (Result, error) {
	res := Result{Policy: p.Name, Rule: ru.Name, Algorithm: ru.Algorithm.Name, Params: params, Property: PropLists, Statement: stmtLists}
	sub := c.subject(p, ru, w, i)
	rng := c.rng(p.Name, ru.Name, params, PropLists)
	r := &lstRun{
		rule:  algorithms.Rule{Key: fmt.Sprintf("rl:verify:{%s:%s:%d:lists}", p.Name, ru.Name, i), Algorithm: ru.Algorithm, Params: w, Lists: ru.Lists},
		twin:  algorithms.Rule{Key: fmt.Sprintf("rl:verify:{%s:%s:%d:alone}", p.Name, ru.Name, i), Algorithm: ru.Algorithm, Params: w},
		slack: p.ClockSkew,
	}
	if cr := c.plan.Compiled(ru); cr != nil && !ru.Shadow && ru.Box.For == 0 {
		// What production runs: the rule as compiled into the plan's script.
		r.rule = r.rule.Compile(cr)
	}
	span := c.span(sub)
	t := stepTrace[lstStep, algorithms.Reply]{
		per:    2,
		gen:    func(rng *rand.Rand, n int, limit int64) []lstStep { return r.genLists(rng, n, span, limit) },
		run:    r.run,
		limit:  replyLimit,
		at:     func(st lstStep) int64 { return st.at },
		step:   func(st lstStep) string { return st.String(r) },
		result: replyText,
		unit:   "steps",
	}
	return t.check(c, rng, res, func(traces, steps, _ int) string {
		return fmt.Sprintf("held on %d traces, %d steps", traces, steps)
	})
}
