package dsl

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/zclconf/go-cty/cty"
)

var policySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "match"},
		{Name: "shard"},
		{Name: "on_error"},
		{Name: "clock"},
		{Name: "clock_skew"},
		{Name: "local_share"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "rule", LabelNames: []string{"name"}}, {Type: "unlimited", LabelNames: []string{"name"}}, {Type: "budget"}},
}

var unlimitedSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "when"}, {Name: "replaces"}}}

// ruleAttrs are the attributes every rule has; the algorithm's parameters come on top.
var ruleAttrs = []hcl.AttributeSchema{
	{Name: "algorithm"},
	{Name: "key"},
	{Name: "when"},
	{Name: "cost"},
	{Name: "shadow"},
	{Name: "accept_bound"},
	{Name: "stats_key"},
	{Name: "replaces"},
	{Name: "block_for"},
	{Name: "block_max"},
	{Name: "overridable"},
	{Name: "exempt"},
	{Name: "deny"},
	{Name: "deny_retry"},
	{Name: "time_zone"},
	{Name: "lease_size"},
	{Name: "lease_for"},
}

// validName is the form of policy, rule, scenario and traffic names: they appear in Redis
// keys (rl:{shard}:<policy>:<rule>:<algorithm>:<key>) and in RateLimit-Policy headers, so they are
// plain tokens.
var validName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// checkName reports a block label that is not a valid name.
func (l *loader) checkName(b *hcl.Block, what string) bool {
	if len(b.Labels) == 0 || len(b.LabelRanges) == 0 {
		return false
	}
	if validName.MatchString(b.Labels[0]) {
		return true
	}
	l.add(errorf(b.LabelRanges[0], "Invalid "+what+" name", "%q is not a valid %s name: use a letter followed by letters, digits, _ or -, at most 64 in all. Names become part of Redis keys and response headers.", b.Labels[0], what))
	return false
}

func (l *loader) decodePolicy(b *hcl.Block) {
	if len(b.Labels) == 0 || len(b.LabelRanges) == 0 {
		return // HCL reported the missing label
	}
	okName := l.checkName(b, "policy")
	p := &Policy{Name: b.Labels[0], OnError: OnErrorAllow, LocalShare: 1, Clock: ClockServer, Budget: l.budget, DeclRange: b.DefRange}
	if prev, ok := l.policies[p.Name]; ok {
		l.add(errorf(b.LabelRanges[0], "Duplicate policy", "A policy named %q is already defined at %s. Policy names are unique across all files.", p.Name, where(prev.DeclRange)))
		okName = false
	}
	content, d := b.Body.Content(policySchema)
	l.add(d...)

	if a := content.Attributes["match"]; a != nil {
		p.Match = l.condition(a, "Policy never matches", "match is always false, so the policy applies to no request. Remove the policy, or fix the condition.")
	}
	if a := content.Attributes["on_error"]; a != nil {
		if v, ok := l.oneOf(a, []string{OnErrorAllow, OnErrorDeny, OnErrorLocal}, `"allow" lets requests through while the backend is unavailable (fail open), "deny" rejects them (fail closed), "local" decides them in-process with the same algorithms until it is back.`); ok {
			p.OnError = v
		}
	}
	if a := content.Attributes["local_share"]; a != nil {
		l.localShare(a, p)
	}
	if a := content.Attributes["clock"]; a != nil {
		if v, ok := l.oneOf(a, []string{ClockServer, ClockClient}, `"server" reads Redis's clock once per call (the default; immune to client clock skew), "client" uses the caller's clock, for tests and replays.`); ok {
			p.Clock = v
		}
	}
	if p.Clock == ClockClient {
		p.ClockSkew = DefaultClockSkew
	}
	if a := content.Attributes["clock_skew"]; a != nil {
		if s, ok := l.constString(a); ok {
			us, err := parseDuration(s)
			switch {
			case err != nil:
				l.add(errorf(a.Expr.Range(), "Invalid clock_skew", "clock_skew: %s", err))
			case p.Clock != ClockClient:
				l.add(warnf(a.Range, "clock_skew without client clocks", "clock_skew states how far apart the clients' clocks may be, which matters only with clock = \"client\": this policy reads Redis's clock, so it is ignored. Remove it, or set clock = \"client\"."))
			default:
				p.ClockSkew = us
			}
		}
	}
	guards := nonEmpty(p.Match)
	if a := content.Attributes["shard"]; a != nil {
		p.Shard = l.shard(a, guards)
	}

	var rules, budgets, unlimited []*hcl.Block
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "budget":
			budgets = append(budgets, blk)
		case "unlimited":
			unlimited = append(unlimited, blk)
		default:
			rules = append(rules, blk)
		}
	}
	for i, bb := range budgets {
		if i > 0 {
			l.add(errorf(bb.DefRange, "Duplicate budget", "Policy %q already sets its budget at %s; a policy has one budget block.", p.Name, where(budgets[0].DefRange)))
			continue
		}
		p.Budget = l.decodeBudget(bb, p.Budget)
	}
	names := map[string]*Rule{}
	for _, rb := range rules {
		r := l.decodeRule(rb, p, guards)
		if r == nil {
			continue
		}
		if prev, ok := names[r.Name]; ok {
			l.add(errorf(rb.LabelRanges[0], "Duplicate rule", "Policy %q already has a rule named %q, at %s. Rule names are unique within a policy; they name its Redis keys.", p.Name, r.Name, where(prev.DeclRange)))
			continue
		}
		names[r.Name] = r
		p.Rules = append(p.Rules, r)
	}
	for _, r := range p.Rules {
		r.Replaces = l.resolveReplaces(p, r.Name, "Rule", r.replaces, names)
	}
	for _, ub := range unlimited {
		if !l.checkName(ub, "unlimited block") {
			continue
		}
		u := &Unlimited{Name: ub.Labels[0], DeclRange: ub.DefRange}
		if prev, ok := names[u.Name]; ok {
			l.add(errorf(ub.LabelRanges[0], "Duplicate rule", "Policy %q already has a rule named %q, at %s. Rules and unlimited blocks share their names within a policy.", p.Name, u.Name, where(prev.DeclRange)))
			continue
		}
		if slices.ContainsFunc(p.Unlimited, func(o *Unlimited) bool { return o.Name == u.Name }) {
			l.add(errorf(ub.LabelRanges[0], "Duplicate unlimited block", "Policy %q already has an unlimited block named %q.", p.Name, u.Name))
			continue
		}
		uc, d := ub.Body.Content(unlimitedSchema)
		l.add(d...)
		if a := uc.Attributes["when"]; a != nil {
			u.When = l.condition(a, "Unlimited block never applies", "when is always false, so the block names no request. Remove it, or fix the condition.")
		}
		u.Replaces = l.resolveReplaces(p, u.Name, "Unlimited block", uc.Attributes["replaces"], names)
		p.Unlimited = append(p.Unlimited, u)
	}
	if len(rules) == 0 && len(unlimited) == 0 {
		l.add(errorf(b.DefRange, "Policy has no rules", "Policy %q limits nothing. Add a rule block, for example:\n\n  rule \"per_ip\" {\n    algorithm = \"gcra\"\n    key       = request.ip\n    rate      = \"10/s\"\n    burst     = 20\n  }", p.Name))
	} else if len(p.Rules) > 0 && !slices.ContainsFunc(p.Rules, func(r *Rule) bool { return !r.Shadow }) {
		l.add(warnf(b.DefRange, "Policy enforces nothing", "Every rule of policy %q is a shadow rule: requests are counted but never denied. Set shadow = false on the rules to enforce.", p.Name))
	}
	if !okName {
		return
	}
	l.policies[p.Name] = p
	l.cfg.Policies = append(l.cfg.Policies, p)
}

