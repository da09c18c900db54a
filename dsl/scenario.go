package dsl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/rlctl/rlctl/algorithms"
)

var scenarioSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "policy"},
		{Name: "duration"},
		{Name: "seed"},
		{Name: "start_time"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "traffic", LabelNames: []string{"name"}},
		{Type: "fault"},
		{Type: "engine"},
		{Type: "expect"},
		{Type: "override"},
		{Type: "list"},
	},
}

var trafficSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "request"},
		{Name: "clients"},
		{Name: "rate"},
		{Name: "pattern"},
		{Name: "burst"},
		{Name: "start"},
		{Name: "stop"},
		{Name: "hold"},
		{Name: "units"},
		{Name: "at_most"},
		{Name: "max_delay"},
		{Name: "actual"},
	},
}

// maxActual bounds the true costs a traffic's actual lists.
const maxActual = 1024

// maxClients bounds Traffic.Clients: the simulator keeps state per client.
const maxClients = 1_000_000

var patterns = []string{PatternConstant, PatternPoisson, PatternBurst, PatternRamp, PatternEdge}

// Outcome is what a scenario run measured, per traffic source. The simulator implements
// it so that Expect.Check can evaluate expectations.
type Outcome interface {
	// Requests is the number of requests traffic sent.
	Requests(traffic string) int64
	// Allowed is the number of traffic's requests that were allowed.
	Allowed(traffic string) int64
	// DeniedBy is the number of traffic's requests denied with rule as the deciding rule.
	DeniedBy(traffic, rule string) int64
	// Granted is the units traffic's allowed requests were granted: Traffic.Units each,
	// or with Traffic.AtMost what each was granted.
	Granted(traffic string) int64
	// MaxAllowedIn is the largest number of traffic's requests allowed within any
	// interval of length span.
	MaxAllowedIn(traffic string, span time.Duration) int64
	// DuringFault is the number of traffic's requests sent while a fault was in force
	// (within [At, At+For) of one: a flush has no such time), and how many of those were
	// allowed.
	DuringFault(traffic string) (requests, allowed int64)
	// Waited is the number of traffic's requests that waited for their turn (max_delay),
	// and MaxWait the longest wait.
	Waited(traffic string) int64
	MaxWait(traffic string) time.Duration
	// Settled is the true cost traffic's settled requests (actual) came to, and Owed how
	// much of it was over their estimates: charged as a debt.
	Settled(traffic string) int64
	Owed(traffic string) int64
	// DecidedBy is the number of traffic's requests decided by how: one of Deciders.
	DecidedBy(traffic, how string) int64
	// TimedOut is the number of traffic's requests whose Redis call outlasted the engine's
	// deadline.
	TimedOut(traffic string) int64
	// BreakerOpen is the number of traffic's requests the open circuit breaker kept from
	// Redis.
	BreakerOpen(traffic string) int64
	// Recovery is how long after a fault ended traffic's requests were still decided
	// without Redis (the latest such request, before the next fault), the longest over
	// the faults; 0 when none was.
	Recovery(traffic string) time.Duration
	// PhantomCharges is the number of calls Redis ran after their caller had stopped
	// waiting (a stall's queue) that charged a limit all the same.
	PhantomCharges() int64
}

// Deciders name how a request was decided, for Outcome.DecidedBy and decided_by.
var Deciders = []string{
	"redis",     // the script on Redis
	"local",     // the script on the in-process fallback (on_error = "local")
	"fail_open", // allowed without a check (on_error = "allow")
	"fail_deny", // denied without a check (on_error = "deny")
	"cache",     // denied by the engine's deny cache
}

// Check evaluates the expectation against what a run measured.
func (x *Expect) Check(o Outcome) (bool, error) {
	ctx := &hcl.EvalContext{
		Variables: x.vars,
		Functions: scenarioFunctions(x.scenario, x.rules, o),
	}
	v, diags := x.Expr.Value(ctx)
	if diags.HasErrors() {
		return false, diags
	}
	return asBool(v)
}

