package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/calendar"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
)

// Status is a property's verdict.
type Status int

const (
	// Pass: the property held on every generated trace.
	Pass Status = iota
	// Skip: the property does not apply (a plugin with no limit statement, parameters no
	// request gives).
	Skip
	// Note: a finding that is expected and explains the design, such as the race found when
	// an algorithm's commands run without the script's atomicity, or traffic within a
	// declared bound that the rule accepts (accept_bound = true).
	Note
	// Warn: the exact statement fails within the algorithm's documented bound, such as
	// fixed_window's boundary burst, and the rule does not accept that bound.
	Warn
	// Fail: the property is broken.
	Fail
)

func (s Status) String() string {
	return [...]string{"pass", "skip", "note", "WARN", "FAIL"}[s]
}

// MarshalText implements encoding.TextMarshaler.
func (s Status) MarshalText() ([]byte, error) { return []byte(strings.ToLower(s.String())), nil }

// Result is one property of one rule (or of a whole policy, when Rule is "").
type Result struct {
	Policy    string `json:"policy"`
	Rule      string `json:"rule,omitempty"`
	Algorithm string `json:"algorithm,omitempty"`
	Params    string `json:"params,omitempty"` // the parameter values checked, by name
	// Limit is the rule's limit for those values in words, as algorithms'
	// Algorithm.Describe gives it: "20 per 10m", "20/h, burst 5", "3 in flight, ttl 30s".
	Limit     string `json:"limit,omitempty"`
	Property  string `json:"property"`
	Status    Status `json:"status"`
	Statement string `json:"statement"` // what was checked
	Detail    string `json:"detail"`    // what was found
	Calls     int    `json:"calls"`     // script calls made
	// Error is the script error a request raised, at the plugin's (or algorithm's) own
	// file and line ("careless_window.lua:17: cannot perform sub operation between number
	// and nil"), when that is the finding; the counterexample's marked step is the request
	// that raised it.
	Error string `json:"error,omitempty"`
	// Counterexample is a shrunk trace that breaks the property (Fail, Warn, Note).
	Counterexample *Counterexample `json:"counterexample,omitempty"`
}

// Counterexample is a shrunk trace: replaying its steps in order on a fresh host breaks
// the property again. Times are offsets from midnight UTC (Epoch), so window boundaries
// fall on round offsets.
type Counterexample struct {
	// Original is the size of the trace before shrinking, in Unit: "requests" (a trace, or
	// a race of whole requests) or "clients" (a race of commands).
	Original int           `json:"original"`
	Unit     string        `json:"unit"`
	Steps    []CounterStep `json:"steps"`
}

// CounterStep is one step of a counterexample.
type CounterStep struct {
	At      time.Duration `json:"at_ns"`
	Client  int           `json:"client,omitempty"` // which client, in race traces (1-based)
	Request string        `json:"request"`          // "cost 5", "release lease-3", "ZCOUNT", …
	// Result is what the step got: "allowed, remaining 3, …", "denied, …", or "ERROR "
	// and the script error it raised (Result.Error).
	Result string `json:"result"`
	Mark   bool   `json:"mark,omitempty"` // part of the breach, or the step that raised the error
}

// Schema is the version of the JSON form of Findings (Findings.JSON): it changes when a
// field is removed or changes meaning, not when one is added.
const Schema = 1

// Findings are the results of Check.
type Findings struct {
	Schema  int      `json:"schema"` // Schema
	Seed    int64    `json:"seed"`
	Budget  int      `json:"budget"`
	Calls   int      `json:"calls"` // engine-script calls made in all
	Results []Result `json:"results"`
	// Error says why verify could not check the configuration at all (Check returned an
	// error); Results is then empty. A script error a request raises is a finding instead.
	Error string `json:"error,omitempty"`
}

// Count returns how many results have status st.
func (f *Findings) Count(st Status) int {
	n := 0
	for _, r := range f.Results {
		if r.Status == st {
			n++
		}
	}
	return n
}

// DefaultBudget is the number of requests Check generates per rule for the single-rule
// properties, and again for its races.
const DefaultBudget = 3000

// DefaultSeed is the seed of the traffic Check generates unless WithSeed sets another.
const DefaultSeed = 1

// DefaultClients is the most clients of a race unless WithClients sets another.
const DefaultClients = 6

// WithBudget sets how many requests Check generates per rule (default DefaultBudget).
func WithBudget(n int) Option { return func(o *options) { o.budget = n } }

