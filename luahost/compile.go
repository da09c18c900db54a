package luahost

import (
	"crypto/sha1"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// chunkName is the name Redis 7.0 gives an EVAL script: Lua messages say
// "user_script:LINE:", error replies "on @user_script:LINE.".
const chunkName = "user_script"

// Names no Lua source can spell, for the number-to-string helper that
// concatenation is rewritten to call (see rewriteConcat).
const (
	tostrGlobal = "(luahost tostring)"
	tostrLocal  = "(tostring)"
)

// protos holds the chunks compiled last, by name and source. A FunctionProto is
// read-only once compiled, so Lua states (of one host or of many, on any goroutine) share
// it: a script loaded on many hosts, as every simulation, probe worker and verify check
// loads the engine script, is compiled once. Errors are not kept.
var protos struct {
	sync.Mutex
	m     map[[sha1.Size]byte]*lua.FunctionProto
	order [][sha1.Size]byte // oldest first
}

// protoCacheSize bounds protos: a process that loads ever new scripts (a server reloading
// its policies) keeps only the latest.
const protoCacheSize = 16

// compile returns src compiled as a Redis script chunk named name (see compileChunk),
// from protos when it was compiled lately.
func compile(src, name string) (*lua.FunctionProto, error) {
	h := sha1.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(src))
	var key [sha1.Size]byte
	h.Sum(key[:0])
	protos.Lock()
	p, ok := protos.m[key]
	protos.Unlock()
	if ok {
		return p, nil
	}
	p, err := compileChunk(src, name)
	if err != nil {
		return nil, err
	}
	protos.Lock()
	defer protos.Unlock()
	if protos.m == nil {
		protos.m = map[[sha1.Size]byte]*lua.FunctionProto{}
	}
	if _, ok := protos.m[key]; !ok {
		if len(protos.order) == protoCacheSize {
			delete(protos.m, protos.order[0])
			protos.order = append(protos.order[:0], protos.order[1:]...)
		}
		protos.m[key] = p
		protos.order = append(protos.order, key)
	}
	return p, nil
}

// compileChunk parses and compiles src as a Redis script chunk named name.
// Concatenations are rewritten so that numbers become strings as Lua 5.1
// makes them ("%.14g"), not as gopher-lua does (Go's shortest form, and every
// integral value in full).
func compileChunk(src, name string) (*lua.FunctionProto, error) {
	chunk, err := parse.Parse(strings.NewReader(src), name)
	if err != nil {
		return nil, err
	}
	var rw rewriter
	rw.stmts(chunk)
	if rw.err != nil {
		return nil, rw.err
	}
	if rw.concat {
		decl := &ast.LocalAssignStmt{
			Names: []string{tostrLocal},
			Exprs: []ast.Expr{&ast.IdentExpr{Value: tostrGlobal}},
		}
		chunk = append([]ast.Stmt{decl}, chunk...)
	}
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		return nil, err
	}
	// A main chunk is vararg without Lua 5.0's implicit arg table, as in Lua
	// 5.1; gopher-lua would build that table (a map) on every call.
	proto.IsVarArg &^= lua.VarArgNeedsArg
	sizeConstructors(proto)
	return proto, nil
}

// fieldsPerFlush is how many array items of a table constructor one SETLIST stores
// (Lua's LFIELDS_PER_FLUSH, gopher-lua's FieldsPerFlush).
const fieldsPerFlush = 50