func (l *loader) decodeScenario(b *hcl.Block) {
	if len(b.Labels) == 0 || len(b.LabelRanges) == 0 {
		return // HCL reported the missing label
	}
	okName := l.checkName(b, "scenario")
	s := &Scenario{Name: b.Labels[0], Seed: 1, DeclRange: b.DefRange}
	for _, prev := range l.cfg.Scenarios {
		if prev.Name == s.Name {
			l.add(errorf(b.LabelRanges[0], "Duplicate scenario", "A scenario named %q is already defined at %s.", s.Name, where(prev.DeclRange)))
			okName = false
		}
	}
	content, d := b.Body.Content(scenarioSchema)
	l.add(d...)
	var policy *Policy
	if a := content.Attributes["policy"]; a != nil {
		if name, ok := l.constString(a); ok {
			s.Policy = name
			policy = l.policies[name]
			if policy == nil {
				l.add(errorf(a.Expr.Range(), "Unknown policy", "There is no policy named %q.%s The policies are %s.", name, suggestion(name, sortedKeys(l.policies)), quoteList(sortedKeys(l.policies))))
			}
		}
	} else {
		l.add(errorf(b.DefRange, "Missing policy", "Scenario %q needs the policy it exercises: policy = \"<name>\".", s.Name))
	}
	if a := content.Attributes["duration"]; a != nil {
		if us, ok := l.duration(a, false); ok {
			s.Duration = time.Duration(us) * time.Microsecond
		}
	} else {
		l.add(errorf(b.DefRange, "Missing duration", "Scenario %q needs the virtual time it runs for, such as duration = \"5m\".", s.Name))
	}
	if a := content.Attributes["start_time"]; a != nil {
		if v, ok := l.constString(a); ok {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				l.add(errorf(a.Expr.Range(), "Invalid start_time", "start_time is the instant the scenario's virtual time 0 stands for, in RFC 3339 with its offset, such as \"2027-03-13T00:00:00-05:00\" or \"2027-03-31T22:00:00Z\"; %q is not one (%v).", v, err))
			} else if t.Year() < 1970 || t.Year() > 2200 {
				l.add(errorf(a.Expr.Range(), "Invalid start_time", "start_time %s is outside the years 1970 to 2200 the simulator's clock keeps.", v))
			} else {
				s.StartTime = t
			}
		}
	}
	if a := content.Attributes["seed"]; a != nil {
		e, d := l.env.compile(a.Expr, constScope, cty.Number)
		l.add(d...)
		if e != nil && e.kind == kindConst && !e.val.IsNull() {
			n, err := asInt(e.val)
			if err == nil && n < 0 {
				err = fmt.Errorf("%d is negative", n)
			}
			if err != nil {
				l.add(errorf(a.Expr.Range(), "Invalid seed", "The seed must be a whole number, 0 or more: %s.", err))
			} else {
				s.Seed = n
			}
		}
	}
	for _, tb := range content.Blocks {
		if tb.Type != "traffic" {
			continue
		}
		t := l.decodeTraffic(tb, s, policy)
		if t == nil {
			continue
		}
		if i := slices.IndexFunc(s.Traffic, func(o *Traffic) bool { return o.Name == t.Name }); i >= 0 {
			l.add(errorf(tb.LabelRanges[0], "Duplicate traffic", "Scenario %q already has traffic named %q, at %s.", s.Name, t.Name, where(s.Traffic[i].DeclRange)))
			continue
		}
		s.Traffic = append(s.Traffic, t)
	}
	if !slices.ContainsFunc(content.Blocks, func(b *hcl.Block) bool { return b.Type == "traffic" }) {
		l.add(errorf(b.DefRange, "Scenario has no traffic", "Scenario %q sends nothing. Add a traffic block, for example:\n\n  traffic \"users\" {\n    clients = 100\n    request = { user = \"u${client}\" }\n    rate    = \"1/s\"\n  }", s.Name))
	}
	l.decodeFaults(content.Blocks, s)
	l.decodeChanges(content.Blocks, s, policy)
	l.decodeEngine(content.Blocks, s)
	hasExpect := false
	for _, eb := range content.Blocks {
		if eb.Type != "expect" {
			continue
		}
		hasExpect = true
		attrs, d := eb.Body.JustAttributes()
		l.add(d...)
		for _, a := range ordered(attrs) {
			if i := slices.IndexFunc(s.Expect, func(x *Expect) bool { return x.Name == a.Name }); i >= 0 {
				l.add(errorf(a.NameRange, "Duplicate expectation", "Scenario %q already has an expectation named %q, at %s.", s.Name, a.Name, where(s.Expect[i].Range)))
				continue
			}
			if x := l.expectation(a, s, policy); x != nil {
				s.Expect = append(s.Expect, x)
			}
		}
	}
	if !hasExpect {
		l.add(warnf(b.DefRange, "Scenario expects nothing", "Scenario %q has no expect block, so running it checks nothing. Add one, for example:\n\n  expect {\n    users_served = denied_fraction(\"users\") < 0.01\n  }", s.Name))
	}
	if okName {
		l.cfg.Scenarios = append(l.cfg.Scenarios, s)
	}
}

