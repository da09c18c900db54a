package algorithms

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Compiled is a rule written into a script (see Assemble): its algorithm, shadow flag and
// constant parameters become constants of the script, so a call names the rule by Index
// and sends only its cost and the parameter values that vary per request. The server then
// parses no algorithm name, no flags and no constant.
type Compiled struct {
	// Index is the rule's place in Script.Rules, from 1; Assemble sets it.
	Index     int
	Algorithm *Algorithm
	Shadow    bool
	// Box is the rule's penalty box, a constant of the script; the zero Box is none.
	Box Box
	// Overridable rules read their key's override (Rule.Overridable); built-ins only.
	Overridable bool
	// Lists are the rule's exempt and deny lists, constants of the script; the zero
	// Lists is none.
	Lists Lists
	// Calendar rules count in calendar periods (Rule.Calendar): each call sends its Span.
	Calendar bool
	// Params holds Algorithm.WireLen() wire values; the values at Vary positions are
	// placeholders (0).
	Params []int64
	// Vary lists, in increasing order, the wire positions a call sends: the parameters
	// evaluated per request, and every Lease slot.
	Vary []int

	name any // "@<Index>" as an ARGV value, set by Assemble
}

// check returns a copy of c after checking it against the script's algorithms: a known
// algorithm, the right number of values, every Lease slot in Vary, and constants that
// Validate accepts when nothing varies but leases.
func (c *Compiled) check(algs []*Algorithm) (*Compiled, error) {
	if c == nil || c.Algorithm == nil {
		return nil, fmt.Errorf("no algorithm")
	}
	if !slices.Contains(algs, c.Algorithm) {
		return nil, fmt.Errorf("algorithm %q is not in the script", c.Algorithm.Name)
	}
	if err := c.Box.check(); err != nil {
		return nil, err
	}
	if err := c.Lists.check(); err != nil {
		return nil, err
	}
	if c.Overridable && !c.Algorithm.Overridable() {
		return nil, fmt.Errorf("%s takes no overrides", c.Algorithm.Name)
	}
	if c.Calendar && !c.Algorithm.Calendared() {
		return nil, fmt.Errorf("%s takes no calendar", c.Algorithm.Name)
	}
	if len(c.Params) != c.Algorithm.WireLen() {
		return nil, fmt.Errorf("%s takes %d parameter values, got %d", c.Algorithm.Name, c.Algorithm.WireLen(), len(c.Params))
	}
	out := *c
	out.Params = slices.Clone(c.Params)
	out.Vary = slices.Clone(c.Vary)
	for i, v := range out.Vary {
		if v < 0 || v >= len(out.Params) || i > 0 && v <= out.Vary[i-1] {
			return nil, fmt.Errorf("varying positions %v: want increasing positions below %d", c.Vary, len(c.Params))
		}
	}
	onlyLeases := true
	for i := range out.Params {
		lease, varies := c.Algorithm.IsLeaseSlot(i), slices.Contains(out.Vary, i)
		if lease && !varies {
			return nil, fmt.Errorf("%s's lease (value %d) must vary per call", c.Algorithm.Name, i+1)
		}
		if varies {
			out.Params[i] = 0
			onlyLeases = onlyLeases && lease
		}
	}
	if onlyLeases {
		if err := c.Algorithm.Validate(out.Params); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

// IsBuiltin reports whether a is one of the built-in algorithms (not a plugin).
func IsBuiltin(a *Algorithm) bool { return slices.Contains(builtin, a) }

// compiledRules writes compiled_rule(name), which returns the compiled rule a call names
// "@k" as {algorithm name, shadow, parameters, varying positions, shared, builtin}, with
// box = {length, ceiling} for a rule with a penalty box, ovr = true for an overridable
// one, lists = {exempt list or false, deny list or false, deny retry} for one with
// lists and cal = true for one with a calendar (its calls send the bounds): shared when nothing varies and
// the algorithm is a built-in, whose functions never modify their parameters, so every
// call may use the same table. The records are built on first use and
// kept under the name "@k" (the dispatcher adds the built-in's functions to them): once per
// call under EVAL, once per library load under FCALL, where a call then finds its rule in
// one table lookup. A name other than "@k" with k a rule's index in decimal is refused and
// never kept, so calls cannot grow the cache. Rules are found by a balanced tree of
// comparisons, so a plan's size costs log2(rules) comparisons on first use. ready holds the
// records that are complete (see dispatch.lua's rule_at), by the same names.
func compiledRules(rules []*Compiled) string {
	var b strings.Builder
	b.WriteString("local compiled, ready = {}, {}\nlocal function compiled_rule(name)\nlocal c = compiled[name]\nif c then\nreturn c\nend\n")
	if len(rules) > 0 {
		b.WriteString("local k = tonumber(string.sub(name, 2))\nif k == nil or k % 1 ~= 0 or k < 1 or k > " + strconv.Itoa(len(rules)) + " or name ~= string.format('@%d', k) then\nreturn\nend\n")
		writeRuleTree(&b, rules, 1, len(rules))
		b.WriteString("compiled[name] = c\n")
	}
	b.WriteString("return c\nend\n\n")
	return b.String()
}

// writeRuleTree writes the comparisons that set c to the record of rule k, for lo <= k <= hi.
func writeRuleTree(b *strings.Builder, rules []*Compiled, lo, hi int) {
	if lo == hi {
		fmt.Fprintf(b, "if k == %d then\nc = %s\n%send\n", lo, ruleRecord(rules[lo-1]), fastRule(rules[lo-1]))
		return
	}
	mid := (lo + hi) / 2
	fmt.Fprintf(b, "if k <= %d then\n", mid)
	writeRuleTree(b, rules, lo, mid)
	b.WriteString("else\n")
	writeRuleTree(b, rules, mid+1, hi)
	b.WriteString("end\n")
}

func ruleRecord(c *Compiled) string {
	params := make([]string, len(c.Params))
	for i, v := range c.Params {
		params[i] = strconv.FormatInt(v, 10)
	}
	vary := make([]string, len(c.Vary))
	for i, v := range c.Vary {
		vary[i] = strconv.Itoa(v + 1)
	}
	builtin := IsBuiltin(c.Algorithm)
	shared := len(c.Vary) == 0 && builtin
	box := ""
	if c.Box.For > 0 {
		box = fmt.Sprintf(", box = {%d, %d}", c.Box.For, c.Box.Max)
	}
	if c.Overridable {
		box += ", ovr = true"
	}
	if l := c.Lists; l.Any() {
		// The names match ListName: no quote or backslash to escape.
		box += fmt.Sprintf(", lists = {%s, %s, %d}", luaName(l.Exempt), luaName(l.Deny), l.DenyRetry)
	}
	if c.Calendar {
		box += ", cal = true"
	}
	return fmt.Sprintf("{'%s', %t, {%s}, {%s}, %t, %t%s}", c.Algorithm.Name, c.Shadow, strings.Join(params, ", "), strings.Join(vary, ", "), shared, builtin, box)
}

// luaName is a list's name as a Lua string literal, or false for none.
func luaName(n string) string {
	if n == "" {
		return "false"
	}
	return "'" + n + "'"
}