// WithDuration sets the virtual time each generated trace covers (default: eight of the
// rule's windows, refill times or lease TTLs).
func WithDuration(d time.Duration) Option { return func(o *options) { o.duration = d } }

// WithClients sets the most clients of a race (default DefaultClients).
func WithClients(n int) Option { return func(o *options) { o.clients = n } }

// maxSteps is the length of one generated trace; with WithDuration, traces run for the
// duration, up to maxLongSteps.
const (
	maxSteps     = 120
	maxLongSteps = 1000
)

// steps is the most steps the next trace may take with left of the budget.
func (c *checker) steps(left int) int {
	if c.o.duration > 0 {
		return min(maxLongSteps, left)
	}
	return min(maxSteps, left)
}

// Check proves the properties of every rule of every policy in cfg on adversarial
// traffic, running the engine script cfg compiles to on luahost under a virtual clock.
//
// For each rule, and for each distinct set of parameter values its expressions give to
// the requests of cfg's scenarios (or to an empty request), it generates traces of
// requests to one key (see genRule) and checks: limit (the algorithm's declared
// guarantee, see spec), retry-after, remaining, reset-after, atomicity of single
// requests, expiry and determinism, and for a client-clock policy the limit against
// skewed clocks; and it runs
// the rule's algorithm with its commands interleaved across concurrent clients (race at
// redis.call granularity). For each policy it checks the atomicity of the stack and
// races of whole requests at script granularity, and, when the policy has several rules
// and no shard, the cluster path that runs one call per rule and refunds on a later
// denial. Every failure comes with a shrunk counterexample. The same cfg, seed and budget
// give the same findings.
func Check(cfg *dsl.Config, opts ...Option) (*Findings, error) {
	o := options{seed: DefaultSeed, budget: DefaultBudget, clients: DefaultClients}
	for _, f := range opts {
		f(&o)
	}
	c, err := newChecker(cfg, o)
	if err != nil {
		return nil, err
	}
	f := &Findings{Schema: Schema, Seed: o.seed, Budget: o.budget, Results: []Result{}}
	groups := c.checks(cfg)
	f.Calls = c.runTasks(groups)
	for _, gr := range groups {
		f.Results = append(f.Results, gr.results()...)
	}
	return f, nil
}

// checks lists the checks of cfg in the order their results are reported: per policy,
// per rule and parameter set, the rule's checks, then the policy's own.
func (c *checker) checks(cfg *dsl.Config) []*group {
	// A rule or policy verify cannot check is a failure of its own, and the rest goes on.
	stopped := func(p *dsl.Policy, rule, alg string) func(error) Result {
		return func(err error) Result {
			return Result{Policy: p.Name, Rule: rule, Algorithm: alg, Property: "*", Status: Fail,
				Detail: "verify could not check it: " + errorText(c.script, err)}
		}
	}
	var groups []*group
	for _, p := range cfg.Policies {
		var stack []stackRule
		for _, ru := range p.Rules {
			sets, err := paramSets(cfg, p, ru)
			if len(sets) == 0 {
				groups = append(groups, &group{fixed: []Result{{Policy: p.Name, Rule: ru.Name, Algorithm: ru.Algorithm.Name, Property: "*", Status: Skip,
					Detail: fmt.Sprintf("no parameter values to check: %v. Add a scenario whose traffic this rule applies to.", err)}}})
				continue
			}
			for i, w := range sets {
				if i == 0 {
					// The policy's checks get a subject of their own: a rule's checks
					// keep what they learn (what an empty key reports) in theirs.
					stack = append(stack, stackRule{sub: c.subject(p, ru, w, i), shadow: ru.Shadow, name: ru.Name, compiled: c.plan.Compiled(ru)})
				}
				gr := c.ruleGroup(p, ru, w, i)
				gr.stopped = stopped(p, ru.Name, ru.Algorithm.Name)
				limit := ru.Describe(w)
				gr.finish = func(res []Result) {
					for k := range res {
						res[k].Limit = limit
						if ru.AcceptBound && res[k].Status == Warn {
							// The rule accepts its algorithm's declared bound: within it is
							// expected, not a warning (beyond it is a failure either way).
							res[k].Status, res[k].Detail = Note, "accepted: "+res[k].Detail
						}
					}
				}
				groups = append(groups, gr)
			}
		}
		if len(stack) > 0 {
			gr := c.policyGroup(p, stack)
			gr.stopped = stopped(p, "", "")
			groups = append(groups, gr)
		}
	}
	return groups
}

