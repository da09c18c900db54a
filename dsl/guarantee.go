package dsl

import (
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// A plugin states what it guarantees in a guarantee block, and rlctl verify holds it to
// exactly that:
//
//	guarantee "window" {         # or "rate", "in_flight", "none"
//	  amount = param.limit       # the cost allowed …
//	  window = param.window      # … in every interval shorter than this
//	  bound  = 2                 # optional: may reach 2× by design (default 1: exact)
//	  why    = "…"               # required with a bound above 1
//	  precision {                # optional: how late answers may be (default exact)
//	    retry_after = "1ms"
//	    reset_after = "1ms"
//	    ttl         = "1s"
//	    resolution  = "1ms"      # its clock's tick: judged a tick either way
//	  }
//	}
//
// A further guarantee block (a window or a rate, after a window or a rate) states another
// limit the algorithm keeps at once, such as a month beside a minute; the first is the one
// whose amount the script reports, and holds the precision.
//
// The figures are expressions over param.NAME: a count reads as its number, a duration as
// its length in microseconds, a rate as {amount, period} with the period in
// microseconds. Constants may be written as in a rule ("1m", "10/s").

// guaranteeAttrs are each shape's figures, in the order the docs list them; every shape
// also takes bound and why.
var guaranteeAttrs = map[algorithms.Shape][]figure{
	algorithms.ShapeWindow: {
		{name: "amount", kind: algorithms.Count, doc: "the cost allowed in every interval shorter than window"},
		{name: "window", kind: algorithms.Duration, doc: "the interval"},
	},
	algorithms.ShapeRate: {
		{name: "burst", kind: algorithms.Count, doc: "the cost allowed at once"},
		{name: "rate", kind: algorithms.Rate, doc: "what is earned back per period"},
	},
	algorithms.ShapeInFlight: {
		{name: "amount", kind: algorithms.Count, doc: "the most cost held at once"},
		{name: "ttl", kind: algorithms.Duration, doc: "how long an unreleased lease counts"},
	},
	algorithms.ShapeNone: nil,
}

// figure is one attribute of a guarantee block.
type figure struct {
	name string
	kind algorithms.Kind
	doc  string
}

var precisionSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "retry_after"}, {Name: "reset_after"}, {Name: "ttl"}, {Name: "resolution"},
}}

// guaranteeFuncs are the functions a guarantee's expressions may call.
var guaranteeFuncs = map[string]function.Function{
	"min":   stdlib.MinFunc,
	"max":   stdlib.MaxFunc,
	"ceil":  stdlib.CeilFunc,
	"floor": stdlib.FloorFunc,
}

// guaranteeExample is a guarantee block for alg, written from its parameters' kinds: the
// hint of a missing block. It is only a suggestion; nothing reads the names.
func guaranteeExample(alg *algorithms.Algorithm) string {
	var count, dur, rate string
	for _, p := range alg.Params {
		switch {
		case p.Kind == algorithms.Count && count == "":
			count = p.Name
		case p.Kind == algorithms.Duration && dur == "":
			dur = p.Name
		case p.Kind == algorithms.Rate && rate == "":
			rate = p.Name
		}
	}
	block := func(shape, a, x, b, y string) string {
		return fmt.Sprintf("guarantee %q {\n  %s = param.%s\n  %s = param.%s\n}", shape, a, x, b, y)
	}
	switch {
	case count != "" && rate != "":
		return block("rate", "burst", count, "rate ", rate)
	case count != "" && dur != "":
		return block("window", "amount", count, "window", dur)
	}
	return block("window", "amount", "limit", "window", "window")
}

// pluginGuarantees decodes a plugin's guarantee blocks into alg.Guarantee: the first is
// the statement whose amount the script reports as the limit, with the precision; each
// further one (a window or a rate) is a statement the algorithm keeps at once, in
// Guarantee.Also. alg.Params must be decoded. It reports false when a block has errors.
func (l *loader) pluginGuarantees(bs []*hcl.Block, alg *algorithms.Algorithm) bool {
	var g algorithms.Guarantee
	var figs []figure
	var exprs []hcl.Expression
	ok := true
	for i, b := range bs {
		gi, fi, ei, good := l.pluginGuarantee(b, alg, i == 0)
		switch {
		case !good:
			ok = false
		case i == 0:
			g, figs, exprs = gi, fi, ei
		case gi.Shape != algorithms.ShapeWindow && gi.Shape != algorithms.ShapeRate:
			l.add(errorf(b.LabelRanges[0], "Invalid further guarantee", "A further guarantee block states another limit the algorithm keeps at once (a multi-period limit: a window per period), so it is a window or a rate, not %q. The first block, at %s, states the limit the script reports.", gi.Shape, where(bs[0].DefRange)))
			ok = false
		case g.Shape == algorithms.ShapeNone || g.Shape == algorithms.ShapeInFlight:
			l.add(errorf(b.DefRange, "Invalid further guarantee", "The first guarantee, at %s, is %q: further statements go with a window or a rate, the limit the script reports.", where(bs[0].DefRange), g.Shape))
			ok = false
		default:
			g.Also = append(g.Also, gi)
		}
	}
	if !ok {
		return false
	}
	if len(g.Also) == 0 {
		g.Share = shareSlots(alg, figs, exprs)
	}
	alg.Guarantee = g
	markCapacity(alg, figs, exprs)
	return true
}