// duration compiles a constant duration attribute; zero is allowed when zeroOK.
func (l *loader) duration(a *hcl.Attribute, zeroOK bool) (int64, bool) {
	s, ok := l.constString(a)
	if !ok {
		return 0, false
	}
	var us int64
	var err error
	if zeroOK {
		us, err = parseDurationTerms(s)
		if err == nil && us > 0 && us < msUS {
			_, err = parseDuration(s)
		}
	} else {
		us, err = parseDuration(s)
	}
	if err != nil {
		l.add(unitDiag(a, "Invalid "+a.Name, err, durationForms))
		return 0, false
	}
	return us, true
}

// unitDiag reports a duration or rate error, with the accepted forms when they help.
func unitDiag(a *hcl.Attribute, summary string, err error, forms string) *hcl.Diagnostic {
	detail := err.Error()
	if ue, ok := err.(*unitError); ok && ue.forms {
		detail += " " + forms
	}
	return errorf(a.Expr.Range(), summary, "%s", detail)
}

func (l *loader) decodeTraffic(b *hcl.Block, s *Scenario, policy *Policy) *Traffic {
	if !l.checkName(b, "traffic") {
		return nil
	}
	t := &Traffic{Name: b.Labels[0], Clients: 1, Units: 1, Pattern: PatternConstant, DeclRange: b.DefRange, Stop: s.Duration}
	content, d := b.Body.Content(trafficSchema)
	l.add(d...)
	ok := true
	if a := content.Attributes["request"]; a != nil {
		t.Request, ok = l.trafficRequest(a, policy)
	} else {
		l.add(errorf(b.DefRange, "Missing request", "Traffic %q needs the request attributes it sends, such as request = { ip = \"198.51.100.${client}\", path = \"/login\" }.", t.Name))
		ok = false
	}
	if a := content.Attributes["clients"]; a != nil {
		e, d := l.env.compile(a.Expr, constScope, cty.Number)
		l.add(d...)
		if e != nil && e.kind == kindConst && !e.val.IsNull() {
			n, err := asInt(e.val)
			if err == nil && (n < 1 || n > maxClients) {
				err = fmt.Errorf("%d is out of range", n)
			}
			if err != nil {
				l.add(errorf(a.Expr.Range(), "Invalid clients", "clients is the number of clients sending this traffic, from 1 to %d: %s.", maxClients, err))
				ok = false
			} else {
				t.Clients = int(n)
			}
		}
	}
	if a := content.Attributes["rate"]; a != nil {
		if str, sok := l.constString(a); sok {
			n, per, err := parseRate(str)
			if err != nil {
				l.add(unitDiag(a, "Invalid rate", err, rateForms))
				ok = false
			} else {
				t.Rate = Rate{N: n, Per: time.Duration(per) * time.Microsecond}
			}
		}
	} else {
		l.add(errorf(b.DefRange, "Missing rate", "Traffic %q needs the rate each client sends at, such as rate = \"10/s\".", t.Name))
		ok = false
	}
	if a := content.Attributes["pattern"]; a != nil {
		if v, pok := l.oneOf(a, patterns, `"constant" spaces requests evenly, "poisson" sends them at random with that mean, "burst" sends burst requests at once, "ramp" rises from nothing to the rate, "edge" straddles period boundaries to attack fixed windows.`); pok {
			t.Pattern = v
		}
	}
	if a := content.Attributes["burst"]; a != nil {
		e, d := l.env.compile(a.Expr, constScope, cty.Number)
		l.add(d...)
		if e != nil && e.kind == kindConst && !e.val.IsNull() {
			n, err := asInt(e.val)
			if err == nil && (n < 1 || n > maxClients) {
				err = fmt.Errorf("%d is out of range", n)
			}
			switch {
			case err != nil:
				l.add(errorf(a.Expr.Range(), "Invalid burst", "burst is the number of requests sent at once, from 1 to %d: %s.", maxClients, err))
			case t.Pattern != PatternBurst:
				l.add(errorf(a.NameRange, "burst without pattern = \"burst\"", "burst is the size of each burst of the \"burst\" pattern; traffic %q uses %q. Set pattern = \"burst\" or remove burst.", t.Name, t.Pattern))
			default:
				t.Burst = int(n)
			}
		}
	} else if t.Pattern == PatternBurst {
		l.add(errorf(content.Attributes["pattern"].Expr.Range(), "Missing burst", "The \"burst\" pattern sends burst requests at once; set how many, such as burst = 20."))
	}
	var startA, stopA *hcl.Attribute
	if a := content.Attributes["start"]; a != nil {
		startA = a
		if us, sok := l.duration(a, true); sok {
			t.Start = time.Duration(us) * time.Microsecond
		}
	}
	if a := content.Attributes["stop"]; a != nil {
		stopA = a
		if us, sok := l.duration(a, false); sok {
			t.Stop = time.Duration(us) * time.Microsecond
		}
	}
	if a := content.Attributes["hold"]; a != nil {
		if us, hok := l.duration(a, true); hok {
			t.Hold = time.Duration(us) * time.Microsecond
		}
	}
	if a := content.Attributes["units"]; a != nil {
		e, d := l.env.compile(a.Expr, constScope, cty.Number)
		l.add(d...)
		if e != nil && e.kind == kindConst && !e.val.IsNull() {
			n, err := asInt(e.val)
			if err == nil && (n < 1 || n > algorithms.MaxInt) {
				err = fmt.Errorf("%d is out of range", n)
			}
			if err != nil {
				l.add(errorf(a.Expr.Range(), "Invalid units", "units is how many units each request asks for (engine.AllowN's n), from 1 to 2^53: %s.", err))
			} else {
				t.Units = n
			}
		}
	}
	if a := content.Attributes["at_most"]; a != nil {
		e, d := l.env.compile(a.Expr, constScope, cty.Bool)
		l.add(d...)
		if e != nil && e.kind == kindConst && !e.val.IsNull() {
			t.AtMost = e.val.True()
		}
		if t.AtMost && policy != nil {
			for _, r := range policy.Rules {
				if r.Algorithm.HasLease() {
					l.add(errorf(a.Expr.Range(), "Partial admission of a lease", "Rule %q of policy %q holds concurrency leases, which a partial admission cannot grant in part (engine.AllowAtMost refuses it). Remove at_most, or send this traffic to a policy without %s rules.", r.Name, policy.Name, r.Algorithm.Name))
					break
				}
			}
		}
	}
	if a := content.Attributes["max_delay"]; a != nil {
		if us, ok := l.duration(a, false); ok {
			t.MaxDelay = time.Duration(us) * time.Microsecond
		}
		switch {
		case t.AtMost || t.Units != 1:
			l.add(errorf(a.NameRange, "max_delay with units", "A request that waits for its turn asks for one unit (engine.Wait); remove units and at_most, or max_delay."))
			t.MaxDelay = 0
		case policy != nil:
			for _, r := range policy.Rules {
				if r.Algorithm.HasLease() {
					l.add(errorf(a.Expr.Range(), "Waiting for a lease", "Rule %q of policy %q holds concurrency leases, which a request cannot reserve ahead (engine.Wait refuses it). Remove max_delay, or send this traffic to a policy without %s rules.", r.Name, policy.Name, r.Algorithm.Name))
					t.MaxDelay = 0
					break
				}
			}
		}
	}
	if a := content.Attributes["actual"]; a != nil {
		t.Actual = l.actual(a, t, policy)
	}
	if s.Duration > 0 {
		switch {
		case stopA != nil && t.Stop > s.Duration:
			l.add(errorf(stopA.Expr.Range(), "Traffic stops after the scenario", "stop is %s but scenario %q lasts %s.", formatDuration(t.Stop.Microseconds()), s.Name, formatDuration(s.Duration.Microseconds())))
		case startA != nil && t.Start >= t.Stop:
			l.add(errorf(startA.Expr.Range(), "Traffic never starts", "start is %s, not before stop (%s): traffic %q would send nothing.", formatDuration(t.Start.Microseconds()), formatDuration(t.Stop.Microseconds()), t.Name))
		}
	}
	if ok && policy != nil && policy.Match != nil {
		if m, err := t.Render(0); err == nil {
			if match, err := policy.Match.Bool(mapRequest(m)); err == nil && !match {
				l.add(warnf(b.DefRange, "Traffic does not match the policy", "Policy %q's match is false for traffic %q's requests (client 0), so they are never limited and the scenario measures nothing for them. Change the request or the policy's match.", policy.Name, t.Name))
			}
		}
	}
	return t
}

