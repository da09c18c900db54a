package dsl

import (
	"maps"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// nonEmpty returns the request attributes that cond being true proves non-empty:
// request.x != "", request.x == "<non-empty>", length(request.x) > 0,
// startswith(request.x, "<non-empty>") (and endswith, strcontains), combined with && (all
// of them) and || (those both sides prove). It understands native syntax only.
func nonEmpty(cond *Expr) map[string]bool {
	if cond == nil {
		return nil
	}
	syn, ok := cond.expr.(hclsyntax.Expression)
	if !ok {
		return nil
	}
	return proves(syn, cond.env)
}

func proves(x hclsyntax.Expression, env *evalEnv) map[string]bool {
	switch x := unparen(x).(type) {
	case *hclsyntax.BinaryOpExpr:
		switch x.Op {
		case hclsyntax.OpLogicalAnd:
			m := proves(x.LHS, env)
			for a := range proves(x.RHS, env) {
				if m == nil {
					m = map[string]bool{}
				}
				m[a] = true
			}
			return m
		case hclsyntax.OpLogicalOr:
			l, r := proves(x.LHS, env), proves(x.RHS, env)
			var m map[string]bool
			for a := range l {
				if r[a] {
					if m == nil {
						m = map[string]bool{}
					}
					m[a] = true
				}
			}
			return m
		case hclsyntax.OpNotEqual, hclsyntax.OpEqual:
			a, lit := x.LHS, x.RHS
			if _, ok := rootRef(a, requestScope); !ok {
				a, lit = lit, a
			}
			name, ok := rootRef(a, requestScope)
			if !ok {
				return nil
			}
			s, ok := constString(lit, env)
			if ok && ((x.Op == hclsyntax.OpNotEqual && s == "") || (x.Op == hclsyntax.OpEqual && s != "")) {
				return map[string]bool{name: true}
			}
		case hclsyntax.OpGreaterThan, hclsyntax.OpGreaterThanOrEqual:
			call, ok := unparen(x.LHS).(*hclsyntax.FunctionCallExpr)
			if !ok || (call.Name != "length" && call.Name != "strlen") || len(call.Args) != 1 {
				return nil
			}
			name, ok := rootRef(call.Args[0], requestScope)
			if !ok {
				return nil
			}
			v, ok := constValue(x.RHS, env)
			if !ok || v.Type() != cty.Number {
				return nil
			}
			bound := cty.NumberIntVal(0)
			if x.Op == hclsyntax.OpGreaterThanOrEqual {
				bound = cty.NumberIntVal(1)
			}
			if v.GreaterThanOrEqualTo(bound).True() {
				return map[string]bool{name: true}
			}
		}
	case *hclsyntax.FunctionCallExpr:
		switch x.Name {
		case "startswith", "endswith", "strcontains":
			if len(x.Args) != 2 {
				return nil
			}
			name, ok := rootRef(x.Args[0], requestScope)
			if !ok {
				return nil
			}
			if s, ok := constString(x.Args[1], env); ok && s != "" {
				return map[string]bool{name: true}
			}
		}
	}
	return nil
}

// constValue evaluates x when it reads no request attribute.
func constValue(x hcl.Expression, env *evalEnv) (cty.Value, bool) {
	if usesRoot(x, requestScope) {
		return cty.NilVal, false
	}
	for _, t := range x.Variables() {
		if t.RootName() != "local" {
			return cty.NilVal, false
		}
	}
	v, diags := x.Value(env.ctx)
	if diags.HasErrors() || !v.IsWhollyKnown() {
		return cty.NilVal, false
	}
	return v, true
}

func constString(x hcl.Expression, env *evalEnv) (string, bool) {
	v, ok := constValue(x, env)
	if !ok || v.IsNull() || v.Type() != cty.String {
		return "", false
	}
	return v.AsString(), true
}

// maxPossible bounds the size of a value set.
const maxPossible = 64

// possible returns every value e can take, when they are few and known: a constant; both
// arms of a conditional; the entries and default of a lookup in a constant table.
func possible(e *Expr) ([]cty.Value, bool) {
	if e.kind == kindConst {
		return []cty.Value{e.val}, true
	}
	if e.kind == kindLookup {
		vs := make([]cty.Value, 0, len(e.table)+1)
		for _, k := range sortedKeys(e.table) {
			vs = append(vs, e.table[k])
		}
		return append(vs, e.def), len(vs) < maxPossible
	}
	syn, ok := e.expr.(hclsyntax.Expression)
	if !ok {
		return nil, false
	}
	return possibleSyntax(syn, e.env)
}

func possibleSyntax(x hclsyntax.Expression, env *evalEnv) ([]cty.Value, bool) {
	if v, ok := constValue(x, env); ok {
		return []cty.Value{v}, true
	}
	switch x := unparen(x).(type) {
	case *hclsyntax.TemplateWrapExpr:
		return possibleSyntax(x.Wrapped, env)
	case *hclsyntax.ConditionalExpr:
		t, ok := possibleSyntax(x.TrueResult, env)
		if !ok {
			return nil, false
		}
		f, ok := possibleSyntax(x.FalseResult, env)
		if !ok || len(t)+len(f) > maxPossible {
			return nil, false
		}
		return append(t, f...), true
	case *hclsyntax.FunctionCallExpr:
		if x.Name != "lookup" || len(x.Args) != 3 || x.ExpandFinal {
			return nil, false
		}
		table, ok := constValue(x.Args[0], env)
		if !ok || table.IsNull() || !(table.Type().IsMapType() || table.Type().IsObjectType()) || table.LengthInt() >= maxPossible {
			return nil, false
		}
		def, ok := possibleSyntax(x.Args[2], env)
		if !ok {
			return nil, false
		}
		var vs []cty.Value
		for it := table.ElementIterator(); it.Next(); {
			_, v := it.Element()
			vs = append(vs, v)
		}
		return append(vs, def...), len(vs)+len(def) <= maxPossible
	}
	return nil, false
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// presenceTests returns the request attributes that cond, read as a conjunction, requires
// to be set without fixing their value: request.x != "" and length(request.x) > 0 (or
// strlen, or >= 1). Comparisons with a value, prefixes and patterns fix or group values
// on purpose, so they are not presence tests.
func presenceTests(cond *Expr) []string {
	if cond == nil {
		return nil
	}
	syn, ok := cond.expr.(hclsyntax.Expression)
	if !ok {
		return nil
	}
	var out []string
	var walk func(x hclsyntax.Expression)
	walk = func(x hclsyntax.Expression) {
		b, ok := unparen(x).(*hclsyntax.BinaryOpExpr)
		if !ok {
			return
		}
		switch b.Op {
		case hclsyntax.OpLogicalAnd:
			walk(b.LHS)
			walk(b.RHS)
			return
		case hclsyntax.OpNotEqual:
		case hclsyntax.OpGreaterThan, hclsyntax.OpGreaterThanOrEqual:
			if call, ok := unparen(b.LHS).(*hclsyntax.FunctionCallExpr); !ok || call.Name != "length" && call.Name != "strlen" {
				return
			}
		default:
			return
		}
		// Each of these is a presence test exactly when proves says it makes the
		// attribute non-empty.
		for a := range proves(b, cond.env) {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	walk(syn)
	return out
}
