package dsl

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/luahost"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
	"github.com/zclconf/go-cty/cty"
)

var pluginSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "source"},
		{Name: "params"},
		{Name: "commands"},
		{Name: "doc"},
		{Name: "max_cost"},
		{Name: "keys"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "guarantee", LabelNames: []string{"shape"}},
		{Type: "work", LabelNames: []string{"type"}},
	},
}

// pluginName is the form algorithms.Assemble accepts.
var pluginName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// paramName is the form of a plugin parameter name.
var paramName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

var kinds = map[string]algorithms.Kind{
	"count":    algorithms.Count,
	"whole":    algorithms.Count, // a count that may be 0 (Param.Zero)
	"flag":     algorithms.Count, // true or false in a rule, 1 or 0 on the wire (Param.Flag)
	"duration": algorithms.Duration,
	"rate":     algorithms.Rate,
	"lease":    algorithms.Lease,
}

// forbiddenCommands may not be listed by a plugin: they reach keys outside KEYS, the
// server's state, or the clock the dispatcher already read. Most are not in luahost either;
// they are named here so that the diagnostic says why rather than that they are missing.
var forbiddenCommands = map[string]string{
	"TIME":       "the dispatcher reads the clock once and passes it to check as now; a second reading breaks client-clock mode and simulation",
	"KEYS":       "it reads keys outside the script's KEYS",
	"SCAN":       "it reads keys outside the script's KEYS",
	"RANDOMKEY":  "it reads keys outside the script's KEYS",
	"FLUSHALL":   "it deletes keys outside the script's KEYS",
	"FLUSHDB":    "it deletes keys outside the script's KEYS",
	"SELECT":     "it changes the database under the engine",
	"SWAPDB":     "it changes the database under the engine",
	"MOVE":       "it moves keys to another database",
	"MIGRATE":    "it moves keys to another server",
	"EVAL":       "scripts cannot call scripts",
	"EVALSHA":    "scripts cannot call scripts",
	"FCALL":      "scripts cannot call functions",
	"SCRIPT":     "it manages the script cache",
	"FUNCTION":   "it manages server functions",
	"CONFIG":     "it changes the server's configuration",
	"DEBUG":      "it is a server debugging command",
	"SHUTDOWN":   "it stops the server",
	"PUBLISH":    "it has effects beyond the script's keys",
	"WAIT":       "it blocks, and a script must not wait",
	"BLPOP":      "it blocks, and a script must not wait: use LPOP",
	"BRPOP":      "it blocks, and a script must not wait: use RPOP",
	"BLMPOP":     "it blocks, and a script must not wait: use LPOP or RPOP",
	"BLMOVE":     "it blocks, and a script must not wait",
	"BRPOPLPUSH": "it blocks, and a script must not wait",
	"BZPOPMIN":   "it blocks, and a script must not wait: use ZPOPMIN",
	"BZPOPMAX":   "it blocks, and a script must not wait: use ZPOPMAX",
	"BZMPOP":     "it blocks, and a script must not wait: use ZPOPMIN or ZPOPMAX",
}

// allowedCommands are the commands a plugin may list, upper case and sorted: those
// luahost implements, since verify, simulate, the embedded backend and the local fallback
// run plugins on it, less forbiddenCommands. A plugin that loads therefore runs on Redis
// and in process alike.
var allowedCommands = func() []string {
	var names []string
	for _, c := range luahost.Commands() {
		if _, bad := forbiddenCommands[c]; !bad {
			names = append(names, c)
		}
	}
	return names
}()

// pluginMaxCost decodes max_cost: a constant whole number of at least 1 (0 when invalid,
// with a diagnostic).
func (l *loader) pluginMaxCost(a *hcl.Attribute) int64 {
	v, d := a.Expr.Value(nil)
	if !d.HasErrors() && v.Type() == cty.Number && v.IsKnown() && !v.IsNull() {
		bf := v.AsBigFloat()
		if n, acc := bf.Int64(); acc == big.Exact && bf.IsInt() && n >= 1 && n <= algorithms.MaxInt {
			return n
		}
	}
	l.add(errorf(a.Expr.Range(), "Invalid max_cost", "max_cost is the most one request may charge a rule of this algorithm: a constant whole number of at least 1, such as max_cost = 1 for a script written for one request at a time. Leave it out to take any cost up to the capacity."))
	return 0
}