// resolveReplaces reads the replaces attribute a (nil: none) of the rule or unlimited
// block named self (what is "Rule" or "Unlimited block"): names of the rules of policy p.
func (l *loader) resolveReplaces(p *Policy, self, what string, a *hcl.Attribute, names map[string]*Rule) []*Rule {
	if a == nil {
		return nil
	}
	e, d := l.env.compile(a.Expr, constScope, cty.List(cty.String))
	l.add(d...)
	if e == nil || e.kind != kindConst || e.val.IsNull() {
		return nil
	}
	var all []string
	for _, o := range p.Rules {
		if o.Name != self {
			all = append(all, o.Name)
		}
	}
	var out []*Rule
	for _, v := range e.val.AsValueSlice() {
		if v.IsNull() {
			continue
		}
		n := v.AsString()
		o, ok := names[n]
		switch {
		case n == self:
			l.add(errorf(a.Expr.Range(), what+" replaces itself", "%s %q names itself in replaces. replaces lists the rules of policy %q that do not apply to a decision it applies to; remove %q.", what, self, p.Name, n))
		case !ok:
			l.add(errorf(a.Expr.Range(), "Unknown rule in replaces", "Policy %q has no rule %q.%s replaces names rules of the same policy: %s.", p.Name, n, suggestion(n, all), quoteList(all)))
		case !slices.Contains(out, o):
			out = append(out, o)
		}
	}
	return out
}

// condition compiles a bool attribute; nil when it is constant true. A constant false is
// reported with the given summary and detail.
func (l *loader) condition(a *hcl.Attribute, summary, detail string) *Expr {
	e, d := l.env.compile(a.Expr, requestScope, cty.Bool)
	l.add(d...)
	if e == nil || e.kind != kindConst {
		return e
	}
	if e.val.IsNull() || e.val.True() {
		return nil
	}
	l.add(warnf(a.Expr.Range(), summary, "%s", detail))
	return e
}

