package dsl

import (
	"math/big"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// A prog is a policy expression compiled to Go closures: the value HCL gives the same
// expression on the same request, computed without cty values. Its type says which one of
// str, num and bln is set.
//
// Each function returns ok == false where it cannot promise HCL's value: an attribute
// holding a numeral beyond float64's range (which HCL refuses), a string that is not a
// plain whole number where a number is wanted, or not "true", "false", "1" or "0" where a
// bool is, a result that is not whole or beyond 2^53, a negative zero, a key missing from
// the table it indexes. The Expr then has HCL evaluate the whole expression, which gives
// its value or its error. A prog evaluates every subexpression HCL evaluates (both
// operands, both branches of a conditional, every argument), so it never succeeds where
// HCL fails; short-circuits that HCL takes are left to HCL by the same fallback.
//
// Every number a prog holds is a whole number of magnitude at most 2^53, which every cty
// number of at least 53 bits of precision holds exactly; so the big.Float arithmetic HCL
// does on the same values is exact too and gives the same result.
type prog struct {
	typ progType
	str func(Request) (string, bool)
	num func(Request) (int64, bool)
	bln func(Request) (bool, bool)
}

type progType uint8

const (
	progString progType = iota + 1
	progNumber
	progBool
)

// text returns p's value converted to a string as cty converts: a number in decimal, a bool
// as "true" or "false".
func (p *prog) text(r Request) (string, bool) {
	switch p.typ {
	case progString:
		return p.str(r)
	case progNumber:
		n, ok := p.num(r)
		return strconv.FormatInt(n, 10), ok
	}
	b, ok := p.bln(r)
	return strconv.FormatBool(b), ok
}

// ok evaluates p for whether it gives HCL's value, and discards the value.
func (p *prog) ok(r Request) bool {
	var ok bool
	switch p.typ {
	case progString:
		_, ok = p.str(r)
	case progNumber:
		_, ok = p.num(r)
	default:
		_, ok = p.bln(r)
	}
	return ok
}

// number returns p's value converted to a number; a string converts when it is a plain
// whole number (see parseWhole).
func (p *prog) number(r Request) (int64, bool) {
	switch p.typ {
	case progNumber:
		return p.num(r)
	case progString:
		s, ok := p.str(r)
		if !ok {
			return 0, false
		}
		return parseWhole(s)
	}
	return 0, false
}

// boolean returns p's value converted to a bool; a string converts as cty converts it.
func (p *prog) boolean(r Request) (bool, bool) {
	switch p.typ {
	case progBool:
		return p.bln(r)
	case progString:
		s, ok := p.str(r)
		if !ok {
			return false, false
		}
		switch s {
		case "true", "1":
			return true, true
		case "false", "0":
			return false, true
		}
	}
	return false, false
}

// asString is p converted to a string.
func (p *prog) asString() *prog {
	if p.typ == progString {
		return p
	}
	return &prog{typ: progString, str: p.text}
}

// asNumber is p converted to a number, or nil where cty has no conversion (from a bool).
func (p *prog) asNumber() *prog {
	switch p.typ {
	case progNumber:
		return p
	case progString:
		return &prog{typ: progNumber, num: p.number}
	}
	return nil
}

// asBool is p converted to a bool, or nil where cty has no conversion (from a number).
func (p *prog) asBool() *prog {
	switch p.typ {
	case progBool:
		return p
	case progString:
		return &prog{typ: progBool, bln: p.boolean}
	}
	return nil
}

// parseWhole reads s as cty.ParseNumberVal does where that gives a whole number of
// magnitude at most 2^53: an optional sign and decimal digits. Anything else (fractions,
// exponents, spaces, "Inf", negative zero, larger numbers) is not ok.
func parseWhole(s string) (int64, bool) {
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" || len(s) > 16 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if n > maxExact || neg && n == 0 {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// wholeNumber returns f as an int64 when it is a whole number a prog may hold: magnitude at
// most 2^53, not negative zero, and a precision of at least 64 bits (or exactly zero), so
// that cty's arithmetic on it is exact.
func wholeNumber(f *big.Float) (int64, bool) {
	if !f.IsInt() || f.Sign() == 0 && f.Signbit() {
		return 0, false
	}
	if f.Prec() < 64 && f.Sign() != 0 {
		return 0, false
	}
	n, acc := f.Int64()
	if acc != big.Exact || n > maxExact || n < -maxExact {
		return 0, false
	}
	return n, true
}

// compileProg compiles syn, an expression of scope sc that has passed compile's checks,
// to a prog; nil when it takes a form that is not compiled (HCL evaluates those).
func (env *evalEnv) compileProg(syn hclsyntax.Expression, sc scope) *prog {
	if sc.root == "" {
		return nil
	}
	c := &progCompiler{env: env, sc: sc}
	return c.expr(syn)
}

type progCompiler struct {
	env *evalEnv
	sc  scope
}

func (c *progCompiler) expr(x hclsyntax.Expression) *prog {
	if !usesRoot(x, c.sc) {
		v, ok := c.constant(x)
		if !ok {
			return nil
		}
		return constProg(v)
	}
	switch x := x.(type) {
	case *hclsyntax.ParenthesesExpr:
		return c.expr(x.Expression)
	case *hclsyntax.TemplateWrapExpr:
		return c.expr(x.Wrapped)
	case *hclsyntax.ScopeTraversalExpr:
		return c.ref(x)
	case *hclsyntax.BinaryOpExpr:
		return c.binary(x)
	case *hclsyntax.UnaryOpExpr:
		return c.unary(x)
	case *hclsyntax.ConditionalExpr:
		return c.conditional(x)
	case *hclsyntax.TemplateExpr:
		return c.template(x)
	case *hclsyntax.FunctionCallExpr:
		return c.call(x)
	case *hclsyntax.IndexExpr:
		return c.index(x)
	}
	return nil
}

// constant evaluates x, which reads no request attribute, to a known value that is not
// null.
func (c *progCompiler) constant(x hclsyntax.Expression) (cty.Value, bool) {
	if usesRoot(x, c.sc) {
		return cty.NilVal, false
	}
	v, diags := x.Value(c.env.ctx)
	if diags.HasErrors() || !v.IsWhollyKnown() || v.IsNull() || v.IsMarked() {
		return cty.NilVal, false
	}
	return v, true
}

// constProg is the prog of a constant string, bool or whole number; nil for anything else.
func constProg(v cty.Value) *prog {
	switch v.Type() {
	case cty.String:
		s := v.AsString()
		return &prog{typ: progString, str: func(Request) (string, bool) { return s, true }}
	case cty.Bool:
		b := v.True()
		return &prog{typ: progBool, bln: func(Request) (bool, bool) { return b, true }}
	case cty.Number:
		n, ok := wholeNumber(v.AsBigFloat())
		if !ok {
			return nil
		}
		return &prog{typ: progNumber, num: func(Request) (int64, bool) { return n, true }}
	}
	return nil
}

// ref compiles a reference to the request's attribute (in NFC, as HCL reads it) or, in a
// bare scope, to the client's number.
func (c *progCompiler) ref(x *hclsyntax.ScopeTraversalExpr) *prog {
	a, ok := rootRef(x, c.sc)
	if !ok {
		return nil
	}
	if c.sc.bare {
		return &prog{typ: progNumber, num: func(r Request) (int64, bool) {
			n, err := strconv.ParseInt(r.Attr(a), 10, 64)
			return n, err == nil && n <= maxExact && n >= -maxExact
		}}
	}
	return &prog{typ: progString, str: func(r Request) (string, bool) {
		v := r.Attr(a)
		if hugeNumeral(v) {
			return "", false
		}
		return cty.NormalizeString(v), true
	}}
}

func (c *progCompiler) binary(x *hclsyntax.BinaryOpExpr) *prog {
	l, r := c.expr(x.LHS), c.expr(x.RHS)
	if l == nil || r == nil {
		return nil
	}
	switch x.Op {
	case hclsyntax.OpEqual:
		return equal(l, r, true)
	case hclsyntax.OpNotEqual:
		return equal(l, r, false)
	case hclsyntax.OpLogicalAnd, hclsyntax.OpLogicalOr:
		l, r = l.asBool(), r.asBool()
		if l == nil || r == nil {
			return nil
		}
		lf, rf, and := l.bln, r.bln, x.Op == hclsyntax.OpLogicalAnd
		return &prog{typ: progBool, bln: func(q Request) (bool, bool) {
			a, ok1 := lf(q)
			b, ok2 := rf(q)
			if and {
				return a && b, ok1 && ok2
			}
			return a || b, ok1 && ok2
		}}
	}
	l, r = l.asNumber(), r.asNumber()
	if l == nil || r == nil {
		return nil
	}
	lf, rf := l.num, r.num
	compare := func(f func(a, b int64) bool) *prog {
		return &prog{typ: progBool, bln: func(q Request) (bool, bool) {
			a, ok1 := lf(q)
			b, ok2 := rf(q)
			return f(a, b), ok1 && ok2
		}}
	}
	arith := func(f func(a, b int64) (int64, bool)) *prog {
		return &prog{typ: progNumber, num: func(q Request) (int64, bool) {
			a, ok1 := lf(q)
			b, ok2 := rf(q)
			if !ok1 || !ok2 {
				return 0, false
			}
			return f(a, b)
		}}
	}
	switch x.Op {
	case hclsyntax.OpLessThan:
		return compare(func(a, b int64) bool { return a < b })
	case hclsyntax.OpLessThanOrEqual:
		return compare(func(a, b int64) bool { return a <= b })
	case hclsyntax.OpGreaterThan:
		return compare(func(a, b int64) bool { return a > b })
	case hclsyntax.OpGreaterThanOrEqual:
		return compare(func(a, b int64) bool { return a >= b })
	case hclsyntax.OpAdd:
		return arith(func(a, b int64) (int64, bool) { return exact(a + b) })
	case hclsyntax.OpSubtract:
		return arith(func(a, b int64) (int64, bool) { return exact(a - b) })
	case hclsyntax.OpMultiply:
		return arith(multiply)
	case hclsyntax.OpDivide:
		return arith(divide)
	case hclsyntax.OpModulo:
		return arith(modulo)
	}
	return nil
}

// exact passes n on when a prog may hold it (|n| <= 2^53). Operands of at most 2^53 cannot
// overflow an int64 in a sum or difference.
func exact(n int64) (int64, bool) { return n, n <= maxExact && n >= -maxExact }

// multiply is a*b; a zero with a negative operand would be cty's negative zero.
func multiply(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, a >= 0 && b >= 0
	}
	hi, lo := bits.Mul64(uint64(abs(a)), uint64(abs(b)))
	if hi != 0 || lo > maxExact {
		return 0, false
	}
	if a < 0 != (b < 0) {
		return -int64(lo), true
	}
	return int64(lo), true
}

// divide is a/b when that is whole; division by zero is HCL's to report, and 0 divided by a
// negative number is negative zero.
func divide(a, b int64) (int64, bool) {
	if b == 0 || a%b != 0 || a == 0 && b < 0 {
		return 0, false
	}
	return a / b, true
}

// modulo is cty's Modulo, a - trunc(a/b)*b, which is Go's %; for b == 0 cty returns a,
// which HCL evaluates.
func modulo(a, b int64) (int64, bool) {
	if b == 0 {
		return 0, false
	}
	return a % b, true
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// equal compiles == (eq) or !=: cty's Equals, for which values of different types are not
// equal; both operands are still evaluated.
func equal(l, r *prog, eq bool) *prog {
	var f func(q Request) (bool, bool)
	switch {
	case l.typ != r.typ:
		f = func(q Request) (bool, bool) { return false, l.ok(q) && r.ok(q) }
	case l.typ == progString:
		lf, rf := l.str, r.str
		f = func(q Request) (bool, bool) {
			a, ok1 := lf(q)
			b, ok2 := rf(q)
			return a == b, ok1 && ok2
		}
	case l.typ == progNumber:
		lf, rf := l.num, r.num
		f = func(q Request) (bool, bool) {
			a, ok1 := lf(q)
			b, ok2 := rf(q)
			return a == b, ok1 && ok2
		}
	default:
		lf, rf := l.bln, r.bln
		f = func(q Request) (bool, bool) {
			a, ok1 := lf(q)
			b, ok2 := rf(q)
			return a == b, ok1 && ok2
		}
	}
	if eq {
		return &prog{typ: progBool, bln: f}
	}
	return &prog{typ: progBool, bln: func(q Request) (bool, bool) {
		b, ok := f(q)
		return !b, ok
	}}
}

func (c *progCompiler) unary(x *hclsyntax.UnaryOpExpr) *prog {
	v := c.expr(x.Val)
	if v == nil {
		return nil
	}
	switch x.Op {
	case hclsyntax.OpLogicalNot:
		if v = v.asBool(); v == nil {
			return nil
		}
		f := v.bln
		return &prog{typ: progBool, bln: func(q Request) (bool, bool) {
			b, ok := f(q)
			return !b, ok
		}}
	case hclsyntax.OpNegate:
		if v = v.asNumber(); v == nil {
			return nil
		}
		f := v.num
		return &prog{typ: progNumber, num: func(q Request) (int64, bool) {
			n, ok := f(q)
			return -n, ok && n != 0 // -0 is negative zero
		}}
	}
	return nil
}

// conditional compiles cond ? a : b. HCL evaluates both results and unifies their types:
// a string with a number or bool gives a string.
func (c *progCompiler) conditional(x *hclsyntax.ConditionalExpr) *prog {
	cond, t, f := c.expr(x.Condition), c.expr(x.TrueResult), c.expr(x.FalseResult)
	if cond == nil || t == nil || f == nil {
		return nil
	}
	if cond = cond.asBool(); cond == nil {
		return nil
	}
	if t.typ != f.typ {
		if t.typ != progString && f.typ != progString {
			return nil
		}
		t, f = t.asString(), f.asString()
	}
	cf := cond.bln
	switch t.typ {
	case progString:
		return &prog{typ: progString, str: choose(cf, t.str, f.str)}
	case progNumber:
		return &prog{typ: progNumber, num: choose(cf, t.num, f.num)}
	}
	return &prog{typ: progBool, bln: choose(cf, t.bln, f.bln)}
}

// choose returns cond ? a : b, evaluating all three as HCL does: ok only when each is.
func choose[T any](cond func(Request) (bool, bool), a, b func(Request) (T, bool)) func(Request) (T, bool) {
	return func(q Request) (T, bool) {
		x, ok1 := a(q)
		y, ok2 := b(q)
		k, ok3 := cond(q)
		if k {
			return x, ok1 && ok2 && ok3
		}
		return y, ok1 && ok2 && ok3
	}
}

// template compiles a string template: its parts converted to strings and concatenated,
// in NFC as cty makes every string.
func (c *progCompiler) template(x *hclsyntax.TemplateExpr) *prog {
	parts := make([]func(Request) (string, bool), len(x.Parts))
	for i, p := range x.Parts {
		pp := c.expr(p)
		if pp == nil {
			return nil
		}
		parts[i] = pp.asString().str
	}
	return &prog{typ: progString, str: func(q Request) (string, bool) {
		var b strings.Builder
		ok := true
		for _, f := range parts {
			s, k := f(q)
			ok = ok && k
			b.WriteString(s)
		}
		return cty.NormalizeString(b.String()), ok
	}}
}

// call compiles the policy functions that work on strings, conversions, and lookup and
// contains on constant tables.
func (c *progCompiler) call(x *hclsyntax.FunctionCallExpr) *prog {
	if x.ExpandFinal {
		return nil
	}
	if n, ok := progArity[x.Name]; !ok || n != len(x.Args) && !(n < 0 && len(x.Args) > 0) {
		return nil
	}
	args := make([]*prog, len(x.Args))
	switch x.Name {
	case "lookup", "contains", "cidrcontains", "ceil", "floor":
	default:
		for i, a := range x.Args {
			if args[i] = c.expr(a); args[i] == nil {
				return nil
			}
		}
	}
	switch x.Name {
	case "lower":
		return stringFunc(args[0], lowerText)
	case "upper":
		return stringFunc(args[0], upperText)
	case "trimspace":
		return stringFunc(args[0], strings.TrimSpace)
	case "tostring":
		return args[0].asString()
	case "tonumber":
		return args[0].asNumber()
	case "tobool":
		return args[0].asBool()
	case "startswith":
		return predicate(args[0], args[1], strings.HasPrefix)
	case "endswith":
		return predicate(args[0], args[1], strings.HasSuffix)
	case "strcontains":
		return predicate(args[0], args[1], strings.Contains)
	case "glob":
		return predicate(args[0], args[1], Glob)
	case "trimprefix":
		return stringFunc2(args[0], args[1], strings.TrimPrefix)
	case "trimsuffix":
		return stringFunc2(args[0], args[1], strings.TrimSuffix)
	case "cidrcontains":
		return c.cidrContains(x)
	case "contains":
		return c.contains(x)
	case "lookup":
		return c.lookup(x)
	case "ceil":
		return c.round(x.Args[0], true)
	case "floor":
		return c.round(x.Args[0], false)
	case "max":
		return extreme(args, func(a, b int64) bool { return a > b })
	case "min":
		return extreme(args, func(a, b int64) bool { return a < b })
	case "try":
		return try(args, false)
	case "can":
		return try(args, true)
	}
	return nil
}

// round compiles ceil(x) (up) or floor(x). A whole number is its own ceiling; a division
// of whole numbers is rounded exactly, as cty rounds its 64-bit-or-more quotient: operands
// of at most 2^53 leave the exact quotient at least 2^-53 of its size from a whole number.
func (c *progCompiler) round(x hclsyntax.Expression, up bool) *prog {
	div, ok := unparen(x).(*hclsyntax.BinaryOpExpr)
	if !ok || div.Op != hclsyntax.OpDivide || !usesRoot(div, c.sc) {
		if v := c.expr(x); v != nil {
			return v.asNumber()
		}
		return nil
	}
	l, r := c.expr(div.LHS), c.expr(div.RHS)
	if l == nil || r == nil {
		return nil
	}
	if l, r = l.asNumber(), r.asNumber(); l == nil || r == nil {
		return nil
	}
	lf, rf := l.num, r.num
	return &prog{typ: progNumber, num: func(q Request) (int64, bool) {
		a, ok1 := lf(q)
		b, ok2 := rf(q)
		if !ok1 || !ok2 || b == 0 {
			return 0, false
		}
		n := a / b // truncated
		if a%b != 0 {
			positive := (a < 0) == (b < 0)
			switch {
			case up && positive:
				n++
			case !up && !positive:
				n--
			}
		}
		return n, true
	}}
}

// extreme compiles max (when first(a, b) is a > b) or min: the first of the greatest (or
// least) numbers.
func extreme(args []*prog, first func(a, b int64) bool) *prog {
	fs := make([]func(Request) (int64, bool), len(args))
	for i, a := range args {
		if a = a.asNumber(); a == nil {
			return nil
		}
		fs[i] = a.num
	}
	return &prog{typ: progNumber, num: func(q Request) (int64, bool) {
		m, ok := fs[0](q)
		for _, f := range fs[1:] {
			n, k := f(q)
			ok = ok && k
			if first(n, m) {
				m = n
			}
		}
		return m, ok
	}}
}

// try compiles try(a, ...), or can(a, ...) when can is set (which has one argument, as
// HCL checks at load time). HCL gives a's value when a succeeds; a prog that is not ok
// may mean a fails or only that the prog cannot promise its value, so the prog gives a's
// value (or true) only when every argument is ok, and HCL decides otherwise.
func try(args []*prog, can bool) *prog {
	first, rest := args[0], args[1:]
	others := func(q Request) bool {
		ok := true
		for _, a := range rest {
			ok = a.ok(q) && ok
		}
		return ok
	}
	if can {
		return &prog{typ: progBool, bln: func(q Request) (bool, bool) { return true, first.ok(q) }}
	}
	switch first.typ {
	case progString:
		f := first.str
		return &prog{typ: progString, str: func(q Request) (string, bool) {
			s, ok := f(q)
			return s, others(q) && ok
		}}
	case progNumber:
		f := first.num
		return &prog{typ: progNumber, num: func(q Request) (int64, bool) {
			n, ok := f(q)
			return n, others(q) && ok
		}}
	}
	f := first.bln
	return &prog{typ: progBool, bln: func(q Request) (bool, bool) {
		b, ok := f(q)
		return b, others(q) && ok
	}}
}

// progArity lists the functions call compiles, with their number of arguments (-1: one or
// more).
var progArity = map[string]int{
	"lower": 1, "upper": 1, "trimspace": 1, "tostring": 1, "tonumber": 1, "tobool": 1,
	"startswith": 2, "endswith": 2, "strcontains": 2, "glob": 2, "trimprefix": 2, "trimsuffix": 2,
	"cidrcontains": 2, "contains": 2, "lookup": 3,
	"ceil": 1, "floor": 1, "max": -1, "min": -1, "try": -1, "can": 1,
}

// stringFunc compiles a function of one string giving a string, normalized as cty.StringVal
// normalizes.
func stringFunc(arg *prog, f func(string) string) *prog {
	a := arg.asString().str
	return &prog{typ: progString, str: func(q Request) (string, bool) {
		s, ok := a(q)
		return cty.NormalizeString(f(s)), ok
	}}
}

func stringFunc2(arg0, arg1 *prog, f func(s, t string) string) *prog {
	a, b := arg0.asString().str, arg1.asString().str
	return &prog{typ: progString, str: func(q Request) (string, bool) {
		s, ok1 := a(q)
		t, ok2 := b(q)
		return cty.NormalizeString(f(s, t)), ok1 && ok2
	}}
}

func predicate(arg0, arg1 *prog, f func(s, t string) bool) *prog {
	a, b := arg0.asString().str, arg1.asString().str
	return &prog{typ: progBool, bln: func(q Request) (bool, bool) {
		s, ok1 := a(q)
		t, ok2 := b(q)
		return f(s, t), ok1 && ok2
	}}
}

// lowerText is lower(): mapRunes with unicode.ToLower, without allocating for ASCII text
// that is already lower case.
func lowerText(s string) string { return caseText(s, 'A', unicode.ToLower) }

// upperText is upper(), as lowerText.
func upperText(s string) string { return caseText(s, 'a', unicode.ToUpper) }

// caseText maps s with to as mapRunes does; for ASCII, to changes exactly the 26 letters
// from first.
func caseText(s string, first byte, to func(rune) rune) string {
	change := -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return mapRunes(s, to)
		}
		if change < 0 && c >= first && c < first+26 {
			change = i
		}
	}
	if change < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:change])
	for i := change; i < len(s); i++ {
		c := s[i]
		if c >= first && c < first+26 {
			c ^= 0x20
		}
		b.WriteByte(c)
	}
	return b.String()
}

