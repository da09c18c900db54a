package verify

import (
	"errors"
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
	at    int64
	costs []int64
	keys  []int
	lease int
}

// stackRule is one rule of a policy under check.
type stackRule struct {
	sub    *subject
	shadow bool
	name   string
	// compiled is the rule's compiled form in the plan's script, which stack calls name.
	compiled *algorithms.Compiled
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
		r := algorithms.Rule{Key: sr.key(q.keys[i]), Algorithm: sr.sub.alg, Cost: q.costs[i], Shadow: sr.shadow, Params: sr.sub.params}.Compile(sr.compiled)
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

// runStack runs a policy trace, one call per request. A request whose call fails ends
// the run: the outcomes of the requests before it come back with a *callError.
func (c *checker) runStack(rules []stackRule, reqs []stackReq) ([]stackOutcome, int, error) {
	g, err := c.rig()
	if err != nil {
		return nil, 0, err
	}
	out := make([]stackOutcome, 0, len(reqs))
	for n, q := range reqs {
		call := stackCall(rules, q, nil)
		g.at(q.at)
		before := make([]string, len(rules))
		for i, sr := range rules {
			before[i] = g.dump(sr.key(q.keys[i]), sr.sub.alg.Keys...)
		}
		rep, err := g.do(q.at, 0, &call)
		if err != nil {
			c.calls += g.calls
			return out, g.calls, &callError{step: n, err: err}
		}
		o := stackOutcome{rep: rep, changed: make([]bool, len(rules))}
		for i, sr := range rules {
			o.changed[i] = g.dump(sr.key(q.keys[i]), sr.sub.alg.Keys...) != before[i]
		}
		out = append(out, o)
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
			q.costs = append(q.costs, sr.sub.costAtMost(cost))
			q.keys = append(q.keys, rng.IntN(2))
		}
		reqs = append(reqs, q)
	}
	return reqs
}

// stackAtomicity checks the atomicity of policy p's stack of rules.
func (c *checker) stackAtomicity(p *dsl.Policy, rules []stackRule) (Result, error) {
	rng := c.rng(p.Name, "stack")
	r := Result{Policy: p.Name, Property: PropAtomicity, Statement: stmtAtomN}
	span := 8 * max(rules[0].sub.spec.window, 1)
	if c.o.duration > 0 {
		span = c.o.duration.Microseconds()
	}
	for r.Calls < c.o.budget && r.Counterexample == nil && r.Error == "" {
		reqs := genStack(rng, rules, span, c.steps(c.o.budget-r.Calls))
		res, calls, err := c.runStack(rules, reqs)
		r.Calls += calls
		var ce *callError
		if errors.As(err, &ce) {
			c.stackError(&r, rules, reqs[:ce.step+1], ce)
			break
		} else if err != nil {
			return r, err
		}
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
			return r, err
		}
		v = checkStack(rules, small, res)
		r.Status, r.Detail = v.status, v.msg
		r.Counterexample = stackCounterexample(rules, small, res, v.mark, len(reqs))
	}
	if r.Status == Pass {
		r.Detail = fmt.Sprintf("held on %d requests to %d %s at once", r.Calls, len(rules), plural(int64(len(rules)), "rule", "rules"))
	}
	return r, nil
}

// stackError makes r a failure for the script error ce that the last of reqs raised,
// with reqs shrunk against "raises the same error".
func (c *checker) stackError(r *Result, rules []stackRule, reqs []stackReq, ce *callError) {
	want := errorText(c.script, ce)
	raises := func(try []stackReq) (*callError, []stackOutcome) {
		out, _, err := c.runStack(rules, try)
		var ce *callError
		if errors.As(err, &ce) && errorText(c.script, ce) == want {
			return ce, out
		}
		return nil, nil
	}
	runs := shrinkRuns
	small := shrinkSlice(reqs, func(try []stackReq) bool {
		ce, _ := raises(try)
		return ce != nil
	}, &runs)
	ce, out := raises(small)
	if ce == nil {
		small = reqs
		ce, out = raises(small)
	}
	r.Status, r.Error = Fail, want
	if ce == nil {
		r.Detail = want + " (it does not repeat on a fresh host: the algorithm is not deterministic)"
		return
	}
	q := small[ce.step]
	r.Detail = fmt.Sprintf("%s, raised by a request (%s) at %s", want, stackReqText(rules, q), fmtExact(time.Duration(q.at)*time.Microsecond))
	r.Counterexample = stackCounterexample(rules, small[:ce.step], out, nil, len(reqs))
	r.Counterexample.Steps = append(r.Counterexample.Steps, CounterStep{At: time.Duration(q.at) * time.Microsecond,
		Request: stackReqText(rules, q), Result: "ERROR " + want, Mark: true})
}

