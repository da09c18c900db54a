package dsl

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// A plugin states its worst case on Redis in a work block, beside its guarantee, and
// validate holds every rule using it to the policy's budget:
//
//	work "zset" {                          # the key's type: string, hash, list or zset
//	  commands = 4                         # Redis commands one call issues, at most
//	  elements = 2 * param.limit + 2       # elements they touch one by one, at most
//	  entries  = param.limit / cost.min    # elements the key holds, at most
//	  element_bytes = 40                   # optional: the longest element (default 64)
//	  fix = "…"                            # optional: how a rule past its budget needs less
//	}
//
// The figures are expressions over param.NAME, as a guarantee's are, and cost.min (the
// smallest positive cost a request charges: the rule's cost when constant, else 1) and
// cost.max (the largest: the capacity, since Engine.AllowN multiplies a rule's cost). The
// key's memory is computed from entries and element_bytes (algorithms.KeyMemory). The
// block is optional: without it the plugin's rules have no figures, compile says so and
// validate warns once, at the algorithm block.

// workFigures are a work block's count attributes, in the order the docs list them.
var workFigures = []figure{
	{name: "commands", kind: algorithms.Count, doc: "the Redis commands one call issues, at most"},
	{name: "elements", kind: algorithms.Count, doc: "the elements those commands touch one by one, at most"},
	{name: "entries", kind: algorithms.Count, doc: "the elements the key holds, at most"},
	{name: "element_bytes", kind: algorithms.Count, doc: "the longest element in bytes"},
}

// defaultElementBytes is a work block's element_bytes unless it sets one: Redis's
// threshold for its compact encodings.
const defaultElementBytes = 64

// workFuncs are the functions a work block's expressions may call.
var workFuncs = func() map[string]function.Function {
	m := map[string]function.Function{"log": stdlib.LogFunc}
	for k, f := range guaranteeFuncs {
		m[k] = f
	}
	return m
}()

// workExample is a work block for alg, guessed from the commands it lists: the hint of
// a missing block. Nothing reads it.
func workExample(alg *algorithms.Algorithm) string {
	typ, elements, entries := "string", fmt.Sprint(len(alg.Commands)), "1"
	for _, c := range alg.Commands {
		switch {
		case strings.HasPrefix(c, "Z"):
			typ, elements, entries = "zset", "2 * param.NAME / cost.min", "param.NAME / cost.min"
		case strings.HasPrefix(c, "H") && typ == "string":
			typ, elements, entries = "hash", "4", "2"
		case (strings.HasPrefix(c, "L") || strings.HasPrefix(c, "R")) && typ != "zset":
			typ, elements, entries = "list", "2 * param.NAME / cost.min", "param.NAME / cost.min"
		}
	}
	return fmt.Sprintf("work %q {\n  commands = %d\n  elements = %s\n  entries  = %s\n}", typ, len(alg.Commands), elements, entries)
}