// pluginGuarantee decodes one guarantee block, with its figures and their expressions;
// first says whether it is the first, the one that may have a precision block.
func (l *loader) pluginGuarantee(b *hcl.Block, alg *algorithms.Algorithm, first bool) (algorithms.Guarantee, []figure, []hcl.Expression, bool) {
	var none algorithms.Guarantee
	shapeName := b.Labels[0]
	var shape algorithms.Shape = -1
	var names []string
	for _, s := range algorithms.Shapes {
		names = append(names, s.String())
		if s.String() == shapeName {
			shape = s
		}
	}
	if shape < 0 {
		l.add(errorf(b.LabelRanges[0], "Unknown guarantee", "%q is not a guarantee.%s Use %s: window is at most amount in every interval shorter than window; rate is at most burst plus what rate earns over an interval; in_flight is at most amount held at once; none states no limit.", shapeName, suggestion(shapeName, names), quoteList(names)))
		return none, nil, nil, false
	}
	figs := guaranteeAttrs[shape]
	schema := &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "bound"}, {Name: "why"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "precision"}},
	}
	for _, f := range figs {
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: f.name, Required: true})
	}
	content, d := b.Body.Content(schema)
	l.add(d...)
	if d.HasErrors() {
		return none, nil, nil, false
	}
	g := algorithms.Guarantee{Shape: shape, Bound: algorithms.Exact}
	ok := true
	exprs := make([]hcl.Expression, len(figs))
	for i, f := range figs {
		a := content.Attributes[f.name]
		exprs[i] = a.Expr
		if !l.guaranteeRefs(a, alg) {
			ok = false
			continue
		}
		// Type-check on sample values; the range is checked per rule (see checkGuarantee).
		sample := make([]int64, alg.WireLen())
		for j := range sample {
			sample[j] = 1_000_000
		}
		if _, err := evalFigure(a.Expr, f.kind, alg, sample); err != nil {
			l.add(errorf(a.Expr.Range(), "Invalid guarantee", "%s (%s): %s", f.name, f.doc, strings.TrimSuffix(err.Error(), ".")+"."))
			ok = false
		}
	}
	if a := content.Attributes["bound"]; a != nil {
		if r, good := l.guaranteeBound(a); good {
			g.Bound = r
		} else {
			ok = false
		}
	}
	if a := content.Attributes["why"]; a != nil {
		g.Why, _ = l.constString(a)
	}
	if !g.Bound.IsExact() && g.Why == "" {
		l.add(errorf(content.Attributes["bound"].Range, "Bound needs a reason", "A guarantee that may reach %s× its limit says why, in one sentence that verify's reports quote: why = \"a fixed window lets a burst straddle the window boundary\".", g.Bound))
		ok = false
	}
	if shape == algorithms.ShapeNone && content.Attributes["bound"] != nil {
		l.add(errorf(content.Attributes["bound"].Range, "Bound without a limit", `guarantee "none" states no limit, so it has no bound. Remove bound, or declare the limit the algorithm keeps.`))
		ok = false
	}
	for i, pb := range content.Blocks {
		if !first {
			l.add(errorf(pb.DefRange, "Precision of a further guarantee", "The precision of the algorithm's answers goes in its first guarantee block; the further ones state more limits it keeps."))
			ok = false
			continue
		}
		if i > 0 {
			l.add(errorf(pb.DefRange, "Duplicate precision", "A guarantee has one precision block."))
			ok = false
			continue
		}
		if p, good := l.guaranteePrecision(pb); good {
			g.Precision = p
		} else {
			ok = false
		}
	}
	if !ok {
		return none, nil, nil, false
	}
	if shape != algorithms.ShapeNone {
		g.Terms = func(w []int64) (algorithms.Terms, error) { return termsOf(shape, figs, exprs, alg, w) }
	}
	return g, figs, exprs, true
}