// mapRequest is a Request backed by a map.
type mapRequest map[string]string

func (m mapRequest) Attr(name string) string { return m[name] }

// clientRequest is the Request traffic templates are evaluated with: client is its number.
type clientRequest int

func (c clientRequest) Attr(name string) string {
	if name == "client" {
		return strconv.Itoa(int(c))
	}
	return ""
}

// trafficRequest decodes request = { attr = "template", ... } and warns about attributes
// the policy never reads.
func (l *loader) trafficRequest(a *hcl.Attribute, policy *Policy) (map[string]*Expr, bool) {
	pairs, d := hcl.ExprMap(a.Expr)
	if d.HasErrors() {
		l.add(errorf(a.Expr.Range(), "Invalid request", "request must be an object written out in place, such as { ip = \"198.51.100.${client}\", user = \"u${client}\" }."))
		return nil, false
	}
	read := policyAttrs(policy)
	m := map[string]*Expr{}
	ok := true
	for _, kv := range pairs {
		name := hcl.ExprAsKeyword(kv.Key)
		if name == "" {
			v, d := kv.Key.Value(nil)
			if d.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.String || v.AsString() == "" {
				l.add(errorf(kv.Key.Range(), "Invalid request attribute", "Request attribute names are identifiers or non-empty strings, such as user or \"x-api-key\"."))
				ok = false
				continue
			}
			name = v.AsString()
		}
		if _, dup := m[name]; dup {
			l.add(errorf(kv.Key.Range(), "Duplicate request attribute", "The attribute %q is set twice.", name))
			ok = false
			continue
		}
		e, d := l.env.compile(kv.Value, clientScope, cty.String)
		l.add(d...)
		if e == nil {
			ok = false
			continue
		}
		m[name] = e
		if policy != nil && !read[name] {
			l.add(warnf(kv.Key.Range(), "Attribute not read by the policy", "Policy %q never reads request.%s, so it does not affect the scenario.%s", policy.Name, name, suggestion(name, sortedKeys(read))))
		}
	}
	return m, ok
}

