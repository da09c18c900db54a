package verify

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

// This file checks whole policies: the stack of rules a request meets, decided in one
// call (atomicity, races of whole requests) or, in cluster mode without a shard, one call
// per rule with refunds (the compensation path).

// stackReq is one request of a policy trace: a cost per rule (0: a peek) and which of two
// keys per rule it uses.
type stackReq struct {
	at     int64
	costs  []int64
	keys   []int
	client int
	lease  int
}

// stackRule is one rule of a policy under check.
type stackRule struct {
	sub    *subject
	shadow bool
	name   string
}

func (sr stackRule) key(k int) string { return fmt.Sprintf("%s:k%d", sr.sub.key, k) }

// call returns the engine-script call of request q on rules idx (all when nil).
func stackCall(rules []stackRule, q stackReq, idx []int) algorithms.Call {
	c := algorithms.Call{Op: algorithms.OpCheck}
	if idx == nil {
		for i := range rules {
			idx = append(idx, i)
		}
	}
	for _, i := range idx {
		sr := rules[i]
		r := algorithms.Rule{Key: sr.key(q.keys[i]), Algorithm: sr.sub.alg, Cost: q.costs[i], Shadow: sr.shadow, Params: sr.sub.params}
		if sr.sub.lease >= 0 {
			r.Lease = leaseID(q.lease)
		}
		c.Rules = append(c.Rules, r)
	}
	return c
}

// stackOutcome is what one request of a policy trace did.
type stackOutcome struct {
	rep     algorithms.Reply
	changed []bool // per rule: its key changed
}

// runStack runs a policy trace, one call per request.
func (c *checker) runStack(rules []stackRule, reqs []stackReq) ([]stackOutcome, int, error) {
	g, err := c.rig()
	if err != nil {
		return nil, 0, err
	}
	out := make([]stackOutcome, len(reqs))
	for n, q := range reqs {
		call := stackCall(rules, q, nil)
		g.at(q.at)
		before := make([]string, len(rules))
		for i, sr := range rules {
			before[i] = g.dump(sr.key(q.keys[i]))
		}
		rep, err := g.do(q.at, &call)
		if err != nil {
			return nil, 0, fmt.Errorf("request %d: %w", n+1, err)
		}
		o := stackOutcome{rep: rep, changed: make([]bool, len(rules))}
		for i, sr := range rules {
			o.changed[i] = g.dump(sr.key(q.keys[i])) != before[i]
		}
		out[n] = o
	}
	c.calls += g.calls
	return out, g.calls, nil
}

// checkStack checks the atomicity statement on a policy trace.
func checkStack(rules []stackRule, reqs []stackReq, out []stackOutcome) *violation {
	for n, o := range out {
		want, decider := true, 0
		for i, rr := range o.rep.Rules {
			if !rr.Allowed && !rules[i].shadow && want {
				want, decider = false, i+1
			}
		}
		if o.rep.Allowed != want || o.rep.Decider != decider {
			return &violation{status: Fail, mark: []int{n}, msg: fmt.Sprintf("the reply says allowed=%v deciding rule %d, but the rules' verdicts give allowed=%v deciding rule %d", o.rep.Allowed, o.rep.Decider, want, decider)}
		}
		for i, ch := range o.changed {
			peek := reqs[n].costs[i] == 0
			if ch && (!o.rep.Allowed || peek) {
				what := "a denied request"
				if o.rep.Allowed {
					what = "a peek (cost 0)"
				}
				return &violation{status: Fail, mark: []int{n}, msg: fmt.Sprintf("%s changed the key of rule %q", what, rules[i].name)}
			}
		}
	}
	return nil
}

