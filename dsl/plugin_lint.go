package dsl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/luahost"
	"github.com/yuin/gopher-lua/ast"
	"github.com/zclconf/go-cty/cty"
)

// The plugin lint: checks of a plugin's Lua against the dispatcher's contract
// (lua/dispatch.lua) that need the whole file walked first.
//
//   - check writes nothing: the dispatcher calls every rule's check, and commit only when
//     every rule allows (a warning, at the write, when check or a local function it calls
//     runs a write command or an engine helper that writes).
//   - every command in commands is called (a warning, at the list element), unless some
//     call's command cannot be read from the source.
//   - every return of check gives 5 or 6 values, allowed 0 or 1 and no literal that cannot
//     be an integer among the first five (an error, at the return).
//
// luaChecker's walk records the calls (lintExpr) and the function each is in
// (lintFunction); lintPlugin runs the checks at the end of luaChecker.check.

// pluginLint is what luaChecker's walk records for the lint.
type pluginLint struct {
	fns   []*ast.FunctionExpr // the functions around the walk, outermost first
	calls []lintCall
	// callees are the expressions called (the f of f(...)), objects the redis of redis.x:
	// uses of call, redis.call or redis as anything else are aliases the lint cannot follow.
	callees, objects map[ast.Expr]bool
	// opaque is set when the source runs a command the walk cannot name: a command that is
	// not a constant string, or redis.call, call or a helper that runs commands used as a
	// value.
	opaque bool
}

// lintCall is a call in the plugin's source that runs commands or may reach one.
type lintCall struct {
	in     *ast.FunctionExpr // the outermost function around the call; nil at the top level
	at     *ast.FuncCallExpr
	cmd    string // a redis.call, redis.pcall or call with a constant command: the command
	helper string // a call of the engine helper that runs commands
	callee string // a call of a function the source defines at its top level, by name
}

// lintFunction records that the walk enters f; the returned function records that it
// leaves.
func (c *luaChecker) lintFunction(f *ast.FunctionExpr) func() {
	c.lint.fns = append(c.lint.fns, f)
	return func() { c.lint.fns = c.lint.fns[:len(c.lint.fns)-1] }
}

// lintExpr records e for the lint, in the scope the walk is in. The walk visits a call
// before its function and an attribute access before its object.
func (c *luaChecker) lintExpr(e ast.Expr) {
	if c.alg == nil { // reading the engine's own helpers
		return
	}
	l := &c.lint
	if l.callees == nil {
		l.callees, l.objects = map[ast.Expr]bool{}, map[ast.Expr]bool{}
	}
	switch e := e.(type) {
	case *ast.FuncCallExpr:
		l.callees[e.Func] = true
		call := lintCall{at: e}
		if len(l.fns) > 0 {
			call.in = l.fns[0]
		}
		id, _ := e.Func.(*ast.IdentExpr)
		switch {
		case c.isRedisCall(e.Func):
			s, ok := lintArg(e)
			if !ok {
				l.opaque = true // "Redis command not checkable" says so
				return
			}
			call.cmd = strings.ToUpper(s)
		case id == nil:
			return
		case !c.local(id.Value) && len(engine().helpers[id.Value]) > 0:
			call.helper = id.Value
		case c.topLevel(id.Value):
			call.callee = id.Value
		default:
			return
		}
		l.calls = append(l.calls, call)
	case *ast.AttrGetExpr:
		obj, ok := e.Object.(*ast.IdentExpr)
		if !ok || obj.Value != "redis" || c.local("redis") {
			return
		}
		l.objects[obj] = true
		key, ok := e.Key.(*ast.StringExpr)
		if !ok || (key.Value == "call" || key.Value == "pcall") && !l.callees[e] {
			l.opaque = true
		}
	case *ast.IdentExpr:
		if c.local(e.Value) || l.callees[e] {
			return
		}
		if isEngineCall(e.Value) || e.Value == "redis" && !l.objects[e] || len(engine().helpers[e.Value]) > 0 {
			l.opaque = true
		}
	}
}

// lintArg returns a command call's first argument when it is a constant string.
func lintArg(e *ast.FuncCallExpr) (string, bool) {
	if len(e.Args) == 0 {
		return "", false
	}
	s, ok := e.Args[0].(*ast.StringExpr)
	if !ok {
		return "", false
	}
	return s.Value, true
}

// topLevel reports whether name, where the walk is, is a slot (check, commit, ...) or a
// local of the source's top level.
func (c *luaChecker) topLevel(name string) bool {
	for i := len(c.scopes) - 1; i >= 0; i-- {
		if c.scopes[i][name] {
			return i <= 1
		}
	}
	return false
}

// lintPlugin runs the lint on the walked chunk.
func (c *luaChecker) lintPlugin(chunk []ast.Stmt) {
	if c.alg == nil {
		return
	}
	defs := topLevelFunctions(chunk)
	if check := defs["check"]; check != nil {
		c.lintWrites(check, defs)
		c.lintReturns(check.Stmts)
	}
	c.lintUnusedCommands()
}