// policyAttrs returns the request attributes that decide p's requests: those its match,
// shard, rules' keys, whens, costs and parameters and unlimited blocks' whens read (not a
// stats_key's, which only names statistics).
func policyAttrs(p *Policy) map[string]bool {
	read := map[string]bool{}
	if p == nil {
		return read
	}
	add := func(e *Expr) {
		if e != nil {
			for _, a := range e.attrs {
				read[a] = true
			}
		}
	}
	add(p.Match)
	add(p.Shard)
	for _, r := range p.Rules {
		add(r.Key)
		add(r.When)
		add(r.Cost)
		for _, prm := range r.Params {
			add(prm.Expr)
		}
	}
	for _, u := range p.Unlimited {
		add(u.When)
	}
	return read
}

// expectation compiles one expectation, checking its function calls against the scenario.
func (l *loader) expectation(a *hcl.Attribute, s *Scenario, policy *Policy) *Expect {
	expr := l.env.native(a.Expr)
	_, poisoned, d := l.env.refs(expr, expectScope)
	l.add(d...)
	if d.HasErrors() || poisoned {
		return nil
	}
	var rules []string // nil: the policy is unknown, so rule names are not checked
	if policy != nil {
		rules = []string{}
		for _, r := range policy.Rules {
			rules = append(rules, r.Name)
		}
	}
	ctx := &hcl.EvalContext{
		Variables: l.env.ctx.Variables,
		Functions: scenarioFunctions(s, rules, nil),
	}
	v, d := expr.Value(ctx)
	if !d.HasErrors() {
		d = callErrors(expr, ctx)
	}
	l.add(fixSuggestions(d, sortedKeys(ctx.Functions))...)
	if d.HasErrors() {
		return nil
	}
	b, err := convertBool(v)
	if err != nil {
		l.add(errorf(expr.Range(), "Expectation is not a condition", "An expectation must be true or false, such as denied_fraction(\"users\") < 0.01: %s.", err))
		return nil
	}
	if b.IsKnown() {
		l.add(warnf(expr.Range(), "Expectation measures nothing", "This expectation is always %v: it calls none of the scenario functions (%s).", b.True(), strings.Join(measures(s, rules), ", ")))
	}
	return &Expect{Name: a.Name, Expr: expr, Range: a.Range, scenario: s, rules: rules, vars: l.env.ctx.Variables}
}