// cidrContains compiles cidrcontains with a constant prefix.
func (c *progCompiler) cidrContains(x *hclsyntax.FunctionCallExpr) *prog {
	pv, ok := c.constant(x.Args[0])
	if !ok || pv.Type() != cty.String {
		return nil
	}
	prefix, err := netip.ParsePrefix(pv.AsString())
	if err != nil {
		return nil
	}
	addr := c.expr(x.Args[1])
	if addr == nil {
		return nil
	}
	a := addr.asString().str
	return &prog{typ: progBool, bln: func(q Request) (bool, bool) {
		s, ok := a(q)
		ip, err := netip.ParseAddr(s)
		return err == nil && prefix.Contains(ip.Unmap()), ok
	}}
}

// contains compiles contains(<constant list, tuple or set>, value): cty's Equals against
// each element, which never holds between values of different types.
func (c *progCompiler) contains(x *hclsyntax.FunctionCallExpr) *prog {
	list, ok := c.constant(x.Args[0])
	if !ok {
		return nil
	}
	ty := list.Type()
	if !ty.IsListType() && !ty.IsTupleType() && !ty.IsSetType() {
		return nil
	}
	v := c.expr(x.Args[1])
	if v == nil {
		return nil
	}
	strs, nums, bools := map[string]bool{}, map[int64]bool{}, map[bool]bool{}
	for it := list.ElementIterator(); it.Next(); {
		_, e := it.Element()
		switch e.Type() {
		case cty.String:
			strs[e.AsString()] = true
		case cty.Bool:
			bools[e.True()] = true
		case cty.Number:
			f := e.AsBigFloat()
			if n, acc := f.Int64(); f.IsInt() && acc == big.Exact && n <= maxExact && n >= -maxExact {
				nums[n] = true // -0 is 0: cty's Equals holds them equal
			}
		}
	}
	switch v.typ {
	case progString:
		f := v.str
		return &prog{typ: progBool, bln: func(q Request) (bool, bool) {
			s, ok := f(q)
			return strs[s], ok
		}}
	case progNumber:
		f := v.num
		return &prog{typ: progBool, bln: func(q Request) (bool, bool) {
			n, ok := f(q)
			return nums[n], ok
		}}
	}
	f := v.bln
	return &prog{typ: progBool, bln: func(q Request) (bool, bool) {
		b, ok := f(q)
		return bools[b], ok
	}}
}