// ruleGroup returns the checks of rule ru of policy p with wire parameters w, the i-th
// set checked: its traces (errors to determinism), its client clocks, and its race of
// commands, which tells an error no single request raises from one they do by the
// traces' errors. Each check has a subject of its own.
func (c *checker) ruleGroup(p *dsl.Policy, ru *dsl.Rule, w []int64, i int) *group {
	gr := &group{}
	params := describeParams(ru.Algorithm, w)
	traces := &task{done: make(chan struct{})}
	erred := false
	traces.do = func(c *checker) ([]Result, error) {
		res, e, err := c.rule(p, ru, c.subject(p, ru, w, i), params)
		erred = e
		return res, err
	}
	gr.tasks = append(gr.tasks, traces)
	if p.Clock == dsl.ClockClient {
		sub := c.subject(p, ru, w, i)
		gr.tasks = append(gr.tasks, &task{do: func(c *checker) ([]Result, error) {
			r, err := c.clientClocks(p, ru, sub, params)
			return []Result{r}, err
		}})
	}
	if ru.Box.For > 0 {
		gr.tasks = append(gr.tasks, &task{do: func(c *checker) ([]Result, error) {
			r, err := c.penaltyBox(p, ru, w, i, params)
			return []Result{r}, err
		}})
	}
	if ru.Overridable {
		gr.tasks = append(gr.tasks, &task{do: func(c *checker) ([]Result, error) {
			r, err := c.override(p, ru, w, i, params)
			return []Result{r}, err
		}})
	}
	if ru.Lists.Any() {
		gr.tasks = append(gr.tasks, &task{do: func(c *checker) ([]Result, error) {
			r, err := c.lists(p, ru, w, i, params)
			return []Result{r}, err
		}})
	}
	if ru.Calendar != nil {
		gr.tasks = append(gr.tasks, &task{do: func(c *checker) ([]Result, error) {
			r, err := c.calendarProp(p, ru, w, i, params)
			return []Result{r}, err
		}})
	}
	if ru.LeaseSize > 0 {
		gr.tasks = append(gr.tasks, &task{do: func(c *checker) ([]Result, error) {
			r, err := c.leaseProp(p, ru, w, params)
			return []Result{r}, err
		}})
	}
	if waits(ru) {
		gr.tasks = append(gr.tasks, &task{do: func(c *checker) ([]Result, error) {
			r, err := c.delayProp(p, ru, w, i, params)
			return []Result{r}, err
		}})
	}
	if settles(ru) {
		gr.tasks = append(gr.tasks, &task{do: func(c *checker) ([]Result, error) {
			r, err := c.settleProp(p, ru, w, i, params)
			return []Result{r}, err
		}})
	}
	sub := c.subject(p, ru, w, i)
	// The race waits for the traces only when an interleaving raised an error. The
	// traces are listed first, so a worker has taken them: the wait ends.
	gr.tasks = append(gr.tasks, &task{do: func(c *checker) ([]Result, error) {
		r, err := c.commandRace(p, ru, sub, params, func() bool { <-traces.done; return erred })
		return []Result{r}, err
	}})
	return gr
}

// policyGroup returns the whole-policy checks of p on its rules' stack: atomicity, race,
// and for a policy of several rules without a shard, race (cluster).
func (c *checker) policyGroup(p *dsl.Policy, stack []stackRule) *group {
	gr := &group{tasks: []*task{
		{do: func(c *checker) ([]Result, error) {
			r, err := c.stackAtomicity(p, stack)
			return []Result{r}, err
		}},
		{do: func(c *checker) ([]Result, error) {
			r, err := c.stackRace(p, stack, false)
			return []Result{r}, err
		}},
	}}
	if p.Shard == nil && len(stack) > 1 {
		gr.tasks = append(gr.tasks, &task{do: func(c *checker) ([]Result, error) {
			r, err := c.stackRace(p, stack, true)
			return []Result{r}, err
		}})
	}
	return gr
}

// checker holds what the checks of one Check share (read only: o, plan, script, cfg) and
// what one worker's check has of its own (calls, g, harness).
type checker struct {
	o       options
	calls   int  // script calls made, for Findings.Calls
	g       *rig // the host traces run on, reused
	plan    *engine.Plan
	script  *algorithms.Script
	harness *harness // the race harness's host, reused
	cfg     *dsl.Config
	// tick, when set, is called after every script call (see progress).
	tick func()
	// keysOnly: what a host carries from one script to the next is its keys alone,
	// because the script cannot read math.random's state (its source never names it).
	keysOnly bool
}