// sizeConstructors gives every table constructor of p and its functions the exact size
// of its array items, and the block numbers of its items past the 25,550th. gopher-lua's
// compiler writes NEWTABLE's size in Lua 5.1's "floating point byte" but its VM reads it
// as a plain count, so a constructor of 16 or more items starts a little short and grows:
// {1, ..., 19} starts with room for 18 and then allocates room for 36. And a SETLIST of a
// block above 511 keeps its block number in the next code word, where the compiler writes
// 0, which would store those items at keys below 1.
//
// A constructor's items are stored by SETLIST instructions naming its register, block
// after block, all before another NEWTABLE names that register. The size is only a
// capacity; a constructor whose count is not known (its last item a call or ...) keeps
// the compiler's, as does one too large for NEWTABLE's field.
func sizeConstructors(p *lua.FunctionProto) {
	code := p.Code
	for pc := 0; pc < len(code); pc++ {
		inst := code[pc]
		op := int(inst >> 26)
		if op == lua.OP_SETLIST && argC(inst) == 0 {
			pc++ // the next word is SETLIST's block number, not an instruction
			continue
		}
		if op != lua.OP_NEWTABLE {
			continue
		}
		a, n, known, block := argA(inst), 0, true, 0
	scan:
		for q := pc + 1; q < len(code); q++ {
			next := code[q]
			switch int(next >> 26) {
			case lua.OP_NEWTABLE:
				if argA(next) == a {
					break scan
				}
			case lua.OP_SETLIST:
				// The block: SETLIST's C, or when 0 the next code word, which the compiler
				// leaves 0 and which is then the block after this constructor's last.
				b := argC(next)
				if b == 0 && q+1 < len(code) {
					q++
					if code[q] == 0 && argA(next) == a {
						code[q] = uint32(block + 1)
					}
					b = int(code[q])
				}
				if argA(next) == a {
					block = b
					known = known && argB(next) != 0
					n = max(n, (block-1)*fieldsPerFlush+argB(next))
				}
			}
		}
		if known && n > 0 && n <= 0x1ff {
			code[pc] = inst&^0x1ff | uint32(n)
		}
	}
	for _, f := range p.FunctionPrototypes {
		sizeConstructors(f)
	}
}

// argA, argB and argC are the fields of a Lua 5.1 instruction (iABC: op 6 bits, A 8, C 9,
// B 9, from the top).
func argA(inst uint32) int { return int(inst>>18) & 0xff }
func argB(inst uint32) int { return int(inst & 0x1ff) }
func argC(inst uint32) int { return int(inst>>9) & 0x1ff }

// compileErrorMessage renders a parse or compile error the way Redis 7.0
// reports a script that does not compile: "ERR Error compiling script (new
// function): user_script:LINE: message near 'token'".
func compileErrorMessage(src string, err error) string {
	return oneLine("ERR Error compiling script (new function): " + compileErrorDetail(src, chunkName, err))
}

// compileErrorDetail renders a parse or compile error as Lua 5.1 does:
// "chunk:LINE: message near 'token'". gopher-lua's messages are terser than
// Lua 5.1's ("syntax error" rather than "'=' expected").
func compileErrorDetail(src, name string, err error) string {
	var perr *parse.Error
	var cerr *lua.CompileError
	var serr *syntaxError
	switch {
	case errors.As(err, &serr):
		return fmt.Sprintf("%s:%d: %s", name, serr.line, serr.msg)
	case errors.As(err, &perr):
		msg := strings.TrimSpace(perr.Message)
		if perr.Pos.Line == parse.EOF {
			// Lua reports the end of input on the last line.
			return fmt.Sprintf("%s:%d: %s near '<eof>'", perr.Pos.Source, strings.Count(src, "\n")+1, msg)
		}
		return fmt.Sprintf("%s:%d: %s near '%s'", perr.Pos.Source, perr.Pos.Line, msg, perr.Token)
	case errors.As(err, &cerr):
		return fmt.Sprintf("%s:%d: %s", name, cerr.Line, cerr.Message)
	}
	return strings.TrimSpace(err.Error())
}

// rewriter rewrites a chunk's AST before compilation (see compile).
type rewriter struct {
	concat bool  // a concatenation was rewritten
	err    error // the first construct Lua 5.1 would not accept
}

// stmts rewrites every statement of a block.
func (rw *rewriter) stmts(stmts []ast.Stmt) {
	for _, s := range stmts {
		rw.stmt(s)
	}
}