// shareSlots returns the wire slots of a guarantee's amount (or burst) and rate when each
// is a plain reference to a parameter of its kind, so a policy's local_share can scale
// them (algorithms.Algorithm.Share); nil otherwise, or for "none".
func shareSlots(alg *algorithms.Algorithm, figs []figure, exprs []hcl.Expression) *algorithms.Slots {
	if len(figs) == 0 {
		return nil
	}
	slot := func(e hcl.Expression, kind algorithms.Kind) int {
		tr, d := hcl.AbsTraversalForExpr(e)
		if d.HasErrors() || len(tr) != 2 {
			return -1
		}
		attr, ok := tr[1].(hcl.TraverseAttr)
		if !ok {
			return -1
		}
		at := 0
		for _, p := range alg.Params {
			if p.Name == attr.Name {
				if p.Kind != kind {
					return -1
				}
				return at
			}
			at++
			if p.Kind == algorithms.Rate {
				at++
			}
		}
		return -1
	}
	s := &algorithms.Slots{Amount: slot(exprs[0], algorithms.Count), Rate: -1}
	if figs[1].kind == algorithms.Rate {
		if s.Rate = slot(exprs[1], algorithms.Rate); s.Rate < 0 {
			return nil
		}
	}
	if s.Amount < 0 {
		return nil
	}
	return s
}

// markCapacity sets Param.Capacity on the count parameter that a guarantee's amount (or
// burst) is, when it is a plain reference to one: a cost above it can never pass, which
// validate checks against rules' costs as it does for built-ins.
func markCapacity(alg *algorithms.Algorithm, figs []figure, exprs []hcl.Expression) {
	for i, f := range figs {
		if f.kind != algorithms.Count {
			continue
		}
		tr, d := hcl.AbsTraversalForExpr(exprs[i])
		if d.HasErrors() || len(tr) != 2 {
			continue
		}
		if attr, ok := tr[1].(hcl.TraverseAttr); ok {
			for j := range alg.Params {
				if alg.Params[j].Name == attr.Name && alg.Params[j].Kind == algorithms.Count {
					alg.Params[j].Capacity = true
				}
			}
		}
	}
}

// guaranteeRefs checks that a figure refers only to param.NAME of alg's parameters.
func (l *loader) guaranteeRefs(a *hcl.Attribute, alg *algorithms.Algorithm) bool {
	var names []string
	for _, p := range alg.Params {
		if p.Kind != algorithms.Lease {
			names = append(names, p.Name)
		}
	}
	ok := true
	for _, tr := range a.Expr.Variables() {
		root := tr.RootName()
		if root != "param" {
			l.add(errorf(tr.SourceRange(), "Unknown reference", "A guarantee can refer only to the algorithm's parameters, as param.NAME (it has %s).%s", paramList(alg), suggestion(root, []string{"param"})))
			ok = false
			continue
		}
		var name string
		if len(tr) > 1 {
			if at, isAttr := tr[1].(hcl.TraverseAttr); isAttr {
				name = at.Name
			}
		}
		if !slices.Contains(names, name) {
			l.add(errorf(tr.SourceRange(), "Unknown parameter", "%q is not a parameter of algorithm %q.%s It has %s: refer to them as param.NAME.", name, alg.Name, suggestion(name, names), paramList(alg)))
			ok = false
		}
	}
	return ok
}

// guaranteeBound decodes bound: a constant number of at least 1, kept exact.
func (l *loader) guaranteeBound(a *hcl.Attribute) (algorithms.Ratio, bool) {
	v, d := a.Expr.Value(nil)
	l.add(d...)
	if d.HasErrors() {
		return algorithms.Ratio{}, false
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.Number {
		l.add(errorf(a.Expr.Range(), "Invalid bound", "bound is a constant number of at least 1: the factor of the limit the algorithm may reach by design, such as 2 for a fixed window's boundary burst."))
		return algorithms.Ratio{}, false
	}
	r, _ := v.AsBigFloat().Rat(nil)
	if r == nil || r.Cmp(big.NewRat(1, 1)) < 0 || r.Cmp(big.NewRat(1000, 1)) > 0 || !r.Num().IsInt64() || !r.Denom().IsInt64() || r.Denom().Int64() > 1000 {
		l.add(errorf(a.Expr.Range(), "Invalid bound", "bound must be between 1 and 1000 with at most three decimals (%s). 1 means exact, the default; 2 allows twice the limit, as a fixed window's boundary burst does.", v.AsBigFloat().Text('g', 10)))
		return algorithms.Ratio{}, false
	}
	return algorithms.Ratio{Num: r.Num().Int64(), Den: r.Denom().Int64()}, true
}

// guaranteePrecision decodes a precision block: constant durations.
func (l *loader) guaranteePrecision(b *hcl.Block) (algorithms.Precision, bool) {
	content, d := b.Body.Content(precisionSchema)
	l.add(d...)
	var p algorithms.Precision
	ok := !d.HasErrors()
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"retry_after", &p.RetryAfter}, {"reset_after", &p.ResetAfter}, {"ttl", &p.TTL}, {"resolution", &p.Resolution}} {
		name, dst := f.name, f.dst
		a := content.Attributes[name]
		if a == nil {
			continue
		}
		s, good := l.constString(a)
		if !good {
			ok = false
			continue
		}
		us, err := parsePrecision(s)
		if err != nil {
			l.add(errorf(a.Expr.Range(), "Invalid precision", "%s: %s", name, err))
			ok = false
			continue
		}
		*dst = us
	}
	return p, ok
}