// callErrors evaluates each function call of expr on its own and returns their errors.
// At load time the scenario functions return unknown values, and HCL then skips the right
// operand of && and || and the unchosen result of a conditional, so a misnamed traffic
// source there would otherwise only show when the scenario runs.
func callErrors(expr hcl.Expression, ctx *hcl.EvalContext) hcl.Diagnostics {
	syn, ok := expr.(hclsyntax.Expression)
	if !ok {
		return nil
	}
	var out hcl.Diagnostics
	seen := map[string]bool{}
	hclsyntax.VisitAll(syn, func(n hclsyntax.Node) hcl.Diagnostics {
		call, ok := n.(*hclsyntax.FunctionCallExpr)
		if !ok {
			return nil
		}
		_, d := call.Value(ctx)
		for _, diag := range d {
			key := diag.Summary + "\x00" + diag.Detail
			if diag.Subject != nil {
				key += "\x00" + where(*diag.Subject)
			}
			if diag.Severity == hcl.DiagError && !seen[key] {
				seen[key] = true
				out = append(out, diag)
			}
		}
		return nil
	})
	return out
}

func convertBool(v cty.Value) (cty.Value, error) {
	if v.IsKnown() && v.IsNull() {
		return cty.NilVal, fmt.Errorf("the value is null")
	}
	if v.Type() != cty.Bool && v.Type() != cty.DynamicPseudoType {
		return cty.NilVal, fmt.Errorf("it is a %s", v.Type().FriendlyName())
	}
	return v, nil
}