func (rw *rewriter) stmt(s ast.Stmt) {
	exprs := func(es []ast.Expr) {
		for i := range es {
			rw.expr(&es[i])
		}
	}
	switch s := s.(type) {
	case *ast.AssignStmt:
		exprs(s.Lhs)
		exprs(s.Rhs)
	case *ast.LocalAssignStmt:
		exprs(s.Exprs)
	case *ast.FuncCallStmt:
		rw.expr(&s.Expr)
	case *ast.DoBlockStmt:
		rw.stmts(s.Stmts)
	case *ast.WhileStmt:
		rw.expr(&s.Condition)
		rw.stmts(s.Stmts)
	case *ast.RepeatStmt:
		rw.expr(&s.Condition)
		rw.stmts(s.Stmts)
	case *ast.IfStmt:
		rw.expr(&s.Condition)
		rw.stmts(s.Then)
		rw.stmts(s.Else)
	case *ast.NumberForStmt:
		rw.expr(&s.Init)
		rw.expr(&s.Limit)
		rw.expr(&s.Step)
		rw.stmts(s.Stmts)
	case *ast.GenericForStmt:
		exprs(s.Exprs)
		rw.stmts(s.Stmts)
	case *ast.FuncDefStmt:
		if s.Name != nil {
			rw.expr(&s.Name.Func)
			rw.expr(&s.Name.Receiver)
		}
		rw.stmts(s.Func.Stmts)
	case *ast.ReturnStmt:
		exprs(s.Exprs)
	case *ast.GotoStmt:
		// gopher-lua parses Lua 5.2's goto; Redis's Lua 5.1 does not.
		rw.fail(s.Line(), "'=' expected near '"+s.Label+"'")
	case *ast.LabelStmt:
		rw.fail(s.Line(), "unexpected symbol near ':'")
	}
}

func (rw *rewriter) fail(line int, msg string) {
	if rw.err == nil {
		rw.err = &syntaxError{line: line, msg: msg}
	}
}

// syntaxError is a construct gopher-lua accepts and Lua 5.1 does not.
type syntaxError struct {
	line int
	msg  string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// expr rewrites *e: every operand of a concatenation that is not a string
// literal or itself a concatenation is wrapped in a call to the tostring
// helper, which turns numbers into "%.14g" strings and returns anything else
// unchanged, so that errors and __concat metamethods still happen in the
// concatenation itself.
func (rw *rewriter) expr(e *ast.Expr) {
	if *e == nil {
		return
	}
	switch x := (*e).(type) {
	case *ast.StringConcatOpExpr:
		rw.concat = true
		rw.expr(&x.Lhs)
		rw.expr(&x.Rhs)
		x.Lhs = wrapOperand(x.Lhs)
		x.Rhs = wrapOperand(x.Rhs)
	case *ast.AttrGetExpr:
		rw.expr(&x.Object)
		rw.expr(&x.Key)
	case *ast.TableExpr:
		for _, f := range x.Fields {
			rw.expr(&f.Key)
			rw.expr(&f.Value)
		}
	case *ast.FuncCallExpr:
		rw.expr(&x.Func)
		rw.expr(&x.Receiver)
		for i := range x.Args {
			rw.expr(&x.Args[i])
		}
	case *ast.LogicalOpExpr:
		rw.expr(&x.Lhs)
		rw.expr(&x.Rhs)
	case *ast.RelationalOpExpr:
		rw.expr(&x.Lhs)
		rw.expr(&x.Rhs)
	case *ast.ArithmeticOpExpr:
		rw.expr(&x.Lhs)
		rw.expr(&x.Rhs)
	case *ast.UnaryMinusOpExpr:
		rw.expr(&x.Expr)
	case *ast.UnaryNotOpExpr:
		rw.expr(&x.Expr)
	case *ast.UnaryLenOpExpr:
		rw.expr(&x.Expr)
	case *ast.FunctionExpr:
		rw.stmts(x.Stmts)
	case *ast.NumberExpr:
		x.Value = normalizeNumber(x.Value)
	}
}

// normalizeNumber rewrites a number literal so that gopher-lua reads the
// value Lua 5.1 reads: gopher-lua turns literals it cannot parse, such as
// 1e309 (infinity in Lua) or hexadecimal beyond 64 bits, into NaN.
func normalizeNumber(lit string) string {
	f, ok := luaStringToNumber(lit)
	if !ok {
		return lit
	}
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsNaN(f):
		return lit
	}
	if n, err := strconv.ParseInt(lit, 0, 64); err == nil && float64(n) == f {
		return lit
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func wrapOperand(e ast.Expr) ast.Expr {
	switch e.(type) {
	case *ast.StringExpr, *ast.StringConcatOpExpr:
		return e
	}
	fn := &ast.IdentExpr{Value: tostrLocal}
	fn.SetLine(e.Line())
	fn.SetLastLine(e.LastLine())
	call := &ast.FuncCallExpr{Func: fn, Args: []ast.Expr{e}}
	call.SetLine(e.Line())
	call.SetLastLine(e.LastLine())
	return call
}
