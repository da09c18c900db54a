package verify

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/calendar"
	"github.com/rlctl/rlctl/dsl"
)

// PropSettle is the settle property of a rule whose algorithm carries a debt: requests
// charged an estimate and settled with their true cost (engine.Reserve, Settle).
const PropSettle = "settle"

const stmtSettle = "requests reserved with an estimated cost (engine.Reserve) and settled with their true cost (Settle) — an overdraft charged as a debt, a refund never more than the charge still weighs — keep the rule's limit statement over every interval that ends at an admission, each reservation counted at its true cost once settled and at its estimate while open: the true costs exceed the statement by at most the overdrafts of the reservations open at the interval's last admission (one overdraft, for a caller that settles before it reserves again); a key in debt is denied until the debt is earned back, and passes exactly at its retry-after"

// stlStep is one step of a settle trace, at trace time at: reservation id reserved with
// an estimate of cost, or (settle) settled with a true cost of cost.
type stlStep struct {
	at     int64
	id     int
	settle bool
	cost   int64
}

// stlOut is a step's outcome: a reservation's reply, or what a settlement did.
type stlOut struct {
	rep  algorithms.Reply
	what string
}

// stlRun runs settle traces of one rule: the rule as compiled into the plan's script, on
// one key, each reservation a check call and each settlement what Settle sends: the
// overdraft (OpOwe) or the refund Rule.Refundable allows (OpRefund).
type stlRun struct {
	rule algorithms.Rule
	sp   spec
	// client: the policy's clock is the client's, whose refund is at the reservation's
	// instant (as the engine sends it); else at the settlement's.
	client bool
	// cal is a calendar rule's period: each call carries the periods around its clock.
	cal *calendar.Period
}

// do runs op of cost on the rule at trace time at, the caller's clock skew off it.
func (r *stlRun) do(g *rig, at, skew int64, op algorithms.Op, cost int64) (algorithms.Reply, error) {
	rule := r.rule
	rule.Cost = cost
	if r.cal != nil {
		rule.Span = algorithms.SpanAround(*r.cal, time.UnixMicro(g.base+at+skew))
	}
	c := algorithms.Call{Op: op, Rules: []algorithms.Rule{rule}}
	return g.do(at, skew, &c)
}

// gen draws one trace of about n steps over about span µs: reservations of estimates from
// none to the limit, up to three open at once, each settled (or left open) with a true cost
// of none, less, the same, a little more or far more.
func (r *stlRun) gen(rng *rand.Rand, n int, span, limit int64) []stlStep {
	var steps []stlStep
	var open []int
	est := map[int]int64{}
	var t int64
	scale := max(span/8, 1)
	for id := 0; len(steps) < n; {
		if rng.IntN(3) > 0 {
			t += rng.Int64N(3)
		} else {
			t += rng.Int64N(scale + 1)
		}
		if len(open) > 0 && (len(open) >= 3 || rng.IntN(2) == 0) {
			k := rng.IntN(len(open))
			i, e := open[k], est[open[k]]
			open = append(open[:k], open[k+1:]...)
			st := stlStep{at: t, id: i, settle: true}
			switch rng.IntN(6) {
			case 0:
			case 1:
				st.cost = e
			case 2:
				st.cost = rng.Int64N(e + 1)
			case 3:
				st.cost = e + 1 + rng.Int64N(max(limit/4, 1))
			case 4:
				st.cost = e + 1 + rng.Int64N(2*limit+1)
			default:
				st.cost = e + rng.Int64N(3)
			}
			steps = append(steps, st)
			continue
		}
		st := stlStep{at: t, id: id, cost: rng.Int64N(max(limit/2, 1) + 1)}
		switch rng.IntN(8) {
		case 0:
			st.cost = 0
		case 1:
			st.cost = limit
		case 2:
			st.cost = 1
		}
		est[id], open = st.cost, append(open, id)
		id++
		steps = append(steps, st)
	}
	return steps
}

// refundable is the refund a settlement may give back: the engine's (Rule.Refundable),
// replaced by tests with a buggy one.
var refundable = (*algorithms.Rule).Refundable

// admitted is an allowed reservation of a settle trace.
type admitted struct {
	step    int
	at, est int64
	reset   int64 // the reservation's reset-after
	actual  int64
	settled bool
}

