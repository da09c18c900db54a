package dsl

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/zclconf/go-cty/cty"
)

// Budget is what one rule may cost Redis at worst before validate warns: the steps of
// one call (Redis commands plus the elements they touch, algorithms.Work.Steps) and the
// bytes of one key. A budget block sets it, at the top level of a file for every policy
// or in a policy for its rules, attribute by attribute:
//
//	budget {
//	  work   = 2000      # steps per call: commands issued plus elements touched
//	  memory = "64KiB"   # bytes per key: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB
//	}
type Budget struct {
	Work   int64 // steps per call
	Memory int64 // bytes per key, less its name
}

// DefaultBudget is the budget a policy has when no budget block sets it.
//
// Work: 2000 steps per call. Redis runs one script at a time, so a call stalls every
// client of the server while it runs, and a script past 5 ms is what operators alert on.
// Measured on Redis 7.0 (a shared AMD EPYC VM) inside a script (BENCHMARKS.md): removing
// a sorted-set member takes 0.12-0.16 µs, returning one to Lua 0.6-0.7 µs, building and
// adding one 1.2-1.7 µs, and a command 0.5-1 µs; 2000 steps of the costliest kind take
// 2.5-3.4 ms there, and 5 ms on a server half as fast again.
//
// Memory: 64 KiB per key. The algorithms that keep counters take about 100 bytes a key,
// and limits are kept per client, so keys are counted in millions: at 64 KiB a million
// keys is 64 GiB. A sorted set of one entry per request passes it at about 360 entries.
var DefaultBudget = Budget{Work: 2000, Memory: 64 << 10}

var budgetSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "work"}, {Name: "memory"}}}

// decodeBudgets reads the top-level budget blocks (at most one across the files) into
// l.budget, which starts as DefaultBudget.
func (l *loader) decodeBudgets(blocks []*hcl.Block) {
	l.budget = DefaultBudget
	for i, b := range blocks {
		if i > 0 {
			l.add(errorf(b.DefRange, "Duplicate budget", "A budget is already set at %s. The files have one top-level budget block, for every policy; a policy sets its own in a budget block of its own.", where(blocks[0].DefRange)))
			continue
		}
		l.budget = l.decodeBudget(b, l.budget)
	}
}

// decodeBudget reads a budget block over base: the attributes it sets replace base's.
func (l *loader) decodeBudget(b *hcl.Block, base Budget) Budget {
	content, d := b.Body.Content(budgetSchema)
	l.add(d...)
	if a := content.Attributes["work"]; a != nil {
		e, d := l.env.compile(a.Expr, constScope, cty.Number)
		l.add(d...)
		switch {
		case e == nil:
		case e.kind != kindConst || e.val.IsNull():
			l.add(errorf(a.Expr.Range(), "Invalid budget", "work must be a constant: the most steps (Redis commands plus the elements they touch) one call of a rule may take, such as work = 2000."))
		default:
			f := e.val.AsBigFloat()
			n, acc := f.Int64()
			if !f.IsInt() || acc != big.Exact || n < 1 {
				l.add(errorf(a.Expr.Range(), "Invalid budget", "work is %s; it must be a whole number of at least 1: the most steps (Redis commands plus the elements they touch) one call of a rule may take, such as work = 2000.", showValue(e.val)))
			} else {
				base.Work = n
			}
		}
	}
	if a := content.Attributes["memory"]; a != nil {
		e, d := l.env.compile(a.Expr, constScope, cty.DynamicPseudoType)
		l.add(d...)
		switch {
		case e == nil:
		case e.kind != kindConst || e.val.IsNull():
			l.add(errorf(a.Expr.Range(), "Invalid budget", "memory must be a constant: the most bytes one key of a rule may take, such as memory = \"64KiB\"."))
		default:
			n, err := bytesValue(e.val)
			if err != nil {
				l.add(errorf(a.Expr.Range(), "Invalid budget", "%s %s", err, byteForms))
			} else {
				base.Memory = n
			}
		}
	}
	return base
}

const byteForms = `Write a size as a whole number of bytes, or a number followed by a unit, such as "512B", "64KiB", "1.5MiB" or "100KB": B, KB, MB, GB are powers of 1000, KiB, MiB, GiB powers of 1024.`

var byteUnits = []struct {
	name  string
	bytes int64
}{
	{"B", 1}, {"KB", 1000}, {"MB", 1000_000}, {"GB", 1000_000_000}, {"TB", 1000_000_000_000},
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
}

// bytesValue reads a memory budget: a number of bytes, or a string such as "64KiB".
func bytesValue(v cty.Value) (int64, error) {
	if v.Type() == cty.Number {
		f := v.AsBigFloat()
		n, acc := f.Int64()
		if !f.IsInt() || acc != big.Exact || n < 1 {
			return 0, fmt.Errorf("The size %s is not a whole number of bytes of at least 1.", showValue(v))
		}
		return n, nil
	}
	if v.Type() != cty.String {
		return 0, fmt.Errorf("The size is %s, not a number or a string.", v.Type().FriendlyName())
	}
	return parseBytes(v.AsString())
}