// progTable is a constant map or object whose elements all have one type a prog can hold.
type progTable struct {
	typ    progType
	object bool
	strs   map[string]string
	nums   map[string]int64
	bools  map[string]bool
}

// table reads v as a progTable; ok is false for anything else. An empty table has the type
// of the default given (def), and so does a table when def is set and progString is
// wanted for a map's conversion.
func table(v cty.Value) (*progTable, bool) {
	ty := v.Type()
	if !ty.IsMapType() && !ty.IsObjectType() {
		return nil, false
	}
	t := &progTable{object: ty.IsObjectType(), strs: map[string]string{}, nums: map[string]int64{}, bools: map[string]bool{}}
	if ty.IsMapType() {
		t.typ = primitive(ty.ElementType())
		if t.typ == 0 {
			return nil, false
		}
	}
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		et := primitive(e.Type())
		if et == 0 || t.typ != 0 && et != t.typ {
			return nil, false
		}
		t.typ = et
		key := k.AsString()
		switch et {
		case progString:
			t.strs[key] = e.AsString()
		case progBool:
			t.bools[key] = e.True()
		case progNumber:
			n, ok := wholeNumber(e.AsBigFloat())
			if !ok {
				return nil, false
			}
			t.nums[key] = n
		}
	}
	return t, true
}