// maxPluginKeys bounds the further keys one rule of a plugin may use.
const maxPluginKeys = 8

// pluginKeys decodes keys = ["cur", "prev"]: the names of the further keys a rule uses
// beside its own, each a lowercase identifier, distinct, at most maxPluginKeys.
func (l *loader) pluginKeys(a *hcl.Attribute) []string {
	bad := func(format string, args ...any) []string {
		l.add(errorf(a.Expr.Range(), "Invalid keys", format+" keys names the further keys a rule of the algorithm uses beside its own, which its Lua reaches as subkey(key, NAME), such as keys = [\"cur\", \"prev\"]: at most %d lowercase names.", append(args, maxPluginKeys)...))
		return nil
	}
	v, d := a.Expr.Value(nil)
	if d.HasErrors() || v.IsNull() || !v.IsKnown() || !(v.Type().IsTupleType() || v.Type().IsListType()) {
		return bad("It must be a constant list of names.")
	}
	var names []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() || e.Type() != cty.String {
			return bad("Each key is a name in quotes.")
		}
		n := e.AsString()
		switch {
		case !paramName.MatchString(n):
			return bad("%q is not a key name.", n)
		case slices.Contains(names, n):
			return bad("%q is listed twice.", n)
		}
		names = append(names, n)
	}
	if len(names) == 0 || len(names) > maxPluginKeys {
		return bad("It lists %d names.", len(names))
	}
	return names
}

func (l *loader) decodePlugin(b *hcl.Block) {
	if len(b.Labels) == 0 || len(b.LabelRanges) == 0 {
		return // HCL reported the missing label
	}
	name := b.Labels[0]
	switch {
	case !pluginName.MatchString(name):
		l.add(errorf(b.LabelRanges[0], "Invalid algorithm name", "%q is not a valid algorithm name: use a lowercase letter followed by lowercase letters, digits or _, at most 63 in all.", name))
		return
	case isBuiltin(name):
		l.add(errorf(b.LabelRanges[0], "Algorithm name taken", "%q is a built-in algorithm. Give the plugin another name, such as %q.", name, name+"_custom"))
		return
	}
	if prev, ok := l.plugins[name]; ok {
		l.add(errorf(b.LabelRanges[0], "Duplicate algorithm", "An algorithm named %q is already defined at %s.", name, where(prev)))
		return
	}
	l.plugins[name] = b.DefRange
	content, d := b.Body.Content(pluginSchema)
	l.add(d...)
	alg := &algorithms.Algorithm{Name: name}
	paramsOK, commandsOK := false, false
	if a := content.Attributes["doc"]; a != nil {
		alg.Doc, _ = l.constString(a)
	}
	if a := content.Attributes["max_cost"]; a != nil {
		alg.MaxCost = l.pluginMaxCost(a)
	}
	if a := content.Attributes["keys"]; a != nil {
		alg.Keys = l.pluginKeys(a)
	}
	if a := content.Attributes["params"]; a != nil {
		alg.Params, paramsOK = l.pluginParams(a)
	} else {
		l.add(errorf(b.DefRange, "Missing params", "Algorithm %q needs params: its parameters in wire order with their kinds, such as params = { limit = \"count\", window = \"duration\" }. Kinds: count, whole (a count that may be 0), duration, rate (two wire values) and lease.", name))
	}
	if a := content.Attributes["commands"]; a != nil {
		alg.Commands, commandsOK = l.pluginCommands(a)
	} else {
		l.add(errorf(b.DefRange, "Missing commands", "Algorithm %q needs commands: the Redis commands its Lua calls, such as commands = [\"HMGET\", \"HSET\", \"PEXPIRE\"]. The engine refuses any other.", name))
	}
	var gs, ws []*hcl.Block
	for _, blk := range content.Blocks {
		if blk.Type == "work" {
			ws = append(ws, blk)
		} else {
			gs = append(gs, blk)
		}
	}
	guaranteeOK := false
	switch {
	case len(gs) == 0:
		l.add(errorf(b.DefRange, "Missing guarantee", "Algorithm %q needs a guarantee block: what it limits, which rlctl verify then holds it to, such as\n\n%s\n\nShapes: window, rate, in_flight and none; add bound = 2 (with why) for an algorithm that may reach twice its limit by design, and a precision block for answers rounded up.", name, guaranteeExample(alg)))
	case !paramsOK:
	default:
		guaranteeOK = l.pluginGuarantees(gs, alg)
	}
	workOK := true
	switch {
	case len(ws) == 0 && paramsOK && commandsOK && guaranteeOK:
		l.add(warnf(b.DefRange, "Missing work", "Algorithm %q declares no work block, so rlctl cannot tell what its rules cost Redis: compile shows no worst case for them and validate holds them to no budget. State the most commands one call issues, the elements they touch and the elements its key holds, such as\n\n%s\n\nwith figures over param.NAME, cost.min and cost.max; see 'rlctl help plugins'.", name, workExample(alg)))
	case len(ws) == 0 || !paramsOK:
	default:
		workOK = l.pluginWork(ws[0], alg)
		for _, extra := range ws[1:] {
			l.add(errorf(extra.DefRange, "Duplicate work", "Algorithm %q has more than one work block; it states one worst case, defined at %s.", name, where(ws[0].DefRange)))
			workOK = false
		}
	}
	if paramsOK {
		l.pluginOK[name] = alg // rules can be checked against it even if its Lua has errors
	}
	a := content.Attributes["source"]
	if a == nil {
		l.add(errorf(b.DefRange, "Missing source", "Algorithm %q needs source: the Lua file implementing it, relative to this policy file, such as source = %q.", name, name+".lua"))
		return
	}
	src, ok := l.pluginSource(a, alg, paramsOK, commandsOK)
	if ok && paramsOK && commandsOK && guaranteeOK && workOK {
		alg.Source = src
		l.cfg.Plugins = append(l.cfg.Plugins, alg)
	}
}