// paramObject is the param object a guarantee's expressions see for wire values w.
func paramObject(alg *algorithms.Algorithm, w []int64) cty.Value {
	vals := map[string]cty.Value{}
	i := 0
	for _, p := range alg.Params {
		switch p.Kind {
		case algorithms.Rate:
			vals[p.Name] = cty.ObjectVal(map[string]cty.Value{"amount": cty.NumberIntVal(w[i]), "period": cty.NumberIntVal(w[i+1])})
			i++
		case algorithms.Lease:
		default:
			vals[p.Name] = cty.NumberIntVal(w[i])
		}
		i++
	}
	return cty.ObjectVal(vals)
}

// evalFigure evaluates one figure for wire values w: a count or a duration as a whole
// number (µs for a duration; a string constant is parsed as a duration), a rate as its
// amount and period (an object {amount, period}, or a string such as "10/s").
func evalFigure(e hcl.Expression, kind algorithms.Kind, alg *algorithms.Algorithm, w []int64) ([2]int64, error) {
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"param": paramObject(alg, w)}, Functions: guaranteeFuncs}
	return evalFigureIn(e, kind, ctx)
}

// evalFigureIn is evalFigure in the variables and functions of ctx.
func evalFigureIn(e hcl.Expression, kind algorithms.Kind, ctx *hcl.EvalContext) ([2]int64, error) {
	v, d := e.Value(ctx)
	if d.HasErrors() {
		var msgs []string
		for _, x := range d {
			msgs = append(msgs, strings.TrimSuffix(x.Detail, "."))
		}
		return [2]int64{}, fmt.Errorf("it cannot be evaluated: %s", strings.Join(msgs, "; "))
	}
	if v.IsNull() || !v.IsKnown() {
		return [2]int64{}, fmt.Errorf("it is null")
	}
	whole := func(v cty.Value, what string) (int64, error) {
		if v.Type() != cty.Number {
			return 0, fmt.Errorf("it is %s, want %s", v.Type().FriendlyName(), what)
		}
		f := v.AsBigFloat()
		n, acc := f.Int64()
		if acc != big.Exact || !f.IsInt() {
			return 0, fmt.Errorf("it is %s, not a whole number: use floor or ceil", f.Text('g', 12))
		}
		return n, nil
	}
	switch kind {
	case algorithms.Rate:
		if v.Type() == cty.String {
			n, per, err := parseRate(v.AsString())
			return [2]int64{n, per}, err
		}
		if !v.Type().IsObjectType() || !v.Type().HasAttribute("amount") || !v.Type().HasAttribute("period") {
			return [2]int64{}, fmt.Errorf("it is %s, want a rate: a rate parameter (param.NAME) or a constant such as \"10/s\"", v.Type().FriendlyName())
		}
		n, err := whole(v.GetAttr("amount"), "a number")
		if err != nil {
			return [2]int64{}, err
		}
		per, err := whole(v.GetAttr("period"), "a number")
		return [2]int64{n, per}, err
	case algorithms.Duration:
		if v.Type() == cty.String {
			us, err := parseDuration(v.AsString())
			return [2]int64{us}, err
		}
		n, err := whole(v, "a duration: a duration parameter, a number of microseconds or a constant such as \"1m\"")
		return [2]int64{n}, err
	default:
		n, err := whole(v, "a number")
		return [2]int64{n}, err
	}
}

// termsOf evaluates a guarantee's figures for wire values w.
func termsOf(shape algorithms.Shape, figs []figure, exprs []hcl.Expression, alg *algorithms.Algorithm, w []int64) (algorithms.Terms, error) {
	var vals [][2]int64
	for i, f := range figs {
		v, err := evalFigure(exprs[i], f.kind, alg, w)
		if err != nil {
			return algorithms.Terms{}, fmt.Errorf("%s: %w", f.name, err)
		}
		vals = append(vals, v)
	}
	switch shape {
	case algorithms.ShapeRate:
		return algorithms.Terms{Amount: vals[0][0], Rate: vals[1][0], Period: vals[1][1]}, nil
	default:
		return algorithms.Terms{Amount: vals[0][0], Interval: vals[1][0]}, nil
	}
}