func primitive(ty cty.Type) progType {
	switch ty {
	case cty.String:
		return progString
	case cty.Number:
		return progNumber
	case cty.Bool:
		return progBool
	}
	return 0
}

// lookup compiles lookup(<constant table>, key, default). For an object the result is the
// attribute's value or the default as it is, so every attribute and the default must have
// one type; for a map the default converts to the element type.
func (c *progCompiler) lookup(x *hclsyntax.FunctionCallExpr) *prog {
	tv, ok := c.constant(x.Args[0])
	if !ok {
		return nil
	}
	t, ok := table(tv)
	if !ok {
		return nil
	}
	key, def := c.expr(x.Args[1]), c.expr(x.Args[2])
	if key == nil || def == nil {
		return nil
	}
	switch {
	case t.typ == 0: // an empty object: always the default
		t.typ = def.typ
	case def.typ == t.typ:
	case t.object:
		return nil
	case t.typ == progString:
		def = def.asString()
	case t.typ == progNumber:
		def = def.asNumber()
	default:
		def = def.asBool()
	}
	if def == nil {
		return nil
	}
	return t.index(key.asString().str, def)
}

// index compiles local.<table>[key]: an element that is missing is HCL's error to report.
func (c *progCompiler) index(x *hclsyntax.IndexExpr) *prog {
	tv, ok := c.constant(x.Collection)
	if !ok {
		return nil
	}
	t, ok := table(tv)
	if !ok || t.typ == 0 {
		return nil
	}
	key := c.expr(x.Key)
	if key == nil {
		return nil
	}
	return t.index(key.asString().str, nil)
}

// index is t's element at key (NFC, like cty's keys), or def's value when it is missing;
// not ok when it is missing and def is nil.
func (t *progTable) index(key func(Request) (string, bool), def *prog) *prog {
	switch t.typ {
	case progString:
		var d func(Request) (string, bool)
		if def != nil {
			d = def.str
		}
		return &prog{typ: progString, str: lookupIn(t.strs, key, d)}
	case progNumber:
		var d func(Request) (int64, bool)
		if def != nil {
			d = def.num
		}
		return &prog{typ: progNumber, num: lookupIn(t.nums, key, d)}
	}
	var d func(Request) (bool, bool)
	if def != nil {
		d = def.bln
	}
	return &prog{typ: progBool, bln: lookupIn(t.bools, key, d)}
}

// lookupIn returns the element of m at key, or d's value when it is missing (d nil: not
// ok when it is missing).
func lookupIn[T any](m map[string]T, key func(Request) (string, bool), d func(Request) (T, bool)) func(Request) (T, bool) {
	return func(q Request) (T, bool) {
		k, ok := key(q)
		v, found := m[k]
		if d != nil {
			dv, dok := d(q)
			if !found {
				v = dv
			}
			return v, ok && dok
		}
		return v, ok && found
	}
}