func isBuiltin(name string) bool {
	_, ok := algorithms.Lookup(name)
	return ok
}

// pluginParams decodes params = { name = "kind", ... } in source order, which is the wire
// order.
func (l *loader) pluginParams(a *hcl.Attribute) ([]algorithms.Param, bool) {
	pairs, d := hcl.ExprMap(a.Expr)
	if d.HasErrors() {
		l.add(errorf(a.Expr.Range(), "Invalid params", "params must be an object written out in place, such as { limit = \"count\", window = \"duration\" }: its order is the parameters' wire order."))
		return nil, false
	}
	var params []algorithms.Param
	ok := true
	var reserved []string
	for _, ra := range ruleAttrs {
		reserved = append(reserved, ra.Name)
	}
	kindNames := sortedKeys(kinds)
	for _, kv := range pairs {
		pname := hcl.ExprAsKeyword(kv.Key)
		if pname == "" {
			v, d := kv.Key.Value(nil)
			if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
				l.add(errorf(kv.Key.Range(), "Invalid parameter name", "Parameter names are identifiers, such as limit."))
				ok = false
				continue
			}
			pname = v.AsString()
		}
		switch {
		case !paramName.MatchString(pname):
			l.add(errorf(kv.Key.Range(), "Invalid parameter name", "%q is not a valid parameter name: use a lowercase letter followed by lowercase letters, digits or _.", pname))
			ok = false
			continue
		case slices.Contains(reserved, pname):
			l.add(errorf(kv.Key.Range(), "Reserved parameter name", "%q is a rule attribute, so it cannot name a parameter. Rules reserve %s and %s.", pname, strings.Join(reserved[:len(reserved)-1], ", "), reserved[len(reserved)-1]))
			ok = false
			continue
		case slices.ContainsFunc(params, func(p algorithms.Param) bool { return p.Name == pname }):
			l.add(errorf(kv.Key.Range(), "Duplicate parameter", "The parameter %q is listed twice.", pname))
			ok = false
			continue
		}
		e, d := l.env.compile(kv.Value, constScope, cty.String)
		l.add(d...)
		if e == nil || e.kind != kindConst || e.val.IsNull() {
			if e != nil {
				l.add(errorf(kv.Value.Range(), "Invalid parameter kind", "The kind must be a constant: one of %s.", quoteList(kindNames)))
			}
			ok = false
			continue
		}
		k, found := kinds[e.val.AsString()]
		if !found {
			l.add(errorf(kv.Value.Range(), "Invalid parameter kind", "%q is not a parameter kind.%s Use %s: count is a positive whole number, whole one that may also be 0, flag true or false (1 or 0 on the wire), duration a time such as \"1m\", rate an amount per period such as \"10/s\" (two wire values), lease the per-request id the engine supplies.", e.val.AsString(), suggestion(e.val.AsString(), kindNames), quoteList(kindNames)))
			ok = false
			continue
		}
		kind := e.val.AsString()
		params = append(params, algorithms.Param{Name: pname, Kind: k, Zero: kind == "whole", Flag: kind == "flag", Doc: "a " + kind + " (plugin parameter)"})
	}
	return params, ok
}