// rig returns the checker's host, emptied.
func (c *checker) rig() (*rig, error) {
	if c.g == nil {
		g, err := newRig(c.script)
		if err != nil {
			return nil, err
		}
		g.tick = c.tick
		g.calendars = c.calendars()
		c.g = g
	}
	return c.g, c.g.reset()
}

// calendars returns the calendar of each compiled calendar rule of the plan.
func (c *checker) calendars() map[*algorithms.Compiled]*calendar.Period {
	m := map[*algorithms.Compiled]*calendar.Period{}
	for _, p := range c.cfg.Policies {
		for _, ru := range p.Rules {
			if cr := c.plan.Compiled(ru); cr != nil && ru.Calendar != nil {
				m[cr] = ru.Calendar
			}
		}
	}
	return m
}

// subject returns the subject of rule ru of policy p with wire parameters w, the i-th set
// checked. Its calls name the rule compiled into the plan's script, as the engine's do,
// so verify runs what production runs. A shadow rule's own properties are checked as if
// it enforced, so its calls write it out, unshadowed.
func (c *checker) subject(p *dsl.Policy, ru *dsl.Rule, w []int64, i int) *subject {
	key := fmt.Sprintf("rl:verify:%s:%s:%d", p.Name, ru.Name, i)
	if ru.HasFurtherKeys() {
		// Its further keys (a box's, an override, list members) share its slot, as the
		// engine renders such a rule's key.
		key = fmt.Sprintf("rl:verify:{%s:%s:%d}", p.Name, ru.Name, i)
	}
	sub := newSubject(ru.Algorithm, w, key)
	sub.slack = p.ClockSkew
	// A boxed rule's own properties are its algorithm's, checked without the box, whose
	// property (penaltyBox) runs the compiled rule.
	if !ru.Shadow && ru.Box.For == 0 {
		sub.compiled = c.plan.Compiled(ru)
	}
	return sub
}

func newChecker(cfg *dsl.Config, o options) (*checker, error) {
	o.budget = max(o.budget, 1)
	o.clients = max(o.clients, 2)
	plan, err := engine.Compile(cfg)
	if err != nil {
		return nil, err
	}
	c := &checker{o: o, plan: plan, script: locatedScript(plan.Script(), cfg), cfg: cfg}
	c.keysOnly = !strings.Contains(c.script.Source, "random")
	// The race harness is built on the engine script's layout: fail now, not in every rule.
	if c.harness, err = newHarness(c.script); err != nil {
		return nil, err
	}
	return c, nil
}

// maxParamSets bounds the parameter sets checked per rule.
const maxParamSets = 3

// paramSets returns the distinct wire parameters rule ru takes for the requests of cfg's
// scenarios of policy p (a few clients of each traffic block) and for an empty request,
// in that order; err says why there are none.
func paramSets(cfg *dsl.Config, p *dsl.Policy, ru *dsl.Rule) ([][]int64, error) {
	var reqs []dsl.Request
	for _, s := range cfg.Scenarios {
		if s.Policy != p.Name {
			continue
		}
		for _, t := range s.Traffic {
			for c := range min(t.Clients, 4) {
				if m, err := t.Render(c); err == nil {
					reqs = append(reqs, engine.Attrs(m))
				}
			}
		}
	}
	reqs = append(reqs, engine.Attrs{})
	var sets [][]int64
	var lastErr error
	for _, r := range reqs {
		w, err := ru.Wire(r)
		if err != nil {
			lastErr = err
			continue
		}
		if !slices.ContainsFunc(sets, func(s []int64) bool { return slices.Equal(s, w) }) {
			sets = append(sets, slices.Clone(w))
		}
		if len(sets) == maxParamSets {
			break
		}
	}
	return sets, lastErr
}

// rng returns the random stream of one check, from the seed and what it checks.
func (c *checker) rng(parts ...string) *rand.Rand {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return rand.New(rand.NewPCG(uint64(c.o.seed), h.Sum64()))
}

// span is the virtual time a trace of sub covers.
func (c *checker) span(sub *subject) int64 {
	if c.o.duration > 0 {
		return c.o.duration.Microseconds()
	}
	return 8 * slices.Max(sub.spec.scales())
}