// oneOf compiles a constant string attribute that must be one of values.
func (l *loader) oneOf(a *hcl.Attribute, values []string, explain string) (string, bool) {
	v, ok := l.constString(a)
	if !ok {
		return "", false
	}
	if slices.Contains(values, v) {
		return v, true
	}
	l.add(errorf(a.Expr.Range(), "Invalid "+a.Name, "%q is not a valid %s.%s Use %s: %s", v, a.Name, suggestion(v, values), quoteList(values), explain))
	return "", false
}

// shard compiles a policy's shard and checks that it cannot be empty.
func (l *loader) shard(a *hcl.Attribute, guards map[string]bool) *Expr {
	e, d := l.env.compile(a.Expr, requestScope, cty.String)
	l.add(d...)
	if e == nil {
		return nil
	}
	switch e.kind {
	case kindConst:
		if e.val.IsNull() {
			return nil
		}
		if e.val.AsString() == "" {
			l.add(errorf(a.Expr.Range(), "Empty shard", "An empty hash tag {} does not tag the key: Redis Cluster then hashes each key whole, so a request's keys land in different slots. Name the request attribute that groups requests, such as shard = request.tenant."))
			return nil
		}
		l.add(warnf(a.Expr.Range(), "Constant shard", "Every request of this policy goes to one hash slot, so one Redis Cluster node carries all of its traffic. Shard by a request attribute, such as request.tenant, to spread the load, or remove shard."))
	default:
		for _, attr := range mayBeEmpty(e, guards) {
			l.add(warnf(a.Expr.Range(), "Shard can be empty", "When request.%s is empty the hash tag is {}, which Redis Cluster ignores: the request's keys then hash to different slots and cannot be charged in one atomic call. Restrict the policy to requests that have it, e.g. match = request.%s != \"\".", attr, attr))
		}
	}
	return e
}

// mayBeEmpty returns the attributes whose emptiness makes a reference or a template part
// empty, unless guards proves them non-empty.
func mayBeEmpty(e *Expr, guards map[string]bool) []string {
	var out []string
	switch e.kind {
	case kindAttr:
		if !guards[e.attr] {
			out = append(out, e.attr)
		}
	case kindTemplate:
		for _, p := range e.parts {
			if p.isAttr && !guards[p.attr] && !slices.Contains(out, p.attr) {
				out = append(out, p.attr)
			}
		}
	}
	return out
}