// pluginCommands decodes commands = ["HMGET", ...], uppercased, and checks each against
// allowedCommands.
func (l *loader) pluginCommands(a *hcl.Attribute) ([]string, bool) {
	e, d := l.env.compile(a.Expr, constScope, cty.List(cty.String))
	l.add(d...)
	if e == nil {
		return nil, false
	}
	if e.kind != kindConst || e.val.IsNull() {
		l.add(errorf(a.Expr.Range(), "Invalid commands", "commands must be a constant list of Redis command names, such as [\"HMGET\", \"HSET\"]."))
		return nil, false
	}
	// Each name's own range when the list is written out, else the whole list's.
	elems, ed := hcl.ExprList(a.Expr)
	if ed.HasErrors() || len(elems) != e.val.LengthInt() {
		elems = nil
	}
	var cmds []string
	ok := true
	for i, it := 0, e.val.ElementIterator(); it.Next(); i++ {
		_, v := it.Element()
		at := a.Expr.Range()
		if elems != nil {
			at = elems[i].Range()
		}
		if v.IsNull() {
			l.add(errorf(at, "Invalid commands", "commands holds a null."))
			return nil, false
		}
		c := strings.ToUpper(v.AsString())
		if why, bad := forbiddenCommands[c]; bad {
			l.add(errorf(at, "Command not allowed", "A plugin may not call %s: %s.", c, why))
			ok = false
			continue
		}
		if c == "" || strings.Trim(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
			l.add(errorf(at, "Invalid commands", "%q is not a Redis command name.", v.AsString()))
			ok = false
			continue
		}
		if !slices.Contains(allowedCommands, c) {
			l.add(errorf(at, "Command not available", "A plugin cannot call %s.%s Plugins run on Redis and in process (verify, simulate, the embedded backend and the local fallback), so they may call only the commands both run: %s.", c, suggestion(c, allowedCommands), strings.Join(allowedCommands, ", ")))
			ok = false
			continue
		}
		if slices.Contains(cmds, c) {
			l.add(warnf(at, "Command listed twice", "%s is listed more than once.", c))
			continue
		}
		cmds = append(cmds, c)
	}
	return cmds, ok
}

// pluginSource reads and checks a plugin's Lua source.
// The checks that need the parameters or commands are skipped when those had errors.
func (l *loader) pluginSource(a *hcl.Attribute, alg *algorithms.Algorithm, paramsOK, commandsOK bool) (string, bool) {
	rel, ok := l.constString(a)
	if !ok {
		return "", false
	}
	if rel == "" {
		l.add(errorf(a.Expr.Range(), "Invalid source", "source is empty; name the Lua file, such as %q.", alg.Name+".lua"))
		return "", false
	}
	path := rel
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(a.Range.Filename), rel)
	}
	src, err := l.readAux(path)
	if err != nil {
		l.add(errorf(a.Expr.Range(), "Cannot read plugin source", "%s. The path is relative to the policy file: %s.", err, path))
		return "", false
	}
	l.cfg.Files[path] = &hcl.File{Body: hcl.EmptyBody(), Bytes: src}
	alg.File = path
	c := &luaChecker{file: path, src: src, alg: alg, skipParams: !paramsOK, skipCommands: !commandsOK, commandAt: l.commandRange(a, alg.Name)}
	c.check()
	l.add(c.diags...)
	return string(src), !c.diags.HasErrors()
}

// luaChecker checks a plugin's Lua: it parses, creates no globals, assigns none of the
// engine's locals, calls only the listed Redis commands, and returns a table with params,
// check and commit.
type luaChecker struct {
	file   string
	src    []byte
	alg    *algorithms.Algorithm
	diags  hcl.Diagnostics
	scopes []map[string]bool
	called []string // with alg nil: the constant commands called, for engineScope.helpers
	// skipParams and skipCommands skip the checks against a declaration that had errors.
	skipParams, skipCommands bool
	// lint is what the walk records for lintPlugin (plugin_lint.go); commandAt is where the
	// policy names a command.
	lint      pluginLint
	commandAt func(cmd string) hcl.Range
}