// ruleFinding accumulates one property's verdict over a rule's traces.
type ruleFinding struct {
	prop, stmt string
	v          *violation
	steps      []step // the trace that shows v
	ce         *Counterexample
}

// rule checks the single-rule properties of sub (params: its parameters in words) on
// generated traces, up to determinism, and reports whether a trace ended in a script
// error. A request that makes the script fail ends its trace: the errors property reports
// it, and the other properties are checked on the requests before it.
func (c *checker) rule(p *dsl.Policy, ru *dsl.Rule, sub *subject, params string) (_ []Result, erred bool, _ error) {
	rng := c.rng(p.Name, ru.Name, params)
	props := []*ruleFinding{
		{prop: PropLimit, stmt: sub.spec.statement()},
		{prop: PropRetryAfter, stmt: stmtRetry},
		{prop: PropDenials, stmt: stmtDenial},
		{prop: PropRemaining, stmt: stmtRemain},
		{prop: PropPartial, stmt: stmtPart},
		{prop: PropResetAfter, stmt: stmtReset},
		{prop: PropAtomicity, stmt: stmtAtom1},
		{prop: PropExpiry, stmt: stmtExp},
	}
	checks := []func(g *rig, steps []step, res []result) *violation{
		func(_ *rig, steps []step, res []result) *violation { return checkLimit(sub, steps, res) },
		func(_ *rig, steps []step, res []result) *violation { return checkRetry(sub, steps, res) },
		func(_ *rig, steps []step, res []result) *violation { return checkDenial(sub, steps, res) },
		func(_ *rig, steps []step, res []result) *violation { return checkRemaining(sub, steps, res) },
		func(_ *rig, steps []step, res []result) *violation { return checkPartial(sub, steps, res) },
		func(_ *rig, steps []step, res []result) *violation { return checkReset(sub, steps, res) },
		func(g *rig, steps []step, res []result) *violation { return checkAtomic1(sub, g, steps, res) },
		func(g *rig, steps []step, res []result) *violation { return checkExpiry(sub, g, steps, res) },
	}
	calls, traces := 0, 0
	var first []step
	var fe errorFinding
	for calls < c.o.budget {
		g, err := c.rig()
		if err != nil {
			return nil, false, err
		}
		steps, res, err := genRule(rng, sub, g, c.span(sub), c.steps(c.o.budget-calls), nil)
		calls += g.calls
		c.calls += g.calls + g.probeCalls
		traces++
		var ce *callError
		if errors.As(err, &ce) {
			fe.add(steps, ce)
			// Check the rest on the requests before the error, run again without it: the
			// failed call may have written part of its state.
			steps = steps[:ce.step]
			if res, g, err = sub.run(g, steps); err != nil {
				return nil, false, err
			}
			c.calls += g.calls + g.probeCalls
		} else if err != nil {
			return nil, false, err
		}
		if first == nil {
			first = steps
		}
		for k, pf := range props {
			// Once a property fails, a later trace replaces the failure only when it
			// shows it with fewer requests in the breach (a simpler story to shrink);
			// atomicity, which runs traces again, stops looking.
			if pf.v != nil && pf.v.status == Fail && pf.prop == PropAtomicity {
				continue
			}
			if v := checks[k](g, steps, res); v != nil && (worse(v, pf.v) || simpler(v, pf.v)) {
				pf.v, pf.steps = v, steps
			}
		}
	}
	// Shrink each property's worst trace against "breaks it at least as badly".
	for k, pf := range props {
		if pf.v == nil {
			continue
		}
		var err error
		if pf.v, pf.ce, err = c.shrink(sub, pf.steps, pf.v, checks[k]); err != nil {
			return nil, false, err
		}
	}
	out := []Result{c.ruleErrors(p, ru, sub, params, &fe, traces, calls)}
	for _, pf := range props {
		r := Result{Policy: p.Name, Rule: ru.Name, Algorithm: sub.alg.Name, Params: params, Property: pf.prop, Statement: pf.stmt, Calls: calls}
		switch {
		case pf.prop == PropLimit && sub.spec.shape == algorithms.ShapeNone:
			r.Status = Skip
			r.Detail = sub.spec.noLimit()
		case pf.v == nil:
			r.Status = Pass
			r.Detail = fmt.Sprintf("held on %d traces, %d requests", traces, calls)
		default:
			r.Status = pf.v.status
			r.Detail = pf.v.msg
			r.Counterexample = pf.ce
		}
		if r.Status == Pass && fe.traces > 0 {
			r.Detail += ", up to each error"
		}
		out = append(out, r)
	}
	return append(out, c.determinism(p, ru, sub, params, first)), fe.traces > 0, nil
}