// run runs steps on g from an empty keyspace and returns the outcomes up to the first step
// that breaks the statement, that step's index (-1: none) and what it breaks.
func (r *stlRun) run(g *rig, steps []stlStep) ([]stlOut, int, string, error) {
	var outs []stlOut
	var adms []admitted
	open := map[int]int{} // reservation id → its index in adms
	for i, st := range steps {
		if st.settle {
			k, ok := open[st.id]
			if !ok {
				outs = append(outs, stlOut{what: "nothing to settle: its reservation was denied"})
				continue
			}
			delete(open, st.id)
			a := &adms[k]
			a.actual, a.settled = st.cost, true
			out := stlOut{what: fmt.Sprintf("settled at its estimate of %d", a.est)}
			op, cost, skew := algorithms.Op(""), int64(0), int64(0)
			switch diff := st.cost - a.est; {
			case diff > 0:
				op, cost = algorithms.OpOwe, diff
				out.what = fmt.Sprintf("owes %d over its estimate of %d", diff, a.est)
			case diff < 0:
				back := refundable(&r.rule, -diff, a.reset, st.at-a.at)
				out.what = fmt.Sprintf("given back %d of the %d under its estimate of %d", back, -diff, a.est)
				if back > 0 {
					op, cost = algorithms.OpRefund, back
					if r.client {
						skew = a.at - st.at
					}
				}
			}
			if op != "" {
				rep, err := r.do(g, st.at, skew, op, cost)
				if err != nil {
					return outs, -1, "", err
				}
				out.rep = rep
			}
			outs = append(outs, out)
			continue
		}
		rep, err := r.do(g, st.at, 0, algorithms.OpCheck, st.cost)
		if err != nil {
			return outs, -1, "", err
		}
		outs = append(outs, stlOut{rep: rep})
		x := rep.Rules[0]
		if !rep.Allowed {
			msg, err := r.retry(g, st, x.RetryAfter)
			if err != nil || msg != "" {
				return outs, i, msg, err
			}
			continue
		}
		open[st.id] = len(adms)
		adms = append(adms, admitted{step: i, at: st.at, est: st.cost, reset: x.ResetAfter})
		gs := make([]grant, len(adms))
		for k, a := range adms {
			cost := a.est
			if a.settled {
				cost = a.actual
			}
			gs[k] = grant{step: a.step, at: a.at, cost: cost, endStep: -1}
		}
		for _, sp := range append([]spec{r.sp}, r.sp.also...) {
			if e := sp.worstEnding(gs, sp.bound); e != nil {
				return outs, i, limitViolation(sp, gs, e, Fail).msg + ", each settled reservation counted at its true cost and each open one at its estimate", nil
			}
		}
	}
	return outs, -1, "", nil
}

// retry checks a denial's retry-after on copies of the state the denial left: the same
// request passes at it (within the algorithm's precision) and not a microsecond before.
// It leaves g as the denial left it and returns what breaks, or "".
func (r *stlRun) retry(g *rig, st stlStep, after int64) (msg string, err error) {
	if after < 0 || after > algorithms.MaxInt/2 {
		return "", nil // never, or beyond any trace
	}
	snap := g.h.Snapshot()
	calls := g.calls
	defer func() {
		g.h.Restore(snap)
		g.at(st.at)
		g.probeCalls += g.calls - calls
		g.calls = calls
	}()
	ask := func(at int64) (bool, error) {
		g.h.Restore(snap)
		rep, err := r.do(g, at, 0, algorithms.OpCheck, st.cost)
		return rep.Allowed, err
	}
	tick := r.sp.res
	late := st.at + after + r.sp.prec.RetryAfter + tick
	if ok, err := ask(late); err != nil || !ok {
		return fmt.Sprintf("denied with a retry-after of %s, but the same request is denied again at %s", fmtUS(after), fmtUS(late)), err
	}
	if early := st.at + after - 1 - tick; after-1-tick >= 0 {
		if ok, err := ask(early); err != nil || ok {
			return fmt.Sprintf("denied with a retry-after of %s, but the same request passes at %s, before it", fmtUS(after), fmtUS(early)), err
		}
	}
	return "", nil
}