// engineScope is what the engine script declares around a plugin's source, read from the
// assembled built-in script so it follows the wrapper (see algorithms.Assemble):
//
//	local function load_algorithm(name)
//	  if name == '<name>' then
//	    local params, validate, check, commit, refund, retune
//	    <algorithm source: assigns those names>
//	    return params, validate or false, check, commit, refund or false, retune or false
//	  end
//	  ...
type engineScope struct {
	prelude  map[string]bool // the prelude's locals, load_algorithm and its parameter
	slots    []string        // the locals the source assigns
	required []string        // the slots returned as is (the others may be nil: "or false")
	// helpers maps the prelude's functions to the Redis commands they call, so a plugin
	// calling expire_us must list PEXPIRE.
	helpers map[string][]string
}

var (
	engineOnce  sync.Once
	engineValue engineScope
)

// engine returns the engine scope, read once.
func engine() engineScope {
	engineOnce.Do(func() { engineValue = readEngineScope() })
	return engineValue
}

func readEngineScope() engineScope {
	sc := engineScope{
		prelude:  map[string]bool{},
		helpers:  map[string][]string{},
		slots:    []string{"params", "validate", "check", "commit", "refund", "retune"},
		required: []string{"params", "check", "commit"},
	}
	chunk, err := parse.Parse(strings.NewReader(algorithms.Default().Source), "engine")
	if err != nil {
		return sc
	}
	for _, st := range chunk {
		la, ok := st.(*ast.LocalAssignStmt)
		if !ok {
			continue
		}
		for i, n := range la.Names {
			sc.prelude[n] = true
			if i < len(la.Exprs) {
				if fn, ok := la.Exprs[i].(*ast.FunctionExpr); ok && n != "load_algorithm" {
					walker := &luaChecker{scopes: []map[string]bool{{}}}
					walker.function(fn, false)
					sc.helpers[n] = walker.called
				}
			}
		}
		if !slices.Contains(la.Names, "load_algorithm") || len(la.Exprs) != 1 {
			continue
		}
		fn, ok := la.Exprs[0].(*ast.FunctionExpr)
		if !ok || len(fn.Stmts) == 0 {
			break
		}
		if fn.ParList != nil {
			for _, n := range fn.ParList.Names {
				sc.prelude[n] = true
			}
		}
		branch, ok := fn.Stmts[0].(*ast.IfStmt)
		if !ok || len(branch.Then) < 2 {
			break
		}
		decl, ok1 := branch.Then[0].(*ast.LocalAssignStmt)
		ret, ok2 := branch.Then[len(branch.Then)-1].(*ast.ReturnStmt)
		if !ok1 || !ok2 {
			break
		}
		sc.slots, sc.required = decl.Names, nil
		for _, e := range ret.Exprs {
			if id, ok := e.(*ast.IdentExpr); ok {
				sc.required = append(sc.required, id.Value)
			}
		}
		break
	}
	return sc
}

func (c *luaChecker) check() {
	chunk, err := parseLua(c.src, c.file)
	if err != nil {
		var pe *parse.Error
		line, col := 0, 0
		msg := err.Error()
		if errors.As(err, &pe) {
			line, col, msg = pe.Pos.Line, pe.Pos.Column, pe.Message
			if pe.Token != "" {
				msg += fmt.Sprintf(" near %q", pe.Token)
			}
		}
		c.diags = append(c.diags, errorf(c.lineRange(line, col), "Lua syntax error", "The plugin's Lua does not compile: %s.", msg))
		return
	}
	slots := map[string]bool{}
	for _, n := range engine().slots {
		slots[n] = true
	}
	if c.alg != nil && algorithms.IsBuiltin(c.alg) {
		slots["owe"] = true // a built-in's debt (OpOwe); not in a plugin's contract
	}
	c.scopes = []map[string]bool{slots, {}}
	c.block(chunk, false)
	c.checkSlots(chunk)
	c.lintPlugin(chunk)
}