// shrink shrinks steps, whose trace breaks a property as v says, against "still fails"
// (a warning: "breaks it at least as badly") by check, and returns the breach of the shrunk trace with its
// counterexample. When the shrunk trace does not break it again, the counterexample is
// the whole trace; when that does not either, v comes back saying so, without one.
func (c *checker) shrink(sub *subject, steps []step, v *violation, check func(*rig, []step, []result) *violation) (*violation, *Counterexample, error) {
	small := shrinkSteps(steps, func(try []step) bool {
		res, g, err := sub.run(c.g, try)
		if err != nil {
			return false
		}
		c.calls += g.calls + g.probeCalls
		w := check(g, try, res)
		// A failure shrinks to the smallest trace that still fails: the shortest
		// story, though a longer trace may break the limit further. A warning keeps
		// its worst, the figure the design allows.
		if v.status == Fail {
			return w != nil && w.status == Fail
		}
		return w != nil && !worse(v, w)
	})
	rerun := func(steps []step) (*violation, []result, error) {
		res, g, err := sub.run(c.g, steps)
		if err != nil {
			return nil, nil, err
		}
		c.calls += g.calls + g.probeCalls
		return check(g, steps, res), res, nil
	}
	w, res, err := rerun(small)
	if err == nil && w == nil { // the shrunk trace does not repeat it: show the original
		small = steps
		w, res, err = rerun(small)
	}
	switch {
	case err != nil:
		return nil, nil, err
	case w == nil:
		// Not even the original repeats: a script that answers differently to the same
		// trace (math.random) is reported as found, without a trace to replay.
		nd := *v
		nd.msg += " (it does not repeat when the trace runs again: the algorithm is not deterministic)"
		return &nd, nil, nil
	}
	return w, sub.counterexample(small, res, w.mark, len(steps)), nil
}

// errorFinding collects the traces of a rule that ended in a script error.
type errorFinding struct {
	traces int
	steps  []step // the first such trace, up to the failing step
	err    *callError
}

func (fe *errorFinding) add(steps []step, ce *callError) {
	fe.traces++
	if fe.steps == nil {
		fe.steps, fe.err = steps[:ce.step+1], ce
	}
}

// ruleErrors is the errors property of a rule: the first trace that ended in a script
// error, shrunk against "raises the same error".
func (c *checker) ruleErrors(p *dsl.Policy, ru *dsl.Rule, sub *subject, params string, fe *errorFinding, traces, calls int) Result {
	r := Result{Policy: p.Name, Rule: ru.Name, Algorithm: sub.alg.Name, Params: params, Property: PropErrors, Statement: stmtErrors, Calls: calls}
	if fe.err == nil {
		r.Status = Pass
		r.Detail = fmt.Sprintf("held on %d traces, %d requests", traces, calls)
		return r
	}
	want := errorText(c.script, fe.err)
	raises := func(try []step) (*callError, []result) {
		res, g, err := sub.run(c.g, try)
		if g != nil {
			c.calls += g.calls + g.probeCalls
		}
		var ce *callError
		if errors.As(err, &ce) && errorText(c.script, ce) == want {
			return ce, res
		}
		return nil, nil
	}
	small := shrinkSteps(fe.steps, func(try []step) bool {
		ce, _ := raises(try)
		return ce != nil
	})
	ce, res := raises(small)
	if ce == nil { // the shrunk trace does not repeat the error: show the original
		small = fe.steps
		ce, res = raises(small)
	}
	r.Status, r.Error = Fail, want
	if ce == nil {
		r.Detail = fmt.Sprintf("%s, in %d of %d traces (it does not repeat on a fresh host: the algorithm is not deterministic)", want, fe.traces, traces)
		return r
	}
	small = small[:ce.step+1]
	r.Counterexample = sub.counterexample(small[:ce.step], res, nil, len(fe.steps))
	r.Counterexample.Steps = append(r.Counterexample.Steps, sub.errorStep(small[ce.step], want))
	r.Detail = fmt.Sprintf("%s, raised by %s, in %d of %d traces", want, sub.request(small[ce.step]), fe.traces, traces)
	return r
}