func (l *loader) decodeRule(b *hcl.Block, p *Policy, policyGuards map[string]bool) *Rule {
	if !l.checkName(b, "rule") {
		return nil
	}
	r := &Rule{Name: b.Labels[0], DeclRange: b.DefRange}
	base, _, d := b.Body.PartialContent(&hcl.BodySchema{Attributes: ruleAttrs})
	var content *hcl.BodyContent

	a := base.Attributes["algorithm"]
	if a == nil {
		l.add(d...)
		l.add(errorf(b.DefRange, "Missing algorithm", "Rule %q needs an algorithm: one of %s.", r.Name, quoteList(l.algorithmNames())))
		return nil
	}
	name, ok := l.constString(a)
	if !ok {
		l.add(d...)
		return nil
	}
	alg := l.algorithm(name)
	if _, declared := l.plugins[name]; alg == nil && declared {
		return nil // a plugin whose declaration has errors, already reported
	}
	if alg == nil {
		l.add(d...)
		l.add(errorf(a.Expr.Range(), "Unknown algorithm", "There is no algorithm named %q.%s The algorithms are %s; declare others with an algorithm block.", name, suggestion(name, l.algorithmNames()), quoteList(l.algorithmNames())))
		return nil
	}
	r.Algorithm = alg
	schema := &hcl.BodySchema{Attributes: slices.Clone(ruleAttrs)}
	for _, ap := range alg.Params {
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: ap.Name})
	}
	content, d = b.Body.Content(schema)
	for _, x := range d {
		if x.Summary == "Unsupported argument" || x.Summary == "Extraneous JSON object property" {
			x.Detail += fmt.Sprintf(" A rule takes algorithm, key, when, cost, shadow, accept_bound, stats_key, replaces, block_for, block_max, overridable, exempt, deny, deny_retry, time_zone, lease_size and lease_for; %s takes %s.", alg.Name, paramList(alg))
		}
	}
	l.add(d...)

	guards := map[string]bool{}
	for k := range policyGuards {
		guards[k] = true
	}
	if a := content.Attributes["when"]; a != nil {
		r.When = l.condition(a, "Rule never applies", "when is always false, so the rule limits nothing. Remove the rule, or fix the condition.")
		for k := range nonEmpty(r.When) {
			guards[k] = true
		}
	}
	if a := content.Attributes["key"]; a != nil {
		r.Key = l.key(a, guards)
		l.constantKey(r, a)
	} else {
		l.add(errorf(b.DefRange, "Missing key", "Rule %q needs a key: what its counter is kept per, such as key = request.ip, key = \"${request.tenant}:${request.user}\", or a constant such as key = \"all\" for one counter shared by every request.", r.Name))
	}
	if a := content.Attributes["shadow"]; a != nil {
		e, d := l.env.compile(a.Expr, constScope, cty.Bool)
		l.add(d...)
		if e != nil && e.kind == kindConst && !e.val.IsNull() {
			r.Shadow = e.val.True()
		}
	}
	if a := content.Attributes["replaces"]; a != nil {
		r.replaces = a
	}
	l.box(r, content)
	l.lists(r, content)
	if a := content.Attributes["overridable"]; a != nil {
		e, d := l.env.compile(a.Expr, constScope, cty.Bool)
		l.add(d...)
		if e != nil && e.kind == kindConst && !e.val.IsNull() {
			r.Overridable = e.val.True()
		}
		if r.Overridable && !alg.Overridable() {
			l.add(errorf(a.Expr.Range(), "Plugins take no overrides", "Rule %q uses the plugin %s: an override converts a key's state to new figures, which only the built-in algorithms know how to do. Remove overridable, or use a built-in algorithm.", r.Name, alg.Name))
			r.Overridable = false
		}
	}
	if a := content.Attributes["stats_key"]; a != nil {
		e, d := l.env.compile(a.Expr, requestScope, cty.String)
		l.add(d...)
		r.StatsKey = e
	}
	if a := content.Attributes["accept_bound"]; a != nil {
		e, d := l.env.compile(a.Expr, constScope, cty.Bool)
		l.add(d...)
		if e != nil && e.kind == kindConst && !e.val.IsNull() {
			r.AcceptBound = e.val.True()
		}
		if g := alg.Guarantee; r.AcceptBound && g.Bound.IsExact() {
			l.add(warnf(a.Expr.Range(), "accept_bound has no effect", "%s declares no bound above its limit (it is exact, or states no limit), so there is nothing to accept: rlctl verify holds rule %q to its limit either way. Remove accept_bound = true.", alg.Name, r.Name))
		}
	}
	var capacity string // the parameter bounding one request's cost; none for plugins
	for _, ap := range alg.Params {
		if ap.Capacity {
			capacity = ap.Name
		}
	}
	var capValues []int64
	known := true
	var wires [][][]int64 // per parameter, its possible wire values
	var ranges []hcl.Range
	calWindow := l.calendarWindow(r, content)
	for _, ap := range alg.Params {
		pa := content.Attributes[ap.Name]
		var prm *Param
		var ws [][]int64
		switch {
		case calWindow && ap.Name == "window" && r.Calendar != nil:
			// A calendar period's window: the shortest the period can be, where one
			// duration must stand for it (Rule.Calendar).
			w := []int64{r.Calendar.Shortest().Microseconds()}
			prm, ws = &Param{Name: ap.Name, Kind: ap.Kind, Const: w, Range: pa.Range}, [][]int64{w}
		case calWindow && ap.Name == "window":
			// reported by calendarWindow
		default:
			prm, ws = l.param(r, ap, pa)
		}
		if prm == nil {
			known = false
			continue
		}
		r.Params = append(r.Params, prm)
		if ws == nil {
			known = false
		}
		wires = append(wires, ws)
		if pa != nil {
			ranges = append(ranges, pa.Range)
		}
		if ap.Name == capacity && ws != nil {
			for _, w := range ws {
				capValues = append(capValues, w[0])
			}
		}
	}
	paramsOK := len(r.Params) == len(alg.Params) && known && l.checkCombinations(r, wires, ranges)
	minCost := int64(1)
	if a := content.Attributes["cost"]; a != nil {
		r.Cost, minCost = l.cost(a, r, capacity, capValues)
	}
	l.checkShare(r, p, wires, paramsOK)
	l.lease(r, content)
	if paramsOK {
		l.ruleWork(r, wires, minCost, p.Budget)
	}
	if p.Shard != nil && r.Key != nil && p.Shard.kind != kindConst {
		var missing []string
		for _, s := range p.Shard.attrs {
			if !slices.Contains(r.Key.attrs, s) {
				missing = append(missing, "request."+s)
			}
		}
		if len(missing) > 0 {
			m := strings.Join(missing, " and ")
			l.add(warnf(r.Key.Range(), "Shard splits this rule's counters", "The policy's shard puts every key under the hash tag of %s, so rule %q keeps a separate counter for each value of %s: a client is limited once per %s. If that is intended, say so by including %s in the key; otherwise move the rule to a policy without shard.", m, r.Name, m, m, m))
		}
	}
	return r
}

// algorithm returns a built-in or plugin algorithm by name.
func (l *loader) algorithm(name string) *algorithms.Algorithm {
	if a, ok := algorithms.Lookup(name); ok {
		return a
	}
	return l.pluginOK[name]
}

// algorithmNames lists the built-in algorithms, then the plugins, sorted.
func (l *loader) algorithmNames() []string {
	var names []string
	for _, a := range algorithms.Builtin() {
		names = append(names, a.Name)
	}
	slices.Sort(names)
	return append(names, sortedKeys(l.pluginOK)...)
}