// topLevelFunctions maps each name the chunk's top level assigns or declares a function
// to (function f, f = function, local function f, local f = g) to that function; for a
// name assigned more than once, the last.
func topLevelFunctions(chunk []ast.Stmt) map[string]*ast.FunctionExpr {
	vals := map[string]ast.Expr{}
	set := func(lhs []string, rhs []ast.Expr) {
		for i, n := range lhs {
			if i < len(rhs) {
				vals[n] = rhs[i]
			}
		}
	}
	for _, st := range chunk {
		switch st := st.(type) {
		case *ast.FuncDefStmt:
			if st.Name != nil && st.Name.Receiver == nil {
				if id, ok := st.Name.Func.(*ast.IdentExpr); ok {
					vals[id.Value] = st.Func
				}
			}
		case *ast.LocalAssignStmt:
			set(st.Names, st.Exprs)
		case *ast.AssignStmt:
			var names []string
			for _, e := range st.Lhs {
				id, _ := e.(*ast.IdentExpr)
				if id == nil {
					names = append(names, "")
					continue
				}
				names = append(names, id.Value)
			}
			set(names, st.Rhs)
		}
	}
	fns := map[string]*ast.FunctionExpr{}
	for n, v := range vals {
		for range 8 { // follow f = g = ... a few names deep
			id, ok := v.(*ast.IdentExpr)
			if !ok {
				break
			}
			v = vals[id.Value]
		}
		if f, ok := v.(*ast.FunctionExpr); ok {
			fns[n] = f
		}
	}
	return fns
}

// lintWrites warns about each write check can run: a write command called in check or in
// a function of the file that check calls (at any depth), or an engine helper that writes.
func (c *luaChecker) lintWrites(check *ast.FunctionExpr, defs map[string]*ast.FunctionExpr) {
	// via[f] is how check reaches f: the function that calls it and the call.
	type step struct {
		from *ast.FunctionExpr
		name string
		at   *ast.FuncCallExpr
	}
	via := map[*ast.FunctionExpr]step{check: {}}
	path := func(f *ast.FunctionExpr) string {
		var hops []string
		for f != check {
			s := via[f]
			hops = append(hops, fmt.Sprintf("%s, called at line %d", s.name, s.at.Line()))
			f = s.from
		}
		if len(hops) == 0 {
			return ""
		}
		slices.Reverse(hops)
		return " (through " + strings.Join(hops, ", then ") + ")"
	}
	queue := []*ast.FunctionExpr{check}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		for _, call := range c.lint.calls {
			if call.in != f {
				continue
			}
			switch {
			case call.cmd != "" && luahost.IsWrite(call.cmd):
				c.warnWrite(call.at, fmt.Sprintf("check runs %s here%s", call.cmd, path(f)))
			case call.helper != "":
				for _, cmd := range engine().helpers[call.helper] {
					if luahost.IsWrite(cmd) {
						c.warnWrite(call.at, fmt.Sprintf("check calls the engine's %s here%s, which runs %s", call.helper, path(f), cmd))
						break
					}
				}
			case call.callee != "":
				if g := defs[call.callee]; g != nil {
					if _, seen := via[g]; !seen {
						via[g] = step{from: f, name: call.callee, at: call.at}
						queue = append(queue, g)
					}
				}
			}
		}
	}
}

func (c *luaChecker) warnWrite(at *ast.FuncCallExpr, what string) {
	c.diags = append(c.diags, warnf(c.at(at), "Plugin check writes", "%s, but check must not write: the dispatcher calls every rule's check first and applies writes only when every rule allows, by calling commit(key, pending) with the pending value check returns. Written in check, it happens even when another rule denies the call, and on peeks (cost 0). Return what to write as check's sixth value (pending) and write it in commit; see lua/token_bucket.lua.", what))
}

// lintUnusedCommands warns about each command in commands that no call in the source runs,
// directly or through an engine helper.
func (c *luaChecker) lintUnusedCommands() {
	if c.skipCommands || c.lint.opaque {
		return
	}
	used := map[string]bool{}
	for _, call := range c.lint.calls {
		used[call.cmd] = true
		for _, cmd := range engine().helpers[call.helper] {
			used[cmd] = true
		}
	}
	for _, cmd := range c.alg.Commands {
		if used[cmd] {
			continue
		}
		at := c.lineRange(1, 0)
		if c.commandAt != nil {
			at = c.commandAt(cmd)
		}
		c.diags = append(c.diags, warnf(at, "Command never called", "Algorithm %q lists %s in commands, but its Lua never calls %s, neither directly nor through an engine helper such as expire_us. The engine script may run every listed command, so list only those called: remove it from commands, or call it.", c.alg.Name, cmd, cmd))
	}
}