// genStack generates a policy trace: requests to every rule at once, at instants that
// straddle the first rule's window boundaries, in bursts, with idle gaps.
func genStack(rng *rand.Rand, rules []stackRule, span int64, n int) []stackReq {
	w := max(rules[0].sub.spec.window, 1)
	var reqs []stackReq
	var now int64
	for len(reqs) < n && now <= span {
		switch x := rng.IntN(10); {
		case x < 3:
		case x < 5:
			b := (base+now)/w*w + w - base
			now = b - rng.Int64N(2)
		case x < 6:
			now += w * int64(2+rng.IntN(3))
		default:
			now += rng.Int64N(w/3 + 2)
		}
		q := stackReq{at: now, lease: len(reqs) + 1}
		for _, sr := range rules {
			limit := max(sr.sub.spec.limit, 1)
			var cost int64
			switch y := rng.IntN(20); {
			case y < 1:
				cost = 0
			case y < 13:
				cost = 1
			case y < 19:
				cost = 1 + rng.Int64N(limit)
			default:
				cost = limit + 1
			}
			q.costs = append(q.costs, cost)
			q.keys = append(q.keys, rng.IntN(2))
		}
		reqs = append(reqs, q)
	}
	return reqs
}

// policy checks the whole-policy properties.
func (c *checker) policy(p *dsl.Policy, rules []stackRule) ([]Result, error) {
	var out []Result
	// Atomicity of the stack.
	rng := c.rng(p.Name, "stack")
	r := Result{Policy: p.Name, Property: PropAtomicity, Statement: stmtAtomN}
	span := 8 * max(rules[0].sub.spec.window, 1)
	if c.o.duration > 0 {
		span = c.o.duration.Microseconds()
	}
	for r.Calls < c.o.budget && r.Counterexample == nil {
		reqs := genStack(rng, rules, span, c.steps(c.o.budget-r.Calls))
		res, calls, err := c.runStack(rules, reqs)
		if err != nil {
			return nil, err
		}
		r.Calls += calls
		v := checkStack(rules, reqs, res)
		if v == nil {
			continue
		}
		runs := shrinkRuns
		small := shrinkSlice(reqs, func(try []stackReq) bool {
			res, _, err := c.runStack(rules, try)
			return err == nil && checkStack(rules, try, res) != nil
		}, &runs)
		res, _, err = c.runStack(rules, small)
		if err != nil {
			return nil, err
		}
		v = checkStack(rules, small, res)
		r.Status, r.Detail = v.status, v.msg
		r.Counterexample = stackCounterexample(rules, small, res, v.mark, len(reqs))
	}
	if r.Counterexample == nil {
		r.Detail = fmt.Sprintf("held on %d requests to %d %s at once", r.Calls, len(rules), plural(int64(len(rules)), "rule", "rules"))
	}
	out = append(out, r)

	race, err := c.stackRace(p, rules, false)
	if err != nil {
		return nil, err
	}
	out = append(out, race)
	if p.Shard == nil && len(rules) > 1 {
		race, err := c.stackRace(p, rules, true)
		if err != nil {
			return nil, err
		}
		out = append(out, race)
	}
	return out, nil
}

func stackCounterexample(rules []stackRule, reqs []stackReq, out []stackOutcome, mark []int, original int) *Counterexample {
	ce := &Counterexample{Original: original, Unit: "requests"}
	for n, q := range reqs {
		var req, res []string
		for i, sr := range rules {
			req = append(req, fmt.Sprintf("%s[k%d] cost %d", sr.name, q.keys[i], q.costs[i]))
			v := "allows"
			if !out[n].rep.Rules[i].Allowed {
				v = "denies"
			}
			if out[n].changed[i] {
				v += " (key changed)"
			}
			res = append(res, sr.name+" "+v)
		}
		verdict := "denied"
		if out[n].rep.Allowed {
			verdict = "allowed"
		}
		ce.Steps = append(ce.Steps, CounterStep{At: time.Duration(q.at) * time.Microsecond, Request: strings.Join(req, ", "),
			Result: verdict + ": " + strings.Join(res, ", "), Mark: slices.Contains(mark, n)})
	}
	return ce
}