// simpler reports whether v and w both fail and v marks fewer steps than w.
func simpler(v, w *violation) bool {
	return w != nil && v.status == Fail && w.status == Fail && len(v.mark) < len(w.mark)
}

// worse reports whether v is a worse breach than w (nil: none): a higher status, or the
// same status with a larger score, or the same score over a shorter span.
func worse(v, w *violation) bool {
	if w == nil {
		return true
	}
	if v.status != w.status {
		return v.status > w.status
	}
	if v.score != w.score {
		return v.score > w.score
	}
	return v.span < w.span
}

// determinism reruns a trace on two fresh hosts and compares everything.
func (c *checker) determinism(p *dsl.Policy, ru *dsl.Rule, sub *subject, params string, steps []step) Result {
	r := Result{Policy: p.Name, Rule: ru.Name, Algorithm: sub.alg.Name, Params: params, Property: PropDeterminism, Statement: stmtDet, Calls: 2 * len(steps)}
	run := func() ([]result, error) {
		// A host emptied of its keys is a fresh host unless the script can read
		// math.random's state, which hosts carry from one script to the next.
		g, err := c.rig()
		if !c.keysOnly {
			g, err = newRig(c.script)
		}
		if err != nil {
			return nil, err
		}
		g.tick = c.tick
		res, _, err := sub.run(g, steps)
		c.calls += g.calls + g.probeCalls
		return res, err
	}
	a, errA := run()
	b, errB := run()
	switch {
	case errA != nil || errB != nil:
		r.Status, r.Detail = Fail, fmt.Sprintf("a run failed: %v %v", errA, errB)
	default:
		if i := sameResults(a, b); i >= 0 {
			r.Status = Fail
			r.Detail = fmt.Sprintf("step %d differs between two runs: %+v then %+v", i+1, a[i], b[i])
			r.Counterexample = sub.counterexample(steps[:i+1], a[:i+1], []int{i}, len(steps))
		} else {
			r.Detail = fmt.Sprintf("%d %s, identical replies and state", len(steps), plural(int64(len(steps)), "request", "requests"))
		}
	}
	return r
}

// counterexample renders a single-rule trace.
func (s *subject) counterexample(steps []step, res []result, mark []int, original int) *Counterexample {
	ce := &Counterexample{Original: original, Unit: "requests"}
	for i, st := range steps {
		cs := CounterStep{At: time.Duration(st.at) * time.Microsecond, Mark: slices.Contains(mark, i), Request: s.stepText(st)}
		if st.release {
			cs.Result = "released"
		} else {
			cs.Result = resultText(res[i].allowed, res[i].rr)
		}
		ce.Steps = append(ce.Steps, cs)
	}
	return ce
}

// stepText is a step as a counterexample shows it: "cost 5", "cost 1 lease-3",
// "release lease-3".
func (s *subject) stepText(st step) string {
	if st.release {
		return "release " + leaseID(st.lease)
	}
	text := fmt.Sprintf("cost %d", st.cost)
	if s.lease >= 0 {
		text += " " + leaseID(st.lease)
	}
	if st.skew != 0 {
		text += fmt.Sprintf(" (client clock %s%s)", map[bool]string{true: "+", false: "-"}[st.skew > 0], fmtUS(max(st.skew, -st.skew)))
	}
	return text
}

// request names a step in a sentence: "a request of cost 0 at +1m0.5s".
func (s *subject) request(st step) string {
	what := "a request of " + s.stepText(st)
	if st.release {
		what = "the " + s.stepText(st)
	}
	return what + " at " + fmtExact(time.Duration(st.at)*time.Microsecond)
}

// errorStep is the counterexample step of a request that raised msg.
func (s *subject) errorStep(st step, msg string) CounterStep {
	return CounterStep{At: time.Duration(st.at) * time.Microsecond, Request: s.stepText(st), Result: "ERROR " + msg, Mark: true}
}

func resultText(allowed bool, rr algorithms.RuleResult) string {
	if allowed {
		return fmt.Sprintf("allowed, remaining %d, reset-after %s", rr.Remaining, fmtUS(rr.ResetAfter))
	}
	return fmt.Sprintf("denied, retry-after %s, remaining %d", retryText(rr.RetryAfter), rr.Remaining)
}

// JSON returns the findings as indented JSON.
func (f *Findings) JSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(f)
	return b.Bytes(), err
}