// paramList describes an algorithm's parameters: "limit and window".
func paramList(alg *algorithms.Algorithm) string {
	var names []string
	for _, p := range alg.Params {
		if p.Kind != algorithms.Lease {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		return "no parameters"
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// key compiles a rule's key and reports keys that can be empty.
func (l *loader) key(a *hcl.Attribute, guards map[string]bool) *Expr {
	e, d := l.env.compile(a.Expr, requestScope, cty.String)
	l.add(d...)
	if e == nil {
		return nil
	}
	switch e.kind {
	case kindConst:
		if e.val.IsNull() || e.val.AsString() == "" {
			l.add(errorf(a.Expr.Range(), "Empty key", "A constant key must not be empty. For one counter shared by every request use a name, such as key = \"all\"."))
			return nil
		}
	case kindAttr:
		if !guards[e.attr] {
			l.add(warnf(a.Expr.Range(), "Key can be empty", "Requests without request.%[1]s all share the key \"\", so they are limited together as one client. If that is not intended, apply the rule only when it is set: when = request.%[1]s != \"\".", e.attr))
		}
	case kindTemplate:
		for _, attr := range mayBeEmpty(e, guards) {
			l.add(warnf(a.Expr.Range(), "Key part can be empty", "Requests without request.%[1]s share a key with every other such request, so they are limited together. If that is not intended, apply the rule only when it is set: when = request.%[1]s != \"\".", attr))
		}
	}
	return e
}

// constantKey warns about a constant key that reads as a template (an escaped "$${"), and
// about one on a rule whose when requires attributes to be set: every value of them shares
// the one counter, which a per-user or per-path rule cut short does by mistake.
func (l *loader) constantKey(r *Rule, a *hcl.Attribute) {
	if r.Key == nil || r.Key.kind != kindConst {
		return
	}
	if k := r.Key.val.AsString(); strings.Contains(k, "${") {
		l.add(warnf(a.Expr.Range(), "Constant key looks like a template", "The key is the text %q for every request: $${ writes a literal ${, so nothing in it is interpolated and every request of rule %q shares one counter. To key by a request attribute, write ${request.<name>} with a single $.", k, r.Name))
		return
	}
	if open := presenceTests(r.When); len(open) > 0 {
		attrs := "request." + strings.Join(open, " and request.")
		l.add(warnf(a.Expr.Range(), "Constant key on a rule of set values", "Rule %q applies only to requests that have %s, but its key is the same for all of them, so all their values share one counter. For a counter per value, key by it, such as key = request.%s.", r.Name, attrs, open[0]))
	}
}

// param decodes one algorithm parameter of rule r from attribute a (nil when absent). It
// returns the parameter and its possible wire values, nil when they cannot be known at
// load time. A nil parameter means an error was reported.
func (l *loader) param(r *Rule, ap algorithms.Param, a *hcl.Attribute) (*Param, [][]int64) {
	if ap.Kind == algorithms.Lease {
		if a != nil {
			l.add(errorf(a.NameRange, "Parameter set by the engine", "%s is the request's lease id, which the engine supplies for every request; remove it from the rule.", ap.Name))
		}
		return &Param{Name: ap.Name, Kind: ap.Kind, Const: []int64{0}, Range: r.DeclRange}, [][]int64{{0}}
	}
	if a == nil {
		l.add(errorf(r.DeclRange, "Missing "+ap.Name, "Rule %q uses %s, which needs %s: %s, such as %s.", r.Name, r.Algorithm.Name, ap.Name, ap.Doc, exampleParam(ap)))
		return nil, nil
	}
	want := cty.String
	switch {
	case ap.Flag:
		want = cty.Bool
	case ap.Kind == algorithms.Count:
		want = cty.Number
	}
	e, d := l.env.compile(a.Expr, requestScope, want)
	l.add(d...)
	if e == nil {
		return nil, nil
	}
	// A plugin takes its rates as written (docs/plugins.md); a built-in, reduced.
	written := !slices.Contains(algorithms.Builtin(), r.Algorithm)
	p := &Param{Name: ap.Name, Kind: ap.Kind, Range: a.Range, zero: ap.Min() == 0, flag: ap.Flag, written: written}
	if e.kind == kindConst {
		if e.val.IsNull() {
			l.add(errorf(a.Expr.Range(), "Missing "+ap.Name, "%s is null; rule %q needs a value, such as %s.", ap.Name, r.Name, exampleParam(ap)))
			return nil, nil
		}
		w, err := constWire(ap, e.val, written)
		if err != nil {
			l.add(paramError(a, ap, ap.Name, err))
			return nil, nil
		}
		p.Const = w
		return p, [][]int64{w}
	}
	p.Expr = e
	if e.kind == kindLookup {
		p.table = make(map[string][]int64, len(e.table))
		failed := false
		for _, k := range sortedKeys(e.table) {
			w, err := constWire(ap, e.table[k], written)
			if err != nil {
				l.add(paramError(a, ap, fmt.Sprintf("%s for key %q", ap.Name, k), err))
				failed = true
			}
			p.table[k] = w
		}
		w, err := constWire(ap, e.def, written)
		if err != nil {
			l.add(paramError(a, ap, "default "+ap.Name, err))
			failed = true
		}
		p.def = w
		if failed {
			return nil, nil
		}
	}
	vals, ok := possible(e)
	if !ok {
		return p, nil
	}
	var ws [][]int64
	for _, v := range vals {
		w, err := constWire(ap, v, written)
		if err != nil {
			l.add(paramError(a, ap, fmt.Sprintf("%s (it can be %s)", ap.Name, showValue(v)), err))
			return nil, nil
		}
		ws = append(ws, w)
	}
	return p, ws
}

// exampleParam shows an attribute of the parameter's kind.
func exampleParam(ap algorithms.Param) string {
	switch ap.Kind {
	case algorithms.Duration:
		return ap.Name + ` = "1m"`
	case algorithms.Rate:
		return ap.Name + ` = "10/s"`
	}
	if ap.Flag {
		return ap.Name + " = true"
	}
	return ap.Name + " = 100"
}

// paramError reports an unusable value of parameter ap; what names the value: "limit",
// `limit for key "free"`, "default limit".
func paramError(a *hcl.Attribute, ap algorithms.Param, what string, err error) *hcl.Diagnostic {
	var detail string
	var ue *unitError
	var ve valueError
	switch {
	case errors.As(err, &ue):
		detail = ue.msg
		if what != ap.Name {
			detail = fmt.Sprintf("The %s is invalid. %s", what, detail)
		}
		if ue.forms && ap.Kind == algorithms.Duration {
			detail += " " + durationForms
		} else if ue.forms {
			detail += " " + rateForms
		}
	case errors.As(err, &ve):
		detail = fmt.Sprintf("The %s %s.", what, ve)
	default:
		detail = fmt.Sprintf("The %s is invalid: %s.", what, err)
	}
	return errorf(a.Expr.Range(), "Invalid "+ap.Name, "%s", detail)
}

// valueError is a value outside its bounds, as a predicate: "must be at least 1, not 0".
type valueError string

func (e valueError) Error() string { return string(e) }

// constWire converts a constant parameter value to its wire values; written: a rate as
// written (a plugin's), else reduced (see stringWire).
func constWire(ap algorithms.Param, v cty.Value, written bool) ([]int64, error) {
	switch kind := ap.Kind; kind {
	case algorithms.Count:
		if ap.Flag {
			b, err := asBool(v)
			if err != nil {
				return nil, valueError(fmt.Sprintf("must be true or false, not %s", showValue(v)))
			}
			if b {
				return []int64{1}, nil
			}
			return []int64{0}, nil
		}
		if v.Type() == cty.Number && !v.IsNull() {
			f := v.AsBigFloat()
			if !f.IsInt() {
				return nil, valueError(fmt.Sprintf("must be a whole number, not %s", showValue(v)))
			}
			if f.Cmp(new(big.Float).SetInt64(algorithms.MaxInt)) > 0 {
				return nil, valueError(fmt.Sprintf("must be at most 2^53 (%d), not %s", int64(algorithms.MaxInt), showValue(v)))
			}
		}
		n, err := asInt(v)
		if err != nil {
			return nil, err
		}
		return countWire(n, ap.Min())
	case algorithms.Duration, algorithms.Rate:
		if v.Type() == cty.Number {
			if kind == algorithms.Duration {
				return nil, badForm("The duration %s has no unit.", showValue(v))
			}
			return nil, badForm("The rate %s has no period.", showValue(v))
		}
		s, err := asString(v)
		if err != nil {
			return nil, err
		}
		return stringWire(kind, s, written)
	}
	return []int64{0}, nil
}

// countWire checks a count: at least least (the parameter's Min: 1, or 0 for a limit that
// may admit nothing), at most 2^53.
func countWire(n, least int64) ([]int64, error) {
	if n < least {
		return nil, valueError(fmt.Sprintf("must be at least %d, not %d", least, n))
	}
	if n > algorithms.MaxInt {
		return nil, valueError(fmt.Sprintf("must be at most 2^53 (%d), not %d", int64(algorithms.MaxInt), n))
	}
	return []int64{n}, nil
}

// stringWire parses a duration or a rate: a rate as written ("6/m" is 6 and 60000000 µs)
// when written, as a plugin takes it, else reduced by the greatest common divisor of its
// amount and period (1 and 10000000), as the built-ins take it: the same rate, in the
// smallest numbers their products must keep within 2^53.
func stringWire(kind algorithms.Kind, s string, written bool) ([]int64, error) {
	if kind == algorithms.Duration {
		us, err := parseDuration(s)
		if err != nil {
			return nil, err
		}
		return []int64{us}, nil
	}
	parse := parseRate
	if written {
		parse = parseRateAsWritten
	}
	n, per, err := parse(s)
	if err != nil {
		return nil, err
	}
	return []int64{n, per}, nil
}

func showValue(v cty.Value) string {
	if v.IsNull() {
		return "null"
	}
	switch v.Type() {
	case cty.String:
		return fmt.Sprintf("%q", v.AsString())
	case cty.Number:
		return numberText(v.AsBigFloat())
	case cty.Bool:
		return fmt.Sprint(v.True())
	}
	return v.Type().FriendlyName()
}

// maxCombinations bounds the parameter combinations validated at load time.
const maxCombinations = 256

// checkCombinations validates every combination of the rule's possible parameter values
// with the algorithm's own bounds, and keeps the wire values when they are all constant.
// It reports whether every combination was checked and passed.
func (l *loader) checkCombinations(r *Rule, wires [][][]int64, ranges []hcl.Range) bool {
	n := 1
	for _, ws := range wires {
		n *= len(ws)
		if n > maxCombinations {
			return false
		}
	}
	idx := make([]int, len(wires))
	for {
		var w []int64
		for i, ws := range wires {
			w = append(w, ws[idx[i]]...)
		}
		if err := l.validateWire(r.Algorithm, w); err != nil {
			subject := r.DeclRange
			if len(ranges) > 0 {
				subject = hcl.RangeBetween(ranges[0], ranges[len(ranges)-1])
			}
			detail := err.Error()
			if n > 1 {
				detail += fmt.Sprintf(" (with %s)", describeWire(r.Algorithm, w))
			}
			if errors.Is(err, algorithms.ErrRange) {
				detail += ". The algorithms compute in exact integers below 2^53: lower the count or shorten the period"
			}
			l.add(errorf(subject, "Parameters out of range", "%s.", detail))
			return false
		}
		if n == 1 {
			r.wire = w
			return true
		}
		i := len(idx) - 1
		for i >= 0 {
			idx[i]++
			if idx[i] < len(wires[i]) {
				break
			}
			idx[i] = 0
			i--
		}
		if i < 0 {
			return true
		}
	}
}

// describeWire writes wire values back as parameters: "limit = 100, window = \"1m\"".
func describeWire(alg *algorithms.Algorithm, w []int64) string {
	var parts []string
	i := 0
	for _, p := range alg.Params {
		switch p.Kind {
		case algorithms.Count:
			if p.Flag {
				parts = append(parts, fmt.Sprintf("%s = %t", p.Name, w[i] == 1))
				break
			}
			parts = append(parts, fmt.Sprintf("%s = %d", p.Name, w[i]))
		case algorithms.Duration:
			parts = append(parts, fmt.Sprintf("%s = %q", p.Name, formatDuration(w[i])))
		case algorithms.Rate:
			parts = append(parts, fmt.Sprintf("%s = \"%d/%s\"", p.Name, w[i], formatDuration(w[i+1])))
			i++
		}
		i++
	}
	return strings.Join(parts, ", ")
}

// cost compiles a rule's cost and compares it with the capacity. It returns the smallest
// positive cost the rule charges: the least positive value of those the cost can take when
// they are known, else 1.
func (l *loader) cost(a *hcl.Attribute, r *Rule, capacity string, capValues []int64) (*Expr, int64) {
	e, d := l.env.compile(a.Expr, requestScope, cty.Number)
	l.add(d...)
	if e == nil {
		return nil, 1
	}
	if e.kind == kindConst && e.val.IsNull() {
		return nil, 1
	}
	vals, ok := possible(e)
	if !ok {
		return e, 1
	}
	var costs []int64
	for _, v := range vals {
		c, err := asInt(v)
		if err == nil && c < 0 {
			err = fmt.Errorf("%d is negative", c)
		}
		if err != nil {
			detail := fmt.Sprintf("The cost is invalid: %s.", err)
			if len(vals) > 1 {
				detail = fmt.Sprintf("The cost can be %s, and %s.", showValue(v), err)
			}
			l.add(errorf(a.Expr.Range(), "Invalid cost", "%s The cost is what a request takes from the limit: a whole number, 0 (a peek that takes nothing) or more.", detail))
			return nil, 1
		}
		costs = append(costs, c)
	}
	minPositive := int64(0)
	for _, c := range costs {
		if c > 0 && (minPositive == 0 || c < minPositive) {
			minPositive = c
		}
	}
	if minPositive == 0 {
		minPositive = 1
	}
	if alg := r.Algorithm; alg != nil && alg.MaxCost > 0 && slices.Max(costs) > alg.MaxCost {
		l.add(errorf(a.Expr.Range(), "Cost above max_cost", "A request of rule %q can cost %d, but algorithm %q takes at most %d a request (its max_cost): the engine refuses such requests. Lower the cost, or use an algorithm that takes larger costs.", r.Name, slices.Max(costs), alg.Name, alg.MaxCost))
	}
	if len(capValues) == 0 {
		return e, minPositive
	}
	minCost, maxCost := slices.Min(costs), slices.Max(costs)
	minCap, maxCap := slices.Min(capValues), slices.Max(capValues)
	switch {
	case minCost > maxCap:
		l.add(errorf(a.Expr.Range(), "Cost never fits", "A request costs %d but rule %q's %s is %d: it can never be allowed, and its retry-after is never. Lower the cost or raise %s.", minCost, r.Name, capacity, maxCap, capacity))
	case maxCost > minCap:
		l.add(warnf(a.Expr.Range(), "Cost can exceed capacity", "The cost can be %d but rule %q's %s can be %d: such requests are always denied, with no retry-after. Lower the cost or raise %s.", maxCost, r.Name, capacity, minCap, capacity))
	}
	return e, minPositive
}

// box decodes a rule's penalty box: block_for (the block a denial starts) and block_max
// (the ceiling repeat offences escalate to), constant durations.
func (l *loader) box(r *Rule, content *hcl.BodyContent) {
	bf, bm := content.Attributes["block_for"], content.Attributes["block_max"]
	if bf == nil {
		if bm != nil {
			l.add(errorf(bm.NameRange, "block_max without block_for", "block_max is the ceiling repeat offences escalate to, so it needs the block itself: add block_for, such as block_for = \"1m\" with block_max = \"1h\", or remove block_max."))
		}
		return
	}
	if r.Algorithm.HasLease() {
		l.add(errorf(bf.NameRange, "No penalty box on concurrency", "Rule %q limits requests in flight (%s), which a client cannot exceed by its rate: a request is refused only while others hold leases. A penalty box is for rates; remove block_for, or box a rate rule of the same key beside it.", r.Name, r.Algorithm.Name))
		return
	}
	length, ok := l.duration(bf, false)
	if !ok {
		return
	}
	r.Box = algorithms.Box{For: length}
	if bm == nil {
		return
	}
	ceiling, ok := l.duration(bm, false)
	if !ok {
		return
	}
	if ceiling <= length {
		l.add(errorf(bm.Expr.Range(), "block_max not above block_for", "block_max (%s) must be longer than block_for (%s): a repeat offence before block_max has passed since the last block ended gets twice that block, up to block_max. Raise block_max, or remove it for blocks of block_for every time.", formatDuration(ceiling), formatDuration(length)))
		return
	}
	r.Box.Max = ceiling
}

// Figures returns the parameters of an override of the rule (algorithms.Override) for
// request r: the rule's own for r with the parameters set names replaced, each value
// written as in a policy ("100/s" for a rate, "1m" for a duration, "200" for a count),
// and the rule's own. It checks the result as the script does
// (algorithms.Algorithm.CheckOverride): a window algorithm keeps its window.
func (ru *Rule) Figures(r Request, set map[string]string) (figures, own []int64, err error) {
	if !ru.Overridable {
		return nil, nil, fmt.Errorf("rule %q is not overridable: add overridable = true to it", ru.Name)
	}
	if own, err = ru.Wire(r); err != nil {
		return nil, nil, err
	}
	figures = slices.Clone(own)
	at := 0
	used := 0
	for i, ap := range ru.Algorithm.Params {
		n := 1
		if ap.Kind == algorithms.Rate {
			n = 2
		}
		if text, ok := set[ap.Name]; ok && ap.Kind != algorithms.Lease {
			used++
			var v cty.Value
			switch {
			case ap.Flag:
				v = cty.StringVal(text)
			case ap.Kind == algorithms.Count:
				x, perr := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
				if perr != nil {
					return nil, nil, fmt.Errorf("rule %q: %s = %q: want a whole number", ru.Name, ap.Name, text)
				}
				v = cty.NumberIntVal(x)
			default:
				v = cty.StringVal(text)
			}
			w, werr := constWire(ap, v, ru.Params[i].written)
			if werr != nil {
				return nil, nil, fmt.Errorf("rule %q: %s = %q: %v", ru.Name, ap.Name, text, werr)
			}
			copy(figures[at:at+n], w)
		}
		at += n
	}
	if used != len(set) {
		var unknown []string
		for name := range set {
			if !slices.ContainsFunc(ru.Algorithm.Params, func(p algorithms.Param) bool { return p.Name == name && p.Kind != algorithms.Lease }) {
				unknown = append(unknown, name)
			}
		}
		slices.Sort(unknown)
		return nil, nil, fmt.Errorf("rule %q: %s takes no %s; it takes %s", ru.Name, ru.Algorithm.Name, strings.Join(unknown, ", "), paramList(ru.Algorithm))
	}
	if err := ru.Algorithm.CheckOverride(own, figures); err != nil {
		return nil, nil, fmt.Errorf("rule %q: %w", ru.Name, err)
	}
	return figures, own, nil
}