// stackRace races N clients' whole requests at shared keys. At script granularity each
// request is one call; in cluster mode each rule is its own call, in rule order, and a
// request denied by a later rule refunds the earlier ones. Rounds run at instants that
// move across the first rule's windows; each round's calls are interleaved by a seeded
// random schedule (and an adversarial one: every client's first call before any second).
func (c *checker) stackRace(p *dsl.Policy, rules []stackRule, cluster bool) (Result, error) {
	r := Result{Policy: p.Name, Property: PropRace, Statement: stmtRace}
	if cluster {
		r.Property, r.Statement = PropRaceCluster, stmtRaceC
	}
	rng := c.rng(p.Name, r.Property)
	w := max(rules[0].sub.spec.window, 1)
	var rounds []stackRound
	var now int64
	lease := 0
	for budget := c.o.budget; budget > 0; {
		n := 2 + rng.IntN(c.o.clients-1)
		rd := stackRound{at: now, adversarial: rng.IntN(3) == 0}
		// Each rule's key is shared by the round's clients, or one per client (the same
		// client's again in later rounds).
		perClient := make([]bool, len(rules))
		for i := range perClient {
			perClient[i] = rng.IntN(2) == 0
		}
		for i := range n {
			lease++
			q := stackReq{at: now, client: i, lease: lease}
			for k, sr := range rules {
				limit := max(sr.sub.spec.limit, 1)
				q.costs = append(q.costs, 1+rng.Int64N(max(limit/int64(n), 1)))
				key := 0
				if perClient[k] {
					key = 1 + i
				}
				q.keys = append(q.keys, key)
			}
			rd.reqs = append(rd.reqs, q)
		}
		rd.seed = rng.Uint64()
		rounds = append(rounds, rd)
		budget -= n * len(rules)
		now += rng.Int64N(w/2 + 2)
	}
	run, err := c.runRace(rules, rounds, cluster)
	if err != nil {
		return r, err
	}
	r.Calls = run.calls
	v := raceBreach(rules, rounds, run)
	if v == nil {
		r.Detail = fmt.Sprintf("held over %d rounds of up to %d clients, %d calls", len(rounds), c.o.clients, run.calls)
		return r, nil
	}
	runs := shrinkRuns
	small := shrinkSlice(rounds, func(try []stackRound) bool {
		run, err := c.runRace(rules, try, cluster)
		return err == nil && raceBreach(rules, try, run) != nil
	}, &runs)
	run, err = c.runRace(rules, small, cluster)
	if err != nil {
		return r, err
	}
	v = raceBreach(rules, small, run)
	r.Status, r.Detail = Fail, v.msg
	ce := &Counterexample{Original: len(rounds), Unit: "rounds"}
	ce.Steps = append(ce.Steps, run.ops...)
	r.Counterexample = ce
	return r, nil
}

// stackRound is concurrent clients at one instant.
type stackRound struct {
	at          int64
	reqs        []stackReq
	seed        uint64
	adversarial bool
}

// stackRaceRun is what a race did: per round, per client, whether the whole request was
// allowed; and the calls in the order they ran, for a counterexample.
type stackRaceRun struct {
	allowed [][]bool
	ops     []CounterStep
	calls   int
}