// stackReqText is a policy request as a counterexample shows it: "per_ip[k0] cost 1,
// per_user[k1] cost 5".
func stackReqText(rules []stackRule, q stackReq) string {
	var req []string
	for i, sr := range rules {
		req = append(req, fmt.Sprintf("%s[k%d] cost %d", sr.name, q.keys[i], q.costs[i]))
	}
	return strings.Join(req, ", ")
}

func stackCounterexample(rules []stackRule, reqs []stackReq, out []stackOutcome, mark []int, original int) *Counterexample {
	ce := &Counterexample{Original: original, Unit: "requests"}
	for n, q := range reqs {
		var res []string
		for i, sr := range rules {
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
		ce.Steps = append(ce.Steps, CounterStep{At: time.Duration(q.at) * time.Microsecond, Request: stackReqText(rules, q),
			Result: verdict + ": " + strings.Join(res, ", "), Mark: slices.Contains(mark, n)})
	}
	return ce
}

// stackRace races N clients' whole requests at shared keys. At script granularity each
// request is one call; in cluster mode each rule is its own call, in rule order, and a
// request denied by a later rule refunds the earlier ones. Rounds run at instants that
// move across the first rule's windows; each round's calls are interleaved by a seeded
// random schedule (or an adversarial one: every client's first call before any second).
// A breach is shrunk call by call: fewer rounds, fewer clients, fewer scheduling steps,
// smaller costs.
func (c *checker) stackRace(p *dsl.Policy, rules []stackRule, cluster bool) (Result, error) {
	r := Result{Policy: p.Name, Property: PropRace, Statement: stmtRace}
	groups := 1
	if cluster {
		r.Property, r.Statement = PropRaceCluster, stmtRaceC
		groups = len(rules)
	}
	rng := c.rng(p.Name, r.Property)
	w := max(rules[0].sub.spec.window, 1)
	var rounds []stackRound
	var now int64
	lease := 0
	for budget := c.o.budget; budget > 0; {
		n := 2 + rng.IntN(c.o.clients-1)
		rd := stackRound{at: now}
		adversarial := rng.IntN(3) == 0
		// Each rule's key is shared by the round's clients, or one per client (the same
		// client's again in later rounds).
		perClient := make([]bool, len(rules))
		for i := range perClient {
			perClient[i] = rng.IntN(2) == 0
		}
		for i := range n {
			lease++
			q := stackReq{at: now, lease: lease}
			for k, sr := range rules {
				limit := max(sr.sub.spec.limit, 1)
				q.costs = append(q.costs, sr.sub.costAtMost(1+rng.Int64N(max(limit/int64(n), 1))))
				key := 0
				if perClient[k] {
					key = 1 + i
				}
				q.keys = append(q.keys, key)
			}
			rd.reqs = append(rd.reqs, q)
		}
		// A client makes at most 2·groups-1 calls: its checks, and refunds after a denial.
		for k := range 2 * groups * n {
			if adversarial {
				rd.schedule = append(rd.schedule, k%n)
			} else {
				rd.schedule = append(rd.schedule, rng.IntN(n))
			}
		}
		rounds = append(rounds, rd)
		budget -= n * len(rules)
		now += rng.Int64N(w/2 + 2)
	}
	run, err := c.runRace(rules, rounds, cluster)
	if err != nil {
		return r, err
	}
	r.Calls = run.calls
	original := 0
	for _, rd := range rounds {
		original += len(rd.reqs)
	}
	if run.failure != "" {
		want := run.failure
		small := shrinkStackRace(rounds, func(try []stackRound) bool {
			run, err := c.runRace(rules, try, cluster)
			return err == nil && run.failure == want
		})
		srun, err := c.runRace(rules, small, cluster)
		if err != nil {
			return r, err
		}
		if srun.failure != want {
			srun = run
		}
		last := srun.ops[len(srun.ops)-1]
		for i := range srun.ops {
			srun.ops[i].Mark = i == len(srun.ops)-1
		}
		r.Status, r.Error = Fail, want
		r.Detail = fmt.Sprintf("%s, raised by client %d's %s at %s", want, last.Client, last.Request, fmtExact(last.At))
		r.Counterexample = &Counterexample{Original: original, Unit: "requests", Steps: srun.ops}
		return r, nil
	}
	v := raceBreach(rules, rounds, run)
	if v == nil {
		r.Detail = fmt.Sprintf("held over %d rounds of up to %d clients, %d calls", len(rounds), c.o.clients, run.calls)
		return r, nil
	}
	small := shrinkStackRace(rounds, func(try []stackRound) bool {
		run, err := c.runRace(rules, try, cluster)
		return err == nil && run.failure == "" && raceBreach(rules, try, run) != nil
	})
	run, err = c.runRace(rules, small, cluster)
	if err != nil {
		return r, err
	}
	v = raceBreach(rules, small, run)
	r.Status, r.Detail = Fail, v.msg
	r.Counterexample = &Counterexample{Original: original, Unit: "requests", Steps: run.ops}
	return r, nil
}

// stackRound is concurrent clients at one instant: their requests, and the order in
// which they make their calls. Each schedule entry runs the next call of that client
// (0-based), or of the next client after it that has calls left; clients with calls left
// when the schedule ends make them in order.
type stackRound struct {
	at       int64
	reqs     []stackReq
	schedule []int
}

// keep returns the round with only the clients idx (increasing), its schedule
// renumbered.
func (rd stackRound) keep(idx []int) stackRound {
	out := stackRound{at: rd.at}
	renum := map[int]int{}
	for k, i := range idx {
		out.reqs = append(out.reqs, rd.reqs[i])
		renum[i] = k
	}
	for _, s := range rd.schedule {
		if k, ok := renum[s]; ok {
			out.schedule = append(out.schedule, k)
		}
	}
	return out
}

// merge returns the round with client k+1's request folded into client k's: one request
// with the sum of their costs.
func (rd stackRound) merge(k int) stackRound {
	out := stackRound{at: rd.at, reqs: slices.Clone(rd.reqs)}
	q := out.reqs[k]
	q.costs = slices.Clone(q.costs)
	for i, c := range out.reqs[k+1].costs {
		q.costs[i] += c
	}
	out.reqs[k] = q
	out.reqs = slices.Delete(out.reqs, k+1, k+2)
	for _, s := range rd.schedule {
		switch {
		case s == k+1:
		case s > k+1:
			out.schedule = append(out.schedule, s-1)
		default:
			out.schedule = append(out.schedule, s)
		}
	}
	return out
}

// shrinkStackRace shrinks a failing race: fewer rounds, then in each round fewer
// clients, clients merged into one request of their summed cost, fewer scheduling steps
// and costs of 1, again until none of them helps, then fewer rounds again.
func shrinkStackRace(rounds []stackRound, fails func([]stackRound) bool) []stackRound {
	runs := shrinkRuns
	rounds = shrinkSlice(rounds, fails, &runs)
	for r := range rounds {
		with := func(rd stackRound) []stackRound {
			try := slices.Clone(rounds)
			try[r] = rd
			return try
		}
		for size := -1; size != rounds[r].size() && runs > 0; {
			size = rounds[r].size()
			idx := make([]int, len(rounds[r].reqs))
			for i := range idx {
				idx[i] = i
			}
			idx = shrinkSlice(idx, func(keep []int) bool { return fails(with(rounds[r].keep(keep))) }, &runs)
			rounds[r] = rounds[r].keep(idx)
			for k := 0; k+1 < len(rounds[r].reqs) && runs > 0; {
				runs--
				if try := rounds[r].merge(k); fails(with(try)) {
					rounds[r] = try
				} else {
					k++
				}
			}
			rounds[r].schedule = shrinkSlice(rounds[r].schedule, func(s []int) bool {
				rd := rounds[r]
				rd.schedule = s
				return fails(with(rd))
			}, &runs)
			rounds[r].reqs = simplify(rounds[r].reqs, func(q stackReq) []stackReq {
				ones := slices.Clone(q.costs)
				for i := range ones {
					ones[i] = 1
				}
				if slices.Equal(ones, q.costs) {
					return nil
				}
				q.costs = ones
				return []stackReq{q}
			}, func(reqs []stackReq) bool {
				rd := rounds[r]
				rd.reqs = reqs
				return fails(with(rd))
			}, &runs)
		}
	}
	return shrinkSlice(rounds, fails, &runs)
}

// size is how much there is left to shrink in a round: requests, scheduling steps and
// costs.
func (rd stackRound) size() int {
	n := len(rd.reqs) + len(rd.schedule)
	for _, q := range rd.reqs {
		for _, c := range q.costs {
			n += int(c)
		}
	}
	return n
}

// stackRaceRun is what a race did: per round, per client, whether the whole request was
// allowed; and the calls in the order they ran, for a counterexample. A call that fails
// ends the race: failure is its error (ops ends with it, allowed without its round).
type stackRaceRun struct {
	allowed [][]bool
	ops     []CounterStep
	calls   int
	failure string
}

// runRace runs race rounds on a fresh host.
func (c *checker) runRace(rules []stackRule, rounds []stackRound, cluster bool) (*stackRaceRun, error) {
	g, err := c.rig()
	if err != nil {
		return nil, err
	}
	out := &stackRaceRun{}
	defer func() {
		out.calls = g.calls
		c.calls += g.calls
	}()
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
		pos := 0
		for {
			i := -1
			if pos < len(rd.schedule) {
				want := rd.schedule[pos]
				pos++
				for d := range n {
					if k := (want + d) % n; !done[k] {
						i = k
						break
					}
				}
			} else {
				i = slices.Index(done, false)
			}
			if i < 0 {
				break
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
			op := CounterStep{At: time.Duration(rd.at) * time.Microsecond, Client: i + 1, Request: fmt.Sprintf("%s (%s)", what, costText(rules, q, groups[gi]))}
			rep, err := g.do(rd.at, 0, &call)
			if err != nil {
				op.Result, op.Mark = "ERROR "+errorText(c.script, err), true
				out.ops = append(out.ops, op)
				out.failure = errorText(c.script, err)
				return out, nil
			}
			op.Result = "refunded"
			if call.Op == algorithms.OpCheck {
				if rep.Allowed {
					op.Result = "allowed"
					charged[i]++
					next[i]++
					if next[i] == len(groups) {
						done[i], allowed[i] = true, true
						op.Mark = len(groups) == 1
					}
				} else {
					op.Result = "denied"
					denied[i] = true
					for gi := range charged[i] {
						refunds[i] = append(refunds[i], gi)
					}
					done[i] = len(refunds[i]) == 0
				}
			}
			out.ops = append(out.ops, op)
		}
		if len(groups) > 1 {
			for i := range n {
				if allowed[i] {
					out.ops = append(out.ops, CounterStep{At: time.Duration(rd.at) * time.Microsecond, Client: i + 1, Request: "request", Result: "allowed", Mark: true})
				}
			}
		}
		out.allowed = append(out.allowed, allowed)
	}
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
		if sr.shadow || sr.sub.spec.shape == algorithms.ShapeNone {
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
			gs := byKey[key]
			if e := sr.sub.spec.worst(gs, sr.sub.spec.bound); e != nil {
				v := limitViolation(sr.sub.spec, gs, e, Fail)
				v.msg = fmt.Sprintf("rule %q key k%d: %s", sr.name, key, v.msg)
				return v
			}
		}
	}
	return nil
}
