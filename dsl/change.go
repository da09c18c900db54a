package dsl

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Change is a scenario's override block: at a virtual instant, one key of an overridable
// rule of the scenario's policy gets other figures (engine.SetOverride), or its own back
// (engine.ClearOverride), as an operator would change them while the service runs.
//
//	override {
//	  at      = "2m"                              # from the scenario's start
//	  rule    = "per_user"                        # an overridable rule of the policy
//	  request = { user = "acme" }                 # the request whose key it is
//	  set     = { rate = "100/s", burst = 200 }   # absent: clear the key's override
//	  for     = "1m"                              # optional: the override then ends
//	}
//
// A scenario's list block is a Change too: at a virtual instant, the keys a request has
// for the rules naming a list go on it or off it (engine.AddToList, RemoveFromList).
//
//	list {
//	  at      = "2m"
//	  add     = "banned"                          # or remove = "banned"
//	  request = { ip = "203.0.113.9" }
//	}
type Change struct {
	At time.Duration
	// Rule is the overridable rule of an override block; nil for a list block.
	Rule *Rule
	// List is the list of a list block, Remove whether the keys go off it.
	List   string
	Remove bool
	// Request is the request whose key the override is for.
	Request map[string]string
	// Set is the figures, parameter name to value as a policy writes it; nil clears.
	Set map[string]string
	// For is how long the override lasts; 0 until cleared.
	For       time.Duration
	DeclRange hcl.Range
}

var changeSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "at", Required: true},
		{Name: "rule", Required: true},
		{Name: "request", Required: true},
		{Name: "set"},
		{Name: "for"},
	},
}

var listChangeSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "at", Required: true},
		{Name: "add"},
		{Name: "remove"},
		{Name: "request", Required: true},
	},
}

// decodeChanges reads the scenario's override and list blocks into s.Changes, in time
// order (blocks at one instant in the order written).
func (l *loader) decodeChanges(blocks hcl.Blocks, s *Scenario, policy *Policy) {
	for _, b := range blocks {
		var c *Change
		switch b.Type {
		case "override":
			c = l.decodeChange(b, s, policy)
		case "list":
			c = l.decodeListChange(b, s, policy)
		}
		if c != nil {
			s.Changes = append(s.Changes, c)
		}
	}
	slices.SortStableFunc(s.Changes, func(a, b *Change) int { return cmp.Compare(a.At, b.At) })
}

func (l *loader) decodeChange(b *hcl.Block, s *Scenario, policy *Policy) *Change {
	content, d := b.Body.Content(changeSchema)
	l.add(d...)
	if d.HasErrors() {
		return nil
	}
	c := &Change{DeclRange: b.DefRange}
	at, ok := l.changeAt(content.Attributes["at"], s, "Override after the scenario")
	c.At = at
	if a := content.Attributes["for"]; a != nil {
		us, fok := l.duration(a, false)
		c.For, ok = time.Duration(us)*time.Microsecond, ok && fok
		if content.Attributes["set"] == nil {
			l.add(errorf(a.NameRange, "for without set", "An override block without set clears the key's override, which lasts no time. Add set = { ... } for an override of %s, or remove for.", formatAttrString(l, a)))
			ok = false
		}
	}
	var set map[string]string
	req := l.constStringMap(content.Attributes["request"], "request", "{ user = \"acme\" }")
	if req == nil {
		ok = false
	}
	if a := content.Attributes["set"]; a != nil {
		if set = l.constStringMap(a, "set", "{ rate = \"100/s\", burst = 200 }"); set == nil {
			ok = false
		}
	}
	ra := content.Attributes["rule"]
	name, rok := l.constString(ra)
	if !rok || !ok || policy == nil {
		return nil
	}
	i := slices.IndexFunc(policy.Rules, func(r *Rule) bool { return r.Name == name })
	if i < 0 {
		names := make([]string, len(policy.Rules))
		for j, r := range policy.Rules {
			names[j] = r.Name
		}
		l.add(errorf(ra.Expr.Range(), "Unknown rule", "Policy %q has no rule %q.%s Its rules are %s.", policy.Name, name, suggestion(name, names), quoteList(names)))
		return nil
	}
	c.Rule, c.Request, c.Set = policy.Rules[i], req, set
	if !c.Rule.Overridable {
		l.add(errorf(ra.Expr.Range(), "Rule not overridable", "Rule %q of policy %q takes no overrides. Add overridable = true to it (its decisions then read one more key, a key's override), or change another rule.", name, policy.Name))
		return nil
	}
	if set != nil {
		if _, _, err := c.Rule.Figures(mapRequest(req), set); err != nil {
			l.add(errorf(content.Attributes["set"].Expr.Range(), "Invalid override", "%v.", err))
			return nil
		}
	}
	return c
}