// parseLua parses Lua source, turning any failure of the parser into an error.
func parseLua(src []byte, name string) (chunk []ast.Stmt, err error) {
	defer func() {
		if r := recover(); r != nil {
			chunk, err = nil, fmt.Errorf("the Lua parser failed: %v", r)
		}
	}()
	chunk, err = parse.Parse(bytes.NewReader(src), name)
	if err == nil && chunk == nil && len(bytes.TrimSpace(src)) > 0 {
		err = errors.New("the Lua parser failed")
	}
	return chunk, err
}

// lineRange is the range of a line of the Lua file (from col when given); out-of-range
// lines (such as EOF) give the end of the file.
func (c *luaChecker) lineRange(line, col int) hcl.Range {
	start := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(c.src[start:], '\n')
		if i < 0 {
			start = -1
			break
		}
		start += i + 1
	}
	if line < 1 || start < 0 {
		end := hcl.Pos{Line: 1 + bytes.Count(c.src, []byte("\n")), Byte: len(c.src)}
		end.Column = 1 + len(c.src) - (bytes.LastIndexByte(c.src, '\n') + 1)
		return hcl.Range{Filename: c.file, Start: end, End: end}
	}
	end := start + len(c.src[start:])
	if i := bytes.IndexByte(c.src[start:], '\n'); i >= 0 {
		end = start + i
	}
	from := start
	if col > 1 && start+col-1 <= end {
		from = start + col - 1
	}
	return hcl.Range{
		Filename: c.file,
		Start:    hcl.Pos{Line: line, Column: 1 + from - start, Byte: from},
		End:      hcl.Pos{Line: line, Column: 1 + end - start, Byte: end},
	}
}

func (c *luaChecker) at(n ast.PositionHolder) hcl.Range { return c.lineRange(n.Line(), 0) }

func (c *luaChecker) declare(names ...string) {
	for _, n := range names {
		c.scopes[len(c.scopes)-1][n] = true
	}
}

func (c *luaChecker) local(name string) bool {
	for i := len(c.scopes) - 1; i >= 0; i-- {
		if c.scopes[i][name] {
			return true
		}
	}
	return false
}

// block walks statements, in a new scope when scoped.
func (c *luaChecker) block(stmts []ast.Stmt, scoped bool) {
	if scoped {
		c.scopes = append(c.scopes, map[string]bool{})
		defer func() { c.scopes = c.scopes[:len(c.scopes)-1] }()
	}
	for _, s := range stmts {
		c.stmt(s)
	}
}

func (c *luaChecker) assignName(n ast.PositionHolder, name string) {
	switch {
	case c.alg == nil: // reading the engine's own helpers
	case c.local(name):
	case engine().prelude[name]:
		c.diags = append(c.diags, errorf(c.at(n), "Plugin assigns an engine local", "The plugin assigns %s, a local of the engine script that every algorithm shares. Declare a local of its own: local %s = ….", name, name))
	default:
		c.diags = append(c.diags, errorf(c.at(n), "Plugin assigns a global", "The plugin assigns the global %s; Redis forbids scripts from creating globals. Declare it local: local %s = ….", name, name))
	}
}

func (c *luaChecker) stmt(s ast.Stmt) {
	switch s := s.(type) {
	case *ast.AssignStmt:
		for _, e := range s.Rhs {
			c.expr(e)
		}
		for _, e := range s.Lhs {
			if id, ok := e.(*ast.IdentExpr); ok {
				c.assignName(s, id.Value)
				continue
			}
			c.expr(e)
		}
	case *ast.LocalAssignStmt:
		if len(s.Names) == 1 && len(s.Exprs) == 1 {
			if _, ok := s.Exprs[0].(*ast.FunctionExpr); ok {
				c.declare(s.Names[0]) // local function f: f is in scope in its body
			}
		}
		for _, e := range s.Exprs {
			c.expr(e)
		}
		c.declare(s.Names...)
	case *ast.FuncCallStmt:
		c.expr(s.Expr)
	case *ast.DoBlockStmt:
		c.block(s.Stmts, true)
	case *ast.WhileStmt:
		c.expr(s.Condition)
		c.block(s.Stmts, true)
	case *ast.RepeatStmt:
		c.scopes = append(c.scopes, map[string]bool{})
		c.block(s.Stmts, false)
		c.expr(s.Condition)
		c.scopes = c.scopes[:len(c.scopes)-1]
	case *ast.IfStmt:
		c.expr(s.Condition)
		c.block(s.Then, true)
		c.block(s.Else, true)
	case *ast.NumberForStmt:
		c.expr(s.Init)
		c.expr(s.Limit)
		c.expr(s.Step)
		c.scopes = append(c.scopes, map[string]bool{s.Name: true})
		c.block(s.Stmts, false)
		c.scopes = c.scopes[:len(c.scopes)-1]
	case *ast.GenericForStmt:
		for _, e := range s.Exprs {
			c.expr(e)
		}
		c.scopes = append(c.scopes, map[string]bool{})
		c.declare(s.Names...)
		c.block(s.Stmts, false)
		c.scopes = c.scopes[:len(c.scopes)-1]
	case *ast.FuncDefStmt:
		if s.Name != nil {
			if id, ok := s.Name.Func.(*ast.IdentExpr); ok && s.Name.Receiver == nil {
				c.assignName(s, id.Value)
			} else {
				c.expr(s.Name.Func)
				c.expr(s.Name.Receiver)
			}
		}
		if s.Func != nil {
			c.function(s.Func, s.Name != nil && s.Name.Receiver != nil)
		}
	case *ast.ReturnStmt:
		for _, e := range s.Exprs {
			c.expr(e)
		}
	}
}