// scenarioFunctions are the policy functions plus the expectation functions of scenario
// s (whose policy has the given rules). With o nil they only check their arguments and
// return unknown numbers, for validation at load time.
// measures returns the names of the functions an expectation measures a run with: the
// scenario functions that are not policy functions, sorted.
func measures(s *Scenario, rules []string) []string {
	pf := policyFunctions()
	var out []string
	for name := range scenarioFunctions(s, rules, nil) {
		if _, ok := pf[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func scenarioFunctions(s *Scenario, rules []string, o Outcome) map[string]function.Function {
	fns := make(map[string]function.Function, len(policyFunctions())+15)
	for k, v := range policyFunctions() {
		fns[k] = v
	}
	traffic := func(args []cty.Value) (string, error) {
		name := args[0].AsString()
		var names []string
		for _, t := range s.Traffic {
			if t.Name == name {
				return name, nil
			}
			names = append(names, t.Name)
		}
		return "", function.NewArgErrorf(0, "scenario %q has no traffic named %q.%s Its traffic is %s", s.Name, name, suggestion(name, names), quoteList(names))
	}
	count := func(f func(o Outcome, t string) int64) function.Function {
		return function.New(&function.Spec{
			Params: []function.Parameter{{Name: "traffic", Type: cty.String}},
			Type:   function.StaticReturnType(cty.Number),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				t, err := traffic(args)
				if err != nil || o == nil {
					return cty.UnknownVal(cty.Number), err
				}
				return cty.NumberIntVal(f(o, t)), nil
			},
		})
	}
	ratio := func(num func(o Outcome, t string) int64) function.Function {
		return function.New(&function.Spec{
			Params: []function.Parameter{{Name: "traffic", Type: cty.String}},
			Type:   function.StaticReturnType(cty.Number),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				t, err := traffic(args)
				if err != nil || o == nil {
					return cty.UnknownVal(cty.Number), err
				}
				n := o.Requests(t)
				if n == 0 {
					return cty.Zero, nil
				}
				return cty.NumberFloatVal(float64(num(o, t)) / float64(n)), nil
			},
		})
	}
	allowed := func(o Outcome, t string) int64 { return o.Allowed(t) }
	denied := func(o Outcome, t string) int64 { return o.Requests(t) - o.Allowed(t) }
	fns["requests"] = count(func(o Outcome, t string) int64 { return o.Requests(t) })
	fns["allowed"] = count(allowed)
	fns["granted"] = count(func(o Outcome, t string) int64 { return o.Granted(t) })
	fns["denied"] = count(denied)
	fns["allowed_fraction"] = ratio(allowed)
	fns["denied_fraction"] = ratio(denied)
	fns["waited"] = count(func(o Outcome, t string) int64 { return o.Waited(t) })
	fns["settled"] = count(func(o Outcome, t string) int64 { return o.Settled(t) })
	fns["owed"] = count(func(o Outcome, t string) int64 { return o.Owed(t) })
	fns["max_wait"] = function.New(&function.Spec{
		Params: []function.Parameter{{Name: "traffic", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Number),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			t, err := traffic(args)
			if err != nil || o == nil {
				return cty.UnknownVal(cty.Number), err
			}
			return cty.NumberFloatVal(o.MaxWait(t).Seconds()), nil
		},
	})
	fns["denied_by"] = function.New(&function.Spec{
		Params: []function.Parameter{{Name: "traffic", Type: cty.String}, {Name: "rule", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Number),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			t, err := traffic(args)
			if err != nil {
				return cty.UnknownVal(cty.Number), err
			}
			rule := args[1].AsString()
			if rules != nil && !slices.Contains(rules, rule) {
				return cty.UnknownVal(cty.Number), function.NewArgErrorf(1, "policy %q has no rule named %q.%s Its rules are %s", s.Policy, rule, suggestion(rule, rules), quoteList(rules))
			}
			if o == nil {
				return cty.UnknownVal(cty.Number), nil
			}
			return cty.NumberIntVal(o.DeniedBy(t, rule)), nil
		},
	})
	noFault := func(name string) error {
		if len(s.Faults) > 0 {
			return nil
		}
		return fmt.Errorf("scenario %q declares no fault, so %s measures nothing. Add a fault block, such as fault { kind = \"stall\", at = \"1m\", for = \"30s\" }", s.Name, name)
	}
	duringFault := func(name string, f func(requests, allowed int64) int64) function.Function {
		return function.New(&function.Spec{
			Params: []function.Parameter{{Name: "traffic", Type: cty.String}},
			Type:   function.StaticReturnType(cty.Number),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				t, err := traffic(args)
				if err == nil {
					err = noFault(name)
				}
				if err != nil || o == nil {
					return cty.UnknownVal(cty.Number), err
				}
				return cty.NumberIntVal(f(o.DuringFault(t))), nil
			},
		})
	}
	fns["allowed_during_fault"] = duringFault("allowed_during_fault", func(_, a int64) int64 { return a })
	fns["denied_during_fault"] = duringFault("denied_during_fault", func(n, a int64) int64 { return n - a })
	fns["degraded"] = count(func(o Outcome, t string) int64 {
		return o.DecidedBy(t, "local") + o.DecidedBy(t, "fail_open") + o.DecidedBy(t, "fail_deny")
	})
	fns["timed_out"] = count(func(o Outcome, t string) int64 { return o.TimedOut(t) })
	fns["breaker_open"] = count(func(o Outcome, t string) int64 { return o.BreakerOpen(t) })
	fns["decided_by"] = function.New(&function.Spec{
		Params: []function.Parameter{{Name: "traffic", Type: cty.String}, {Name: "how", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Number),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			t, err := traffic(args)
			if err != nil {
				return cty.UnknownVal(cty.Number), err
			}
			how := args[1].AsString()
			if !slices.Contains(Deciders, how) {
				return cty.UnknownVal(cty.Number), function.NewArgErrorf(1, "%q is not a way of deciding.%s Use \"redis\", \"local\" (the in-process fallback of on_error = \"local\"), \"fail_open\" (on_error = \"allow\"), \"fail_deny\" (on_error = \"deny\") or \"cache\" (the deny cache)", how, suggestion(how, Deciders))
			}
			if o == nil {
				return cty.UnknownVal(cty.Number), nil
			}
			return cty.NumberIntVal(o.DecidedBy(t, how)), nil
		},
	})
	fns["recovered_within"] = function.New(&function.Spec{
		Params: []function.Parameter{{Name: "traffic", Type: cty.String}, {Name: "span", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			t, err := traffic(args)
			if err != nil {
				return cty.UnknownVal(cty.Bool), err
			}
			span, err := spanArg(args[1])
			if err == nil {
				err = noFault("recovered_within")
			}
			if err != nil || o == nil {
				return cty.UnknownVal(cty.Bool), err
			}
			return cty.BoolVal(o.Recovery(t) <= span), nil
		},
	})
	fns["phantom_charges"] = function.New(&function.Spec{
		Type: function.StaticReturnType(cty.Number),
		Impl: func(_ []cty.Value, _ cty.Type) (cty.Value, error) {
			if err := noFault("phantom_charges"); err != nil || o == nil {
				return cty.UnknownVal(cty.Number), err
			}
			return cty.NumberIntVal(o.PhantomCharges()), nil
		},
	})
	fns["max_allowed_in"] = function.New(&function.Spec{
		Params: []function.Parameter{{Name: "traffic", Type: cty.String}, {Name: "span", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Number),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			t, err := traffic(args)
			if err != nil {
				return cty.UnknownVal(cty.Number), err
			}
			span, err := spanArg(args[1])
			if err != nil || o == nil {
				return cty.UnknownVal(cty.Number), err
			}
			return cty.NumberIntVal(o.MaxAllowedIn(t, span)), nil
		},
	})
	return fns
}

// spanArg reads a duration argument (the second) of an expectation function.
func spanArg(v cty.Value) (time.Duration, error) {
	us, err := parseDuration(v.AsString())
	if err != nil {
		msg := err.Error()
		if ue, ok := err.(*unitError); ok && ue.forms {
			msg += " " + durationForms
		}
		return 0, function.NewArgErrorf(1, "%s", strings.TrimSuffix(msg, "."))
	}
	return time.Duration(us) * time.Microsecond, nil
}

// actual reads a traffic's actual: the true costs its requests settle with, in turn
// (engine.Reserve with units as the estimate, then Settle when each finishes).
func (l *loader) actual(a *hcl.Attribute, t *Traffic, policy *Policy) []int64 {
	v, d := a.Expr.Value(nil)
	if d.HasErrors() || !(v.Type().IsTupleType() || v.Type().IsListType()) || v.LengthInt() == 0 || v.LengthInt() > maxActual {
		l.add(errorf(a.Expr.Range(), "Invalid actual", "actual lists the true costs the requests settle with, in turn: 1 to %d whole numbers from 0 to 2^53, such as actual = [120, 480, 2000].", maxActual))
		return nil
	}
	var out []int64
	over := false
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		n, err := int64(0), error(nil)
		if e.Type() != cty.Number || e.IsNull() || !e.IsKnown() {
			err = fmt.Errorf("%s is not a number", e.Type().FriendlyName())
		} else if n, err = asInt(e); err == nil && (n < 0 || n > algorithms.MaxInt) {
			err = fmt.Errorf("%d is out of range", n)
		}
		if err != nil {
			l.add(errorf(a.Expr.Range(), "Invalid actual", "actual lists the true costs the requests settle with, from 0 to 2^53: %s.", err))
			return nil
		}
		over = over || n > max(t.Units, 1)
		out = append(out, n)
	}
	switch {
	case t.AtMost || t.MaxDelay > 0:
		l.add(errorf(a.NameRange, "actual with at_most or max_delay", "A request that settles its true cost reserves its units as an estimate (engine.Reserve), in full or not at all, at once; remove at_most and max_delay, or actual."))
		return nil
	case policy != nil:
		for _, r := range policy.Rules {
			switch {
			case r.Algorithm.HasLease():
				l.add(errorf(a.Expr.Range(), "Settling a lease", "Rule %q of policy %q holds concurrency leases, which are released, not settled (engine.Reserve refuses them). Remove actual, or send this traffic to a policy without %s rules.", r.Name, policy.Name, r.Algorithm.Name))
				return nil
			case over && !r.Algorithm.CarriesDebt():
				l.add(errorf(a.Expr.Range(), "Settling above the estimate", "Rule %q of policy %q (%s) carries no debt, so a request cannot settle above its estimate of %d units (Settle refuses it). Raise units to the largest true cost, or use fixed_window, gcra, token_bucket or leaky_bucket.", r.Name, policy.Name, r.Algorithm.Name, max(t.Units, 1)))
				return nil
			}
		}
	}
	return out
}