// runRace runs race rounds on a fresh host.
func (c *checker) runRace(rules []stackRule, rounds []stackRound, cluster bool) (*stackRaceRun, error) {
	g, err := c.rig()
	if err != nil {
		return nil, err
	}
	out := &stackRaceRun{}
	groups := [][]int{nil} // nil: every rule in one call
	if cluster {
		groups = nil
		for i := range rules {
			groups = append(groups, []int{i})
		}
	}
	for _, rd := range rounds {
		n := len(rd.reqs)
		next := make([]int, n)    // the next group each client checks
		charged := make([]int, n) // groups charged so far
		done := make([]bool, n)
		denied := make([]bool, n)
		refunds := make([][]int, n) // groups left to refund
		allowed := make([]bool, n)
		rng := rand.New(rand.NewPCG(rd.seed, 0))
		turn := 0
		for {
			var live []int
			for i := range n {
				if !done[i] {
					live = append(live, i)
				}
			}
			if len(live) == 0 {
				break
			}
			i := live[rng.IntN(len(live))]
			if rd.adversarial {
				i = live[turn%len(live)]
				turn++
			}
			q := rd.reqs[i]
			var call algorithms.Call
			var what string
			var gi int
			if denied[i] {
				gi = refunds[i][0]
				refunds[i] = refunds[i][1:]
				call = stackCall(rules, q, groups[gi])
				call.Op = algorithms.OpRefund
				what = "refund " + groupName(rules, groups[gi])
				done[i] = len(refunds[i]) == 0
			} else {
				gi = next[i]
				call = stackCall(rules, q, groups[gi])
				what = "check " + groupName(rules, groups[gi])
			}
			rep, err := g.do(rd.at, &call)
			if err != nil {
				return nil, err
			}
			res := "refunded"
			if call.Op == algorithms.OpCheck {
				if rep.Allowed {
					res = "allowed"
					charged[i]++
					next[i]++
					if next[i] == len(groups) {
						done[i], allowed[i] = true, true
					}
				} else {
					res = "denied"
					denied[i] = true
					for gi := range charged[i] {
						refunds[i] = append(refunds[i], gi)
					}
					done[i] = len(refunds[i]) == 0
				}
			}
			out.ops = append(out.ops, CounterStep{At: time.Duration(rd.at) * time.Microsecond, Client: i + 1,
				Request: fmt.Sprintf("%s (%s)", what, costText(rules, q, groups[gi])), Result: res})
		}
		for i := range n {
			if allowed[i] {
				out.ops = append(out.ops, CounterStep{At: time.Duration(rd.at) * time.Microsecond, Client: i + 1, Request: "request", Result: "allowed", Mark: true})
			}
		}
		out.allowed = append(out.allowed, allowed)
	}
	out.calls = g.calls
	c.calls += g.calls
	return out, nil
}

func groupName(rules []stackRule, idx []int) string {
	if idx == nil {
		return "all rules"
	}
	var names []string
	for _, i := range idx {
		names = append(names, rules[i].name)
	}
	return strings.Join(names, "+")
}

func costText(rules []stackRule, q stackReq, idx []int) string {
	if idx == nil {
		for i := range rules {
			idx = append(idx, i)
		}
	}
	var parts []string
	for _, i := range idx {
		parts = append(parts, fmt.Sprintf("cost %d", q.costs[i]))
	}
	return strings.Join(parts, ", ")
}

// raceBreach checks every enforcing rule's bound, key by key (the documented bound: races
// must not add to what the algorithm allows alone), over the requests a race allowed.
func raceBreach(rules []stackRule, rounds []stackRound, run *stackRaceRun) *violation {
	for i, sr := range rules {
		if sr.shadow || sr.sub.spec.kind == boundNone {
			continue
		}
		byKey := map[int][]grant{}
		var keys []int
		for r, rd := range rounds {
			for k, q := range rd.reqs {
				if !run.allowed[r][k] {
					continue
				}
				key := q.keys[i]
				if _, ok := byKey[key]; !ok {
					keys = append(keys, key)
				}
				byKey[key] = append(byKey[key], grant{step: len(byKey[key]), at: rd.at, cost: q.costs[i], endStep: -1})
			}
		}
		for _, key := range keys {
			if e := sr.sub.spec.worst(byKey[key], sr.sub.spec.documented); e != nil {
				return &violation{status: Fail, msg: fmt.Sprintf("rule %q key k%d: %d allowed within %s where at most %d may pass", sr.name, key, e.allowed, fmtUS(e.span), e.bound)}
			}
		}
	}
	return nil
}