func (c *luaChecker) function(f *ast.FunctionExpr, method bool) {
	defer c.lintFunction(f)()
	c.scopes = append(c.scopes, map[string]bool{})
	if method {
		c.declare("self")
	}
	if f.ParList != nil {
		c.declare(f.ParList.Names...)
	}
	c.block(f.Stmts, false)
	c.scopes = c.scopes[:len(c.scopes)-1]
}

func (c *luaChecker) expr(e ast.Expr) {
	c.lintExpr(e)
	switch e := e.(type) {
	case nil:
	case *ast.FunctionExpr:
		c.function(e, false)
	case *ast.FuncCallExpr:
		c.call(e)
		c.expr(e.Func)
		c.expr(e.Receiver)
		for _, a := range e.Args {
			c.expr(a)
		}
	case *ast.AttrGetExpr:
		c.expr(e.Object)
		c.expr(e.Key)
	case *ast.TableExpr:
		for _, f := range e.Fields {
			c.expr(f.Key)
			c.expr(f.Value)
		}
	case *ast.LogicalOpExpr:
		c.expr(e.Lhs)
		c.expr(e.Rhs)
	case *ast.RelationalOpExpr:
		c.expr(e.Lhs)
		c.expr(e.Rhs)
	case *ast.StringConcatOpExpr:
		c.expr(e.Lhs)
		c.expr(e.Rhs)
	case *ast.ArithmeticOpExpr:
		c.expr(e.Lhs)
		c.expr(e.Rhs)
	case *ast.UnaryMinusOpExpr:
		c.expr(e.Expr)
	case *ast.UnaryNotOpExpr:
		c.expr(e.Expr)
	case *ast.UnaryLenOpExpr:
		c.expr(e.Expr)
	}
}

// call checks a redis.call / redis.pcall (or the engine's aliases, call and redis_pcall) against the listed
// commands.
func (c *luaChecker) call(e *ast.FuncCallExpr) {
	if id, ok := e.Func.(*ast.IdentExpr); ok && c.alg != nil && !c.skipCommands && !c.local(id.Value) {
		for _, cmd := range engine().helpers[id.Value] {
			if !slices.Contains(c.alg.Commands, cmd) {
				c.diags = append(c.diags, errorf(c.at(e), "Redis command not declared", "The plugin calls the engine's %s, which runs %s, and algorithm %q does not list %s in commands. Add %q to commands.", id.Value, cmd, c.alg.Name, cmd, cmd))
			}
		}
	}
	if !c.isRedisCall(e.Func) || len(e.Args) == 0 {
		return
	}
	if c.alg == nil {
		if s, ok := e.Args[0].(*ast.StringExpr); ok && !slices.Contains(c.called, strings.ToUpper(s.Value)) {
			c.called = append(c.called, strings.ToUpper(s.Value))
		}
		return
	}
	s, ok := e.Args[0].(*ast.StringExpr)
	if !ok {
		c.diags = append(c.diags, warnf(c.at(e), "Redis command not checkable", "The command this call runs is not a constant string, so rlctl cannot check it against the algorithm's commands. Call each command by name."))
		return
	}
	cmd := strings.ToUpper(s.Value)
	if c.skipCommands || slices.Contains(c.alg.Commands, cmd) {
		return
	}
	c.diags = append(c.diags, errorf(c.at(e), "Redis command not declared", "The plugin calls %s, which algorithm %q does not list in commands (%s). Add %q to commands, or use a listed command.", cmd, c.alg.Name, strings.Join(c.alg.Commands, ", "), cmd))
}