// lintReturns checks the return statements of check's body, outside nested functions.
func (c *luaChecker) lintReturns(stmts []ast.Stmt) {
	for _, st := range stmts {
		switch st := st.(type) {
		case *ast.ReturnStmt:
			if problem := returnProblem(st.Exprs, c.alg != nil && algorithms.IsBuiltin(c.alg)); problem != "" {
				c.diags = append(c.diags, errorf(c.at(st), "Plugin check returns the wrong shape", "This return of check gives %s. The dispatcher denies only when allowed is 0 (so false or nil would allow), reads the first five values as integers and passes a sixth to commit: check must %s.", problem, algorithms.CheckContract))
			}
		case *ast.DoBlockStmt:
			c.lintReturns(st.Stmts)
		case *ast.WhileStmt:
			c.lintReturns(st.Stmts)
		case *ast.RepeatStmt:
			c.lintReturns(st.Stmts)
		case *ast.IfStmt:
			c.lintReturns(st.Then)
			c.lintReturns(st.Else)
		case *ast.NumberForStmt:
			c.lintReturns(st.Stmts)
		case *ast.GenericForStmt:
			c.lintReturns(st.Stmts)
		}
	}
}

// checkReturnFields names check's return values, as algorithms.CheckContract does.
var checkReturnFields = []string{"allowed", "remaining", "retry_after_us", "reset_after_us", "limit", "pending"}

// returnProblem says what is wrong with a return of check's values exprs, or "". A
// built-in's check may also return, after pending, a peek's remaining and reset (see
// algorithms' stacks.go): eight values.
func returnProblem(exprs []ast.Expr, builtin bool) string {
	n, open := len(exprs), false // open: the last value is a call or ..., which gives any number
	if n > 0 {
		switch e := exprs[n-1].(type) {
		case *ast.FuncCallExpr:
			open = !e.AdjustRet
		case *ast.Comma3Expr:
			open = !e.AdjustRet
		}
	}
	switch {
	case open && n == 1:
		return "" // a tail call: what it returns is not known here
	case open && n-1 > 6:
		return fmt.Sprintf("at least %d values", n-1)
	case !open && n == 1:
		return "1 value"
	case !open && n != 5 && n != 6 && !(builtin && n == 8):
		return fmt.Sprintf("%d values", n)
	}
	var bad []string
	for i, e := range exprs[:min(n, 5)] {
		what := literalKind(e)
		if i == 0 && what == "" {
			if v, ok := numberLiteral(e); ok && v != 0 && v != 1 {
				what = strconv.FormatFloat(v, 'g', -1, 64)
			}
		}
		if what != "" {
			bad = append(bad, fmt.Sprintf("%s as %s (value %d)", what, checkReturnFields[i], i+1))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return strings.Join(bad, ", ")
}

// literalKind describes e when it is a literal that cannot be an integer, else "".
func literalKind(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.TrueExpr:
		return "true"
	case *ast.FalseExpr:
		return "false"
	case *ast.NilExpr:
		return "nil"
	case *ast.StringExpr:
		return fmt.Sprintf("the string %q", e.Value)
	case *ast.TableExpr:
		return "a table"
	case *ast.FunctionExpr:
		return "a function"
	}
	return ""
}

// numberLiteral returns the value of a number literal, negated or not.
func numberLiteral(e ast.Expr) (float64, bool) {
	sign := 1.0
	if m, ok := e.(*ast.UnaryMinusOpExpr); ok {
		sign, e = -1, m.Expr
	}
	num, ok := e.(*ast.NumberExpr)
	if !ok {
		return 0, false
	}
	if v, err := strconv.ParseFloat(num.Value, 64); err == nil {
		return sign * v, true
	}
	if v, err := strconv.ParseInt(num.Value, 0, 64); err == nil {
		return sign * float64(v), true
	}
	return 0, false
}

// commandRange returns where the algorithm whose source attribute is source names each
// command in its commands list: the list element when the list is written out, else the
// whole list (built from a local, say), else the algorithm block's header.
func (l *loader) commandRange(source *hcl.Attribute, name string) func(cmd string) hcl.Range {
	return func(cmd string) hcl.Range {
		at := l.plugins[name]
		f := l.cfg.Files[source.Range.Filename]
		if f == nil {
			return at
		}
		root, _, _ := f.Body.PartialContent(rootSchema)
		for _, b := range root.Blocks {
			if b.Type != "algorithm" {
				continue
			}
			content, _, _ := b.Body.PartialContent(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "source"}, {Name: "commands"}}})
			src, list := content.Attributes["source"], content.Attributes["commands"]
			if src == nil || src.Range != source.Range || list == nil {
				continue
			}
			at = list.Expr.Range()
			elems, d := hcl.ExprList(list.Expr)
			if d.HasErrors() {
				return at
			}
			for _, e := range elems {
				v, d := e.Value(nil)
				if !d.HasErrors() && v.IsKnown() && !v.IsNull() && v.Type() == cty.String && strings.ToUpper(v.AsString()) == cmd {
					return e.Range()
				}
			}
			return at
		}
		return at
	}
}