// parseBytes parses "64KiB", "1.5MiB", "100KB", "512B" or "2048".
func parseBytes(s string) (int64, error) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, unit := s[:i], s[i:]
	if num == "" {
		return 0, fmt.Errorf("The size %q does not start with a number.", s)
	}
	mult := int64(1)
	if unit != "" {
		var names []string
		found := false
		for _, u := range byteUnits {
			names = append(names, u.name)
			if u.name == unit {
				mult, found = u.bytes, true
			}
		}
		if !found {
			return 0, fmt.Errorf("The size %q has the unknown unit %q.%s", s, unit, suggestion(unit, names))
		}
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("The size %q is not a number.", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() || r.Sign() < 1 || !r.Num().IsInt64() {
		return 0, fmt.Errorf("The size %q is not a whole number of bytes of at least 1.", s)
	}
	return r.Num().Int64(), nil
}

// ruleWork computes r.Work, the worst case of r on Redis over every combination of its
// possible parameter values wires, for requests whose smallest positive cost is minCost,
// and warns when it passes budget. An error of a plugin's work declaration is reported
// at the rule.
func (l *loader) ruleWork(r *Rule, wires [][][]int64, minCost int64, budget Budget) {
	n := 1
	for _, ws := range wires {
		n *= len(ws)
		if n > maxCombinations {
			return
		}
	}
	var worst algorithms.Work
	var params []int64 // the combination of the worst steps, for the warning
	idx := make([]int, len(wires))
	for {
		var w []int64
		for i, ws := range wires {
			w = append(w, ws[idx[i]]...)
		}
		wk, ok, err := r.Algorithm.WorkOf(w, algorithms.Costs{Min: minCost})
		if err != nil {
			l.add(errorf(r.DeclRange, "Invalid work", "Algorithm %q's work block cannot be computed for rule %q's parameters (%s): %s.", r.Algorithm.Name, r.Name, describeWire(r.Algorithm, w), strings.TrimPrefix(err.Error(), r.Algorithm.Name+"'s work: ")))
			return
		}
		if !ok {
			return
		}
		if params == nil || wk.Steps() > worst.Steps() || wk.Memory > worst.Memory {
			params = w
		}
		worst = worst.Max(wk)
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
			break
		}
	}
	if r.Box.For > 0 {
		// A penalty box reads its block (a GET of one string) and an offence writes it (a
		// SET): its key is a small string of its own, not counted in the rule key's memory.
		worst.Commands += 2
		worst.Elements += 2
	}
	if r.Overridable {
		// An override is read with one GET of a small string of its own; while one that
		// ends is in force, a write keeps the rule's key past its end (a PEXPIRE).
		worst.Commands += 2
		worst.Elements++
	}
	if r.Lists.Any() {
		// Each list is read with one EXISTS of a small key of its own.
		if r.Lists.Exempt != "" {
			worst.Commands++
			worst.Elements++
		}
		if r.Lists.Deny != "" {
			worst.Commands++
			worst.Elements++
		}
	}
	r.Work = &worst
	overWork, overMemory := worst.Steps() > budget.Work, worst.Memory > budget.Memory
	if !overWork && !overMemory {
		return
	}
	what := r.Algorithm.Name
	if n == 1 {
		what += " " + r.Describe(params)
	}
	if minCost > 1 {
		what += fmt.Sprintf(", requests of cost %d or more", minCost)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Rule %q (%s) is past its budget on Redis, in the worst case.", r.Name, what)
	if overWork {
		fmt.Fprintf(&b, " One call may issue %d Redis commands that touch %d elements: %d steps, past the budget of %d per call; Redis serves no other client while a script runs.", worst.Commands, worst.Elements, worst.Steps(), budget.Work)
	}
	if overMemory {
		fmt.Fprintf(&b, " Its key may hold %d entries (a %s), %s, past the budget of %s per key.", worst.Entries, worst.Type, algorithms.FormatBytes(worst.Memory), algorithms.FormatBytes(budget.Memory))
	}
	if fix := r.Algorithm.Complexity.Fix; fix != "" {
		b.WriteString(" " + strings.TrimSuffix(fix, ".") + ".")
	}
	fmt.Fprintf(&b, " If the rule must stay as it is, raise the budget in its policy: budget { work = %d, memory = %q }.", max(budget.Work, worst.Steps()), bytesText(max(budget.Memory, worst.Memory)))
	l.add(warnf(r.DeclRange, "Rule past its Redis budget", "%s", b.String()))
}

// bytesText writes n as a budget's memory, rounded up to a whole KiB or MiB.
func bytesText(n int64) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatInt((n+1<<20-1)>>20, 10) + "MiB"
	case n >= 1<<10:
		return strconv.FormatInt((n+1<<10-1)>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10) + "B"
}