// settleProp checks rule ru's settlements (PropSettle) with wire parameters w on traces of
// their own, within the verify budget, and shrinks a breach to the fewest steps.
func (c *checker) settleProp(p *dsl.Policy, ru *dsl.Rule, w []int64, i int, params string) (Result, error) {
	res := Result{Policy: p.Name, Rule: ru.Name, Algorithm: ru.Algorithm.Name, Params: params, Property: PropSettle, Statement: stmtSettle}
	sub := c.subject(p, ru, w, i)
	rng := c.rng(p.Name, ru.Name, params, PropSettle)
	r := &stlRun{
		rule:   algorithms.Rule{Key: fmt.Sprintf("rl:verify:%s:%s:%d:settle", p.Name, ru.Name, i), Algorithm: ru.Algorithm, Params: w, Calendar: ru.Calendar != nil},
		sp:     sub.spec,
		client: p.Clock == dsl.ClockClient,
		cal:    ru.Calendar,
	}
	if ru.HasFurtherKeys() {
		r.rule.Key = fmt.Sprintf("rl:verify:{%s:%s:%d:settle}", p.Name, ru.Name, i)
	}
	if cr := c.plan.Compiled(ru); cr != nil && !ru.Shadow && ru.Box.For == 0 && !ru.Lists.Any() {
		// What production runs: the rule as compiled into the plan's script. A boxed,
		// listed or shadow rule's settlements are its algorithm's, checked written out
		// without them.
		r.rule = r.rule.Compile(cr)
	}
	span := c.span(sub)
	t := stepTrace[stlStep, stlOut]{
		per:   1,
		gen:   func(rng *rand.Rand, n int, limit int64) []stlStep { return r.gen(rng, n, span, limit) },
		run:   r.run,
		limit: func(o stlOut) int64 { return replyLimit(o.rep) },
		at:    func(st stlStep) int64 { return st.at },
		step: func(st stlStep) string {
			if st.settle {
				return fmt.Sprintf("settle reservation %d: true cost %d", st.id, st.cost)
			}
			return fmt.Sprintf("reserve %d: estimate %d", st.id, st.cost)
		},
		result: func(o stlOut) string {
			if o.what != "" {
				return o.what
			}
			return replyText(o.rep)
		},
		unit: "steps",
	}
	return t.check(c, rng, res, func(traces, steps, _ int) string {
		return fmt.Sprintf("held on %d traces, %d reservations and settlements", traces, steps)
	})
}

// settles reports whether rule ru's requests may settle above their estimate and verify
// checks them so (PropSettle): a built-in whose algorithm carries a debt, without leases.
func settles(ru *dsl.Rule) bool {
	return algorithms.IsBuiltin(ru.Algorithm) && ru.Algorithm.CarriesDebt() && !ru.Algorithm.HasLease()
}

// worstEnding is worst restricted to the intervals that end at gs's last grant: the
// largest excess of those over the statement scaled by factor, or nil when they hold.
func (s spec) worstEnding(gs []grant, factor algorithms.Ratio) *excess {
	if len(gs) == 0 {
		return nil
	}
	if factor.Den == 0 {
		factor = algorithms.Exact
	}
	j := len(gs) - 1
	widen := s.widen()
	var w *excess
	better := func(e excess) {
		if w == nil || e.allowed*w.bound > w.allowed*e.bound {
			w = &e
		}
	}
	switch s.shape {
	case algorithms.ShapeWindow:
		win := s.window - widen
		var sum int64
		i := j
		for ; i >= 0 && gs[j].at-gs[i].at < win; i-- {
			sum += gs[i].cost
		}
		if limit := factor.Of(s.limit); sum > limit && i < j {
			better(excess{from: i + 1, to: j, allowed: sum, bound: limit, span: gs[j].at - gs[i+1].at})
		}
	case algorithms.ShapeRate:
		// sum(i..j)·period·den > num·(limit·period + (t_j - t_i + widen)·rate), as worst.
		P := new(big.Int).Mul(big.NewInt(s.period), big.NewInt(factor.Den))
		R := new(big.Int).Mul(big.NewInt(s.rate), big.NewInt(factor.Num))
		lp := new(big.Int).Mul(big.NewInt(s.limit), big.NewInt(s.period))
		lp.Mul(lp, big.NewInt(factor.Num))
		var sum int64
		var left, right big.Int
		for i := j; i >= 0; i-- {
			sum += gs[i].cost
			dt := gs[j].at - gs[i].at
			left.Mul(big.NewInt(sum), P)
			right.Mul(big.NewInt(dt+widen), R)
			right.Add(&right, lp)
			if left.Cmp(&right) > 0 {
				bound := new(big.Int).Mul(big.NewInt(dt), R)
				bound.Add(bound, lp)
				bound.Add(bound, new(big.Int).Mul(big.NewInt(widen), R))
				bound.Quo(bound, P)
				better(excess{from: i, to: j, allowed: sum, bound: bound.Int64(), span: dt})
			}
		}
	}
	return w
}
