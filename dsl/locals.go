package dsl

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// decodeLocals evaluates every locals block of every file into env: constants that may
// read other locals (in any order, without cycles) and call the policy functions.
func (l *loader) decodeLocals(blocks []*hcl.Block) {
	env := l.env
	env.failed = map[string]bool{}
	env.ctx = &hcl.EvalContext{
		Variables: map[string]cty.Value{"local": cty.EmptyObjectVal},
		Functions: policyFunctions(),
	}
	defs := map[string]*hcl.Attribute{}
	var order []*hcl.Attribute
	for _, b := range blocks {
		attrs, d := b.Body.JustAttributes()
		l.add(d...)
		for _, a := range ordered(attrs) {
			if prev, ok := defs[a.Name]; ok {
				l.add(errorf(a.NameRange, "Duplicate local", "The local value %q is already defined at %s. Each local name is defined once across all policy files.", a.Name, where(prev.NameRange)))
				continue
			}
			defs[a.Name] = a
			order = append(order, a)
		}
	}
	names := sortedKeys(defs)
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(name string)
	visit = func(name string) {
		a := defs[name]
		state[name] = visiting
		stack = append(stack, name)
		defer func() {
			state[name] = done
			stack = stack[:len(stack)-1]
		}()
		expr := env.native(a.Expr)
		failed := false
		for _, t := range expr.Variables() {
			if t.RootName() != "local" {
				l.add(errorf(t.SourceRange(), "Unknown variable", "There is no variable named %q here. %s", t.RootName(), localsScope.where))
				failed = true
				continue
			}
			dep, ok := localName(t)
			if !ok {
				l.add(errorf(t.SourceRange(), "Invalid local reference", "Name the local value: local.<name>."))
				failed = true
				continue
			}
			switch {
			case defs[dep] == nil:
				l.add(errorf(t.SourceRange(), "Unknown local", "There is no local value named %q.%s", dep, suggestion(dep, names)))
				failed = true
			case state[dep] == visiting:
				l.add(errorf(t.SourceRange(), "Local value cycle", "The local values refer to each other in a cycle: %s. Break the cycle by writing one of them as a constant.", cycle(stack, dep)))
				failed = true
			case state[dep] == unvisited:
				visit(dep)
			}
			if env.failed[dep] {
				failed = true
			}
		}
		if failed {
			env.failed[name] = true
			return
		}
		env.ctx.Variables["local"] = cty.ObjectVal(env.locals)
		v, d := expr.Value(env.ctx)
		l.add(fixSuggestions(d, env.functionNames())...)
		if d.HasErrors() {
			env.failed[name] = true
			return
		}
		if hugeNumber(v) {
			l.add(errorf(a.Expr.Range(), "Number out of range", "local.%s holds a number too large or too small for a 64-bit float. Policies count requests and time in whole numbers up to 2^53.", name))
			env.failed[name] = true
			return
		}
		env.locals[name] = v
	}
	for _, a := range order {
		if state[a.Name] == unvisited {
			visit(a.Name)
		}
	}
	env.ctx.Variables["local"] = cty.ObjectVal(env.locals)
}

// cycle describes the reference cycle that closes at name.
func cycle(stack []string, name string) string {
	i := len(stack) - 1
	for i > 0 && stack[i] != name {
		i--
	}
	var b strings.Builder
	for _, s := range stack[i:] {
		fmt.Fprintf(&b, "local.%s → ", s)
	}
	fmt.Fprintf(&b, "local.%s", name)
	return b.String()
}