// changeAt reads a change's at: a duration from scenario s's start, before its end
// (summary names the diagnostic that says otherwise).
func (l *loader) changeAt(a *hcl.Attribute, s *Scenario, summary string) (time.Duration, bool) {
	us, ok := l.duration(a, true)
	if !ok {
		return 0, false
	}
	at := time.Duration(us) * time.Microsecond
	if s.Duration > 0 && at >= s.Duration {
		l.add(errorf(a.Expr.Range(), summary, "at is %s but scenario %q lasts %s, so the change never happens. Make it before %s, or lengthen the scenario's duration.", fmtUS(at), s.Name, fmtUS(s.Duration), fmtUS(s.Duration)))
		return at, false
	}
	return at, true
}

// decodeListChange reads a scenario's list block.
func (l *loader) decodeListChange(b *hcl.Block, s *Scenario, policy *Policy) *Change {
	content, d := b.Body.Content(listChangeSchema)
	l.add(d...)
	if d.HasErrors() {
		return nil
	}
	c := &Change{DeclRange: b.DefRange}
	at, ok := l.changeAt(content.Attributes["at"], s, "List change after the scenario")
	c.At = at
	add, rm := content.Attributes["add"], content.Attributes["remove"]
	a := add
	switch {
	case add == nil && rm == nil:
		l.add(errorf(b.DefRange, "List change without a list", "A list block puts the request's keys on a list or takes them off: add add = \"banned\" or remove = \"banned\"."))
		return nil
	case add != nil && rm != nil:
		l.add(errorf(rm.NameRange, "add and remove", "A list block either adds (add = ...) or removes (remove = ...); write two blocks for two changes."))
		return nil
	case rm != nil:
		a, c.Remove = rm, true
	}
	name, nok := l.constString(a)
	req := l.constStringMap(content.Attributes["request"], "request", "{ ip = \"203.0.113.9\" }")
	if !nok || req == nil || !ok || policy == nil {
		return nil
	}
	var lists []string
	for _, r := range policy.Rules {
		for _, n := range []string{r.Lists.Exempt, r.Lists.Deny} {
			if n != "" && !slices.Contains(lists, n) {
				lists = append(lists, n)
			}
		}
	}
	if !slices.Contains(lists, name) {
		detail := fmt.Sprintf("No rule of policy %q names list %q, so the change would change nothing.", policy.Name, name)
		if len(lists) > 0 {
			detail += suggestion(name, lists) + " Its rules' lists are " + quoteList(lists) + "."
		} else {
			detail += " Add exempt = list(\"...\") or deny = list(\"...\") to a rule."
		}
		l.add(errorf(a.Expr.Range(), "Unknown list", "%s", detail))
		return nil
	}
	c.List, c.Request = name, req
	return c
}

// constStringMap reads an object of constant values written out in place, each as a
// string (a number as its decimal form), or reports why it cannot and returns nil.
func (l *loader) constStringMap(a *hcl.Attribute, what, example string) map[string]string {
	pairs, d := hcl.ExprMap(a.Expr)
	if d.HasErrors() || len(pairs) == 0 {
		l.add(errorf(a.Expr.Range(), "Invalid "+what, "%s must be an object written out in place, such as %s.", what, example))
		return nil
	}
	m := map[string]string{}
	for _, kv := range pairs {
		name := hcl.ExprAsKeyword(kv.Key)
		if name == "" {
			v, d := kv.Key.Value(nil)
			if d.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.String || v.AsString() == "" {
				l.add(errorf(kv.Key.Range(), "Invalid "+what, "The names in %s are identifiers or non-empty strings.", what))
				return nil
			}
			name = v.AsString()
		}
		if _, dup := m[name]; dup {
			l.add(errorf(kv.Key.Range(), "Duplicate "+what+" name", "%q is set twice.", name))
			return nil
		}
		e, d := l.env.compile(kv.Value, constScope, cty.String)
		l.add(d...)
		if e == nil {
			return nil
		}
		if e.kind != kindConst || e.val.IsNull() {
			l.add(errorf(kv.Value.Range(), "Constant required", "%s's values must be constants.", what))
			return nil
		}
		m[name] = e.val.AsString()
	}
	return m
}

// String describes the change: "per_user for user=acme: rate=100/s burst=200 for 1m",
// "ip=203.0.113.9 on banned".
func (c *Change) String() string {
	req := ""
	for _, k := range sortedKeys(c.Request) {
		if req != "" {
			req += " "
		}
		req += fmt.Sprintf("%s=%s", k, c.Request[k])
	}
	if c.Rule == nil {
		if c.Remove {
			return fmt.Sprintf("%s off %s", req, c.List)
		}
		return fmt.Sprintf("%s on %s", req, c.List)
	}
	if c.Set == nil {
		return fmt.Sprintf("%s for %s: cleared", c.Rule.Name, req)
	}
	figures, _, err := c.Rule.Figures(mapRequest(c.Request), c.Set)
	what := fmt.Sprint(c.Set)
	if err == nil {
		what = c.Rule.Algorithm.DescribeParams(figures)
	}
	if c.For > 0 {
		return fmt.Sprintf("%s for %s: %s for %s", c.Rule.Name, req, what, fmtUS(c.For))
	}
	return fmt.Sprintf("%s for %s: %s", c.Rule.Name, req, what)
}