// pluginWork decodes a plugin's work block into alg.Complexity; alg.Params must be
// decoded. It reports false when the block has errors.
func (l *loader) pluginWork(b *hcl.Block, alg *algorithms.Algorithm) bool {
	typeName := b.Labels[0]
	var typ algorithms.KeyType
	var names []string
	for _, t := range algorithms.KeyTypes {
		names = append(names, t.String())
		if t.String() == typeName {
			typ = t
		}
	}
	if typ == 0 {
		l.add(errorf(b.LabelRanges[0], "Unknown key type", "%q is not a Redis type an algorithm's key can be.%s Use %s: the type of the one key each rule keeps, from which rlctl bounds its memory.", typeName, suggestion(typeName, names), quoteList(names)))
		return false
	}
	schema := &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "fix"}}}
	for _, f := range workFigures {
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: f.name, Required: f.name != "element_bytes"})
	}
	content, d := b.Body.Content(schema)
	l.add(d...)
	if d.HasErrors() {
		return false
	}
	ok := true
	exprs := make([]hcl.Expression, len(workFigures))
	for i, f := range workFigures {
		a := content.Attributes[f.name]
		if a == nil {
			continue
		}
		exprs[i] = a.Expr
		if !l.workRefs(a, alg) {
			ok = false
			continue
		}
		// Type-check on sample values; each rule's are computed when it loads.
		sample := make([]int64, alg.WireLen())
		for j := range sample {
			sample[j] = 1_000_000
		}
		if _, err := evalWork(a.Expr, alg, sample, algorithms.Costs{Min: 1, Max: 1_000_000}); err != nil {
			l.add(errorf(a.Expr.Range(), "Invalid work", "%s (%s): %s", f.name, f.doc, strings.TrimSuffix(err.Error(), ".")+"."))
			ok = false
		}
	}
	var fix string
	if a := content.Attributes["fix"]; a != nil {
		fix, _ = l.constString(a)
	}
	if !ok {
		return false
	}
	at := b.DefRange
	alg.Complexity = algorithms.Complexity{Fix: fix, Of: func(w []int64, c algorithms.Costs) (algorithms.Work, error) {
		v := [4]int64{0, 0, 0, defaultElementBytes}
		for i, e := range exprs {
			if e == nil {
				continue
			}
			n, err := evalWork(e, alg, w, c)
			if err == nil && n < 0 {
				err = fmt.Errorf("it is %d, below 0", n)
			}
			if err != nil {
				return algorithms.Work{}, fmt.Errorf("%s (declared at %s): %w", workFigures[i].name, where(at), err)
			}
			v[i] = n
		}
		return algorithms.Work{Commands: v[0], Elements: v[1], Type: typ, Entries: v[2], Memory: algorithms.KeyMemory(typ, v[2], v[3])}, nil
	}}
	return true
}

// workRefs checks that a work figure refers only to param.NAME of alg's parameters and to
// cost.min and cost.max.
func (l *loader) workRefs(a *hcl.Attribute, alg *algorithms.Algorithm) bool {
	var names []string
	for _, p := range alg.Params {
		if p.Kind != algorithms.Lease {
			names = append(names, p.Name)
		}
	}
	ok := true
	for _, tr := range a.Expr.Variables() {
		root := tr.RootName()
		var attr string
		if len(tr) > 1 {
			if at, isAttr := tr[1].(hcl.TraverseAttr); isAttr {
				attr = at.Name
			}
		}
		switch {
		case root == "param" && !slices.Contains(names, attr):
			l.add(errorf(tr.SourceRange(), "Unknown parameter", "%q is not a parameter of algorithm %q.%s It has %s: refer to them as param.NAME.", attr, alg.Name, suggestion(attr, names), paramList(alg)))
			ok = false
		case root == "cost" && attr != "min" && attr != "max":
			l.add(errorf(tr.SourceRange(), "Unknown cost figure", "cost has min (the smallest positive cost a request charges) and max (the largest, up to the capacity): cost.min and cost.max.%s", suggestion(attr, []string{"min", "max"})))
			ok = false
		case root != "param" && root != "cost":
			l.add(errorf(tr.SourceRange(), "Unknown reference", "A work block can refer only to the algorithm's parameters, as param.NAME (it has %s), and to cost.min and cost.max.%s", paramList(alg), suggestion(root, []string{"param", "cost"})))
			ok = false
		}
	}
	return ok
}

// evalWork evaluates a work figure for wire values w and costs c: a whole number.
func evalWork(e hcl.Expression, alg *algorithms.Algorithm, w []int64, c algorithms.Costs) (int64, error) {
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{
			"param": paramObject(alg, w),
			"cost":  cty.ObjectVal(map[string]cty.Value{"min": cty.NumberIntVal(c.Min), "max": cty.NumberIntVal(c.Max)}),
		},
		Functions: workFuncs,
	}
	v, err := evalFigureIn(e, algorithms.Count, ctx)
	return v[0], err
}