// isEngineCall reports whether name is one of the engine prelude's aliases of redis.call
// and redis.pcall (call, redis_pcall).
func isEngineCall(name string) bool { return name == "call" || name == "redis_pcall" }

func (c *luaChecker) isRedisCall(f ast.Expr) bool {
	switch f := f.(type) {
	case *ast.IdentExpr:
		return isEngineCall(f.Value) && !c.local(f.Value)
	case *ast.AttrGetExpr:
		obj, ok := f.Object.(*ast.IdentExpr)
		key, kok := f.Key.(*ast.StringExpr)
		return ok && kok && obj.Value == "redis" && !c.local("redis") && (key.Value == "call" || key.Value == "pcall")
	}
	return false
}

// checkSlots checks that the source assigns every required slot at its top level, does
// not return (the wrapper returns the slots after it), and declares as many params as the
// algorithm has wire values, with 'str' exactly at lease slots.
func (c *luaChecker) checkSlots(chunk []ast.Stmt) {
	assigned := map[string]ast.Stmt{}
	var params *ast.TableExpr
	for _, st := range chunk {
		switch st := st.(type) {
		case *ast.ReturnStmt:
			c.diags = append(c.diags, errorf(c.at(st), "Plugin returns", "The engine runs the plugin's source inside a function and then returns %s itself, so the source must not return: assign them instead (function check(key, now, cost, p) … end). See lua/token_bucket.lua.", strings.Join(engine().slots, ", ")))
		case *ast.FuncDefStmt:
			if st.Name != nil && st.Name.Receiver == nil {
				if id, ok := st.Name.Func.(*ast.IdentExpr); ok {
					assigned[id.Value] = st
				}
			}
		case *ast.AssignStmt:
			for i, lhs := range st.Lhs {
				id, ok := lhs.(*ast.IdentExpr)
				if !ok {
					continue
				}
				assigned[id.Value] = st
				if id.Value == "params" && i < len(st.Rhs) {
					params, _ = st.Rhs[i].(*ast.TableExpr)
				}
			}
		}
	}
	for _, name := range engine().required {
		if assigned[name] == nil {
			c.diags = append(c.diags, errorf(c.lineRange(1, 0), "Plugin lacks "+name, "The plugin's source never assigns %s at its top level. Every algorithm assigns params (the kind of each wire value: 'pos' for a positive integer, 'nat' for one that may be 0, 'str' for a lease), check(key, now, cost, p) and commit(key, pending), and may assign validate(p) and refund(key, now, cost, p); see lua/dispatch.lua.", name))
		}
	}
	if c.skipParams || params == nil || slices.ContainsFunc(params.Fields, func(f *ast.Field) bool { return f.Key != nil }) {
		return
	}
	var want []string
	for _, p := range c.alg.Params {
		switch p.Kind {
		case algorithms.Lease:
			want = append(want, "'str'")
		case algorithms.Rate:
			want = append(want, "'pos'", "'pos'")
		default:
			if p.Min() == 0 {
				want = append(want, "'nat'")
			} else {
				want = append(want, "'pos'")
			}
		}
	}
	var got []string
	for _, f := range params.Fields {
		if s, ok := f.Value.(*ast.StringExpr); ok && (s.Value == "str" || s.Value == "nat") {
			got = append(got, "'"+s.Value+"'")
		} else {
			got = append(got, "'pos'")
		}
	}
	if !slices.Equal(got, want) {
		c.diags = append(c.diags, errorf(c.lineRange(params.Line(), 0), "Plugin params mismatch", "The Lua's params are {%s} but algorithm %q's params block gives {%s}: one 'pos' per count or duration, 'nat' per whole, two 'pos' per rate (amount and period), 'str' for a lease. Make them agree.", strings.Join(got, ", "), c.alg.Name, strings.Join(want, ", ")))
	}
}
