package dsl

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Request gives expressions the attributes of a request. Every attribute is a string; an
// attribute the request lacks is "" (so `request.user != ""` tests for its presence).
type Request interface {
	Attr(name string) string
}

// Expr is a compiled policy expression. Constants are folded at load time; a plain
// reference (request.ip) and a template of references and text
// ("${request.tenant}:${request.user}") run as Go code that reads the attributes and
// concatenates them, with no HCL evaluation; so does lookup(<constant map>, <reference or
// template>, <constant default>). The common forms beyond those are compiled to Go
// closures that compute what HCL would: comparisons, &&, || and !, conditionals,
// arithmetic on whole numbers, templates, lookup(), contains() and indexes into constant
// tables, and the string functions lower, upper, trimspace, trimprefix, trimsuffix,
// startswith, endswith, strcontains, glob, cidrcontains (of a constant prefix), the conversions
// tostring, tonumber and tobool, and ceil and floor (of a whole number or a division),
// max, min, try and can. Where a closure cannot promise HCL's exact
// value (a number that is not whole or beyond 2^53, a string that is not a plain whole
// number where a number is wanted, an error), HCL evaluates the expression instead, so
// the value, and any error, is always HCL's. Everything else is evaluated by HCL per
// request with the variables request and local and the policy functions; in a policy, a
// template of more than one value has HCL evaluate each interpolation that is not a plain
// reference on its own. An Expr is safe for concurrent use.
//
// # Keys
//
// A rule's key and a policy's shard are [Expr.String] of their expression, and two
// requests share a counter exactly when those strings are equal. So that distinct
// requests do not share one by accident, String is injective in the attribute values
// wherever the expression does not merge them on purpose:
//
//   - A reference gives the attribute's bytes as they are.
//   - A template that is the key or shard (or an interpolation in one) escapes, in each
//     value that another value follows, '%' and the first byte other than '%' of the
//     text between them, as %XX (upper-case hex): with "${request.a}:${request.b}",
//     a = "x:y", b = "z" gives "x%3Ay:z" and a = "x", b = "y:z" gives "x:y:z". The last
//     value is never escaped, so "ip:${request.ip}", and "${request.tenant}:${request.user}"
//     with a tenant free of ':' and '%', render as written. Values with nothing but '%'
//     between them cannot be told apart whatever is escaped; Load warns about them.
//     A template inside a function call or a conditional is a plain string, and lookups
//     and conditions see templates unescaped.
//   - Functions merge what they are written to merge: lower() and upper() give "A" and
//     "a" one key, trimspace() ignores spaces, lookup() maps many keys to one value, a
//     conditional or coalesce() chooses, format() and join() concatenate without
//     escaping (interpolate each value in the template instead). lower, upper and title
//     keep bytes that are not UTF-8 as they are. jsonencode and format's %q write them as
//     U+FFFD, as JSON requires.
//   - HCL's strings are Unicode text in Normalization Form C: an attribute that HCL
//     evaluates (anything but a reference or a template's plain reference) is read in
//     NFC, so canonically equivalent values ("é" as one code point, or "e" and a
//     combining accent) give the same result, and a lookup's key is matched in NFC. Plain
//     references keep the bytes as sent.
type Expr struct {
	kind  exprKind
	expr  hcl.Expression // the source; what HCL evaluates for kindEval
	attrs []string       // sorted, distinct attribute names read
	sc    scope
	env   *evalEnv

	val cty.Value // kindConst

	attr string // kindAttr

	parts []part // kindTemplate
	size  int    // the template's literal bytes

	key   *Expr                // kindLookup: the key, a kindAttr or kindTemplate
	table map[string]cty.Value // kindLookup
	def   cty.Value            // kindLookup

	prog *prog // kindEval: the expression compiled, or nil when HCL evaluates it
}

type exprKind uint8

const (
	kindConst    exprKind = iota // folded at load time
	kindAttr                     // one attribute, read as is
	kindTemplate                 // literal text and attributes, concatenated
	kindLookup                   // a constant table indexed by a kindAttr or kindTemplate key
	kindEval                     // evaluated by prog when set, falling back on HCL
)

// part is a piece of a template: literal text, the attribute attr when isAttr, or the
// value of expr. String escapes '%' and sep in a value when escape is set (see Expr).
type part struct {
	lit    string
	attr   string
	isAttr bool
	expr   *Expr     // a value HCL evaluates on its own; nil for text and attributes
	rng    hcl.Range // a value's source
	sep    byte
	escape bool
	joined bool // nothing but '%' separates this value from the previous one
}

// isValue reports whether p is a value rather than text.
func (p *part) isValue() bool { return p.isAttr || p.expr != nil }

// scope says which per-evaluation variable an expression may read besides local: request
// (an object of string attributes) in policies, client (a number) in traffic templates,
// nothing in locals and expectations.
type scope struct {
	root string // "request", "client" or ""
	bare bool   // root is itself the value, not an object of attributes
	// keyed templates escape their values so that distinct values render distinct strings:
	// keys and shards are rendered in this scope.
	keyed bool
	// where names the place for messages: "in a policy", "in locals".
	where string
}

var (
	requestScope = scope{root: "request", keyed: true, where: "Policy expressions can read request.<attribute> and local.<name>."}
	clientScope  = scope{root: "client", bare: true, where: "Traffic request templates can read client (the client's number) and local.<name>."}
	localsScope  = scope{where: "Locals are constants: they can read other locals (local.<name>) but not the request."}
	expectScope  = scope{where: "Expectations can read local.<name> and call the scenario functions."}
	constScope   = scope{where: "This attribute is a constant: it can read local.<name> but not the request."}
)

// evalEnv is what the expressions of one Config evaluate in.
type evalEnv struct {
	ctx    *hcl.EvalContext // Variables{"local": object of the locals}, and the functions
	locals map[string]cty.Value
	failed map[string]bool   // locals whose definition has errors (already reported)
	files  map[string][]byte // policy sources, to read JSON strings as templates
	json   map[string]bool   // which files are JSON
}

// String returns the expression's value for r as a string. Numbers and bools convert as
// in HCL ("42", "true"); a null or a collection is an error. In a policy, a template
// escapes the values that another value follows, so that distinct requests render
// distinct strings; see Keys under [Expr].
func (e *Expr) String(r Request) (string, error) { return e.text(r, true) }

// text returns the expression's value for r as a string; when keyed, a template escapes
// its values as String describes.
func (e *Expr) text(r Request, keyed bool) (string, error) {
	switch e.kind {
	case kindAttr:
		return r.Attr(e.attr), nil
	case kindTemplate:
		return e.render(r, keyed)
	}
	if e.prog != nil {
		if s, ok := e.prog.text(r); ok {
			return s, nil
		}
	}
	v, err := e.value(r)
	if err != nil {
		return "", err
	}
	return asString(v)
}

// Bool returns the expression's value for r as a bool ("true" and "false" convert).
func (e *Expr) Bool(r Request) (bool, error) {
	if e.prog != nil {
		if b, ok := e.prog.boolean(r); ok {
			return b, nil
		}
	}
	v, err := e.value(r)
	if err != nil {
		return false, err
	}
	return asBool(v)
}

// Int returns the expression's value for r as a whole number with magnitude at most 2^53
// (a numeric string such as "5" converts). The caller checks the sign.
func (e *Expr) Int(r Request) (int64, error) {
	if e.prog != nil {
		if n, ok := e.prog.number(r); ok {
			return n, nil
		}
	}
	v, err := e.value(r)
	if err != nil {
		return 0, err
	}
	return asInt(v)
}

// Range returns the expression's source range.
func (e *Expr) Range() hcl.Range { return e.expr.Range() }

// Attrs returns the names of the request attributes the expression reads, sorted.
func (e *Expr) Attrs() []string { return slices.Clone(e.attrs) }

// value returns the expression's value for r.
func (e *Expr) value(r Request) (cty.Value, error) {
	switch e.kind {
	case kindConst:
		return e.val, nil
	case kindAttr:
		return cty.StringVal(r.Attr(e.attr)), nil
	case kindTemplate:
		s, err := e.render(r, false)
		if err != nil {
			return cty.NilVal, err
		}
		return cty.StringVal(s), nil
	case kindLookup:
		k, err := e.lookupKey(r)
		if err != nil {
			return cty.NilVal, err
		}
		if v, ok := e.table[k]; ok {
			return v, nil
		}
		return e.def, nil
	}
	ctx := e.env.ctx.NewChild()
	ctx.Functions = e.env.ctx.Functions // for did-you-mean on unknown names
	if e.sc.bare {
		ctx.Variables = map[string]cty.Value{e.sc.root: bareValue(r.Attr(e.sc.root))}
	} else {
		attrs := make(map[string]cty.Value, len(e.attrs))
		for _, a := range e.attrs {
			v := r.Attr(a)
			if hugeNumeral(v) {
				return cty.NilVal, fmt.Errorf("request.%s is a number too large or too small for a 64-bit float", a)
			}
			attrs[a] = cty.StringVal(v)
		}
		ctx.Variables = map[string]cty.Value{e.sc.root: cty.ObjectVal(attrs)}
	}
	v, diags := e.expr.Value(ctx)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	return v, nil
}

// hugeNumeral reports whether s reads as a decimal number beyond float64's range. HCL would
// convert it to an exact number and take minutes to print it, so a request carrying one is
// refused rather than evaluated.
func hugeNumeral(s string) bool {
	if s == "" || !numeralStart(s[0]) || len(s) < 300 && !strings.ContainsAny(s, "eE") {
		return false
	}
	s = strings.TrimSpace(s)
	for i := 0; i < len(s); i++ {
		if !numeralByte(s[i]) {
			return false // not a number; ParseFloat would allocate its error
		}
	}
	_, err := strconv.ParseFloat(s, 64)
	return errors.Is(err, strconv.ErrRange)
}

// numeralStart reports whether a text starting with c can be a number out of range:
// ParseFloat's numbers start with a digit, a sign or a point, after any space that
// strings.TrimSpace removes (ASCII, or a byte of a multi-byte rune). A text like "/login"
// or "POST" is told apart at its first byte.
func numeralStart(c byte) bool {
	return '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.' || c >= 0x80 || strings.IndexByte(" \t\n\v\f\r", c) >= 0
}

// numeralByte reports whether c can be part of what strconv.ParseFloat reads as a number
// out of range: decimal or hex digits, signs, exponents, points and underscores.
func numeralByte(c byte) bool {
	switch {
	case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		return true
	}
	return strings.IndexByte("xXpP+-._", c) >= 0
}

// bareValue is the value of a bare root (client): a number when it is one.
func bareValue(s string) cty.Value {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return cty.NumberIntVal(n)
	}
	return cty.StringVal(s)
}

// render concatenates a template's parts; when keyed, it escapes the values marked escape.
func (e *Expr) render(r Request, keyed bool) (string, error) {
	var b strings.Builder
	b.Grow(e.size + 16*(len(e.parts)))
	for i := range e.parts {
		p := &e.parts[i]
		var v string
		switch {
		case p.isAttr:
			v = r.Attr(p.attr)
		case p.expr != nil:
			s, err := p.expr.text(r, keyed)
			if err != nil {
				return "", err
			}
			v = s
		default:
			b.WriteString(p.lit)
			continue
		}
		if keyed && p.escape {
			writeEscaped(&b, v, p.sep)
		} else {
			b.WriteString(v)
		}
	}
	return b.String(), nil
}

// writeEscaped writes v to b with every '%' and sep as %XX.
func writeEscaped(b *strings.Builder, v string, sep byte) {
	const digits = "0123456789ABCDEF"
	start := 0
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '%' || c == sep {
			b.WriteString(v[start:i])
			b.WriteByte('%')
			b.WriteByte(digits[c>>4])
			b.WriteByte(digits[c&15])
			start = i + 1
		}
	}
	b.WriteString(v[start:])
}

// lookupKey renders a kindLookup's key, normalized as HCL normalizes strings (NFC) so the
// table answers what lookup() would.
func (e *Expr) lookupKey(r Request) (string, error) {
	k, err := e.key.text(r, false)
	if err != nil {
		return "", err
	}
	return cty.NormalizeString(k), nil
}

func asString(v cty.Value) (string, error) {
	if v.IsNull() {
		return "", errors.New("the value is null; a string is required")
	}
	s, err := convert.Convert(v, cty.String)
	if err != nil {
		return "", fmt.Errorf("a string is required: %w", err)
	}
	if !s.IsKnown() {
		return "", errors.New("the value is not known")
	}
	return s.AsString(), nil
}

func asBool(v cty.Value) (bool, error) {
	if v.IsNull() {
		return false, errors.New("the value is null; a bool is required")
	}
	b, err := convert.Convert(v, cty.Bool)
	if err != nil {
		return false, fmt.Errorf("a bool is required: %w", err)
	}
	if !b.IsKnown() {
		return false, errors.New("the value is not known")
	}
	return b.True(), nil
}

func asInt(v cty.Value) (int64, error) {
	if v.IsNull() {
		return 0, errors.New("the value is null; a whole number is required")
	}
	n, err := convert.Convert(v, cty.Number)
	if err != nil {
		return 0, fmt.Errorf("a whole number is required: %w", err)
	}
	if !n.IsKnown() {
		return 0, errors.New("the value is not known")
	}
	f := n.AsBigFloat()
	if !f.IsInt() {
		return 0, fmt.Errorf("%s is not a whole number", numberText(f))
	}
	i, acc := f.Int64()
	if acc != big.Exact || i > maxExact || i < -maxExact {
		return 0, fmt.Errorf("%s is beyond 2^53, the largest exact count", numberText(f))
	}
	return i, nil
}

// numberText formats a number for a message: whole numbers up to 2^64 in full, others as
// the nearest float64. (big.Float's own Text takes minutes for 1e100000000, which a
// request attribute or a literal may hold.)
func numberText(f *big.Float) string {
	if f.IsInt() && f.MantExp(nil) <= 64 {
		return f.Text('f', 0)
	}
	x, _ := f.Float64()
	switch {
	case math.IsInf(x, 1):
		return "a number above 1e308"
	case math.IsInf(x, -1):
		return "a number below -1e308"
	case x == 0 && f.Sign() != 0:
		return "a number closer to 0 than 1e-308"
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// hugeNumber reports whether v holds a number beyond float64's range anywhere inside it:
// HCL's diagnostics print the values of the variables an expression reads, and printing
// such a number exactly takes minutes.
func hugeNumber(v cty.Value) bool {
	if !v.IsKnown() || v.IsNull() {
		return false
	}
	switch {
	case v.Type() == cty.Number:
		return v.AsBigFloat().MantExp(nil) > 1024 || v.AsBigFloat().MantExp(nil) < -1074
	case v.CanIterateElements():
		for it := v.ElementIterator(); it.Next(); {
			if _, e := it.Element(); hugeNumber(e) {
				return true
			}
		}
	}
	return false
}

const maxExact = 1 << 53

// compile checks expr's references and types for scope sc and compiles it. want is the
// type the value must convert to (cty.DynamicPseudoType for any). A constant that is null
// compiles to a kindConst with a null value; callers treat it as an unset attribute.
func (env *evalEnv) compile(expr hcl.Expression, sc scope, want cty.Type) (*Expr, hcl.Diagnostics) {
	expr = env.native(expr)
	attrs, poisoned, diags := env.refs(expr, sc)
	if diags.HasErrors() || poisoned {
		return nil, diags
	}
	e := &Expr{kind: kindEval, expr: expr, attrs: attrs, sc: sc, env: env}
	if len(attrs) == 0 {
		v, d := expr.Value(env.ctx)
		diags = append(diags, fixSuggestions(d, env.functionNames())...)
		if d.HasErrors() {
			return nil, diags
		}
		if !v.IsNull() && want != cty.DynamicPseudoType {
			cv, err := convert.Convert(v, want)
			if err != nil {
				return nil, append(diags, typeError(expr, want, v, sc))
			}
			v = cv
		}
		if !v.IsWhollyKnown() {
			return nil, append(diags, errorf(expr.Range(), "Value not known", "The value of this expression cannot be known when the policy loads."))
		}
		e.kind, e.val = kindConst, v
		return e, diags
	}
	// Type-check with the request's attributes unknown: this finds unknown functions,
	// wrong argument counts and types, and results of the wrong type, at load time.
	v, d := expr.Value(env.unknownCtx(sc, attrs))
	diags = append(diags, fixSuggestions(d, env.functionNames())...)
	if d.HasErrors() {
		return nil, diags
	}
	if want != cty.DynamicPseudoType {
		if _, err := convert.Convert(v, want); err != nil {
			return nil, append(diags, typeError(expr, want, v, sc))
		}
	}
	if syn, ok := expr.(hclsyntax.Expression); ok {
		env.fastPath(e, syn)
	}
	if e.kind == kindTemplate && sc.keyed && want == cty.String {
		diags = append(diags, runTogether(e.parts)...)
	}
	return e, diags
}

// runTogether warns about the values of a keyed template that follow another value with
// nothing but '%' between them: no escape can mark where one ends.
func runTogether(parts []part) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, p := range parts {
		if p.joined {
			diags = append(diags, warnf(p.rng, "Values run together", "Nothing separates this interpolation from the one before it, so different requests can render the same string: the values \"ab\" and \"\" give \"ab\", and so do \"a\" and \"b\". In a key or shard, such requests share one counter. Put text between them, such as \":\" (%% alone does not do: it is the escape character); a value that holds the text's first character has it escaped, so distinct values stay distinct."))
		}
	}
	return diags
}

// functionNames lists the policy functions.
func (env *evalEnv) functionNames() []string { return sortedKeys(env.ctx.Functions) }

// unknownCtx is env's context with sc's variable unknown.
func (env *evalEnv) unknownCtx(sc scope, attrs []string) *hcl.EvalContext {
	ctx := env.ctx.NewChild()
	ctx.Functions = env.ctx.Functions // for did-you-mean on unknown names
	if sc.bare {
		ctx.Variables = map[string]cty.Value{sc.root: cty.UnknownVal(cty.Number)}
		return ctx
	}
	obj := make(map[string]cty.Value, len(attrs))
	for _, a := range attrs {
		obj[a] = cty.UnknownVal(cty.String).RefineNotNull()
	}
	ctx.Variables = map[string]cty.Value{sc.root: cty.ObjectVal(obj)}
	return ctx
}

func typeError(expr hcl.Expression, want cty.Type, v cty.Value, sc scope) *hcl.Diagnostic {
	got := v.Type().FriendlyName()
	if strings.ContainsRune("aeiou", rune(got[0])) {
		got = "an " + got
	} else {
		got = "a " + got
	}
	if v.IsKnown() && v.Type().IsPrimitiveType() {
		got = showValue(v)
	}
	hint := ""
	if want == cty.Bool && sc.root == "request" {
		hint = ` Write a condition, such as request.user != "".`
	}
	return errorf(expr.Range(), "Incorrect value type", "A %s is required here, not %s.%s", want.FriendlyName(), got, hint)
}

// fastPath turns e into a kindAttr, kindTemplate or kindLookup when syn has that shape,
// and otherwise compiles it to a prog when it can.
func (env *evalEnv) fastPath(e *Expr, syn hclsyntax.Expression) {
	if !env.shortcut(e, syn) {
		e.prog = env.compileProg(syn, e.sc)
	}
}

// shortcut turns e into a kindAttr, kindTemplate or kindLookup when syn has that shape,
// and reports whether it did.
func (env *evalEnv) shortcut(e *Expr, syn hclsyntax.Expression) bool {
	if a, ok := rootRef(syn, e.sc); ok {
		e.kind, e.attr = kindAttr, a
		return true
	}
	if parts, ok := env.templateParts(syn, e.sc); ok {
		e.kind, e.parts = kindTemplate, parts
		for _, p := range parts {
			e.size += len(p.lit)
		}
		return true
	}
	call, ok := unparen(syn).(*hclsyntax.FunctionCallExpr)
	if !ok || call.Name != "lookup" || len(call.Args) != 3 || call.ExpandFinal {
		return false
	}
	if usesRoot(call.Args[0], e.sc) || usesRoot(call.Args[2], e.sc) {
		return false
	}
	table, d := call.Args[0].Value(env.ctx)
	if d.HasErrors() || !table.IsWhollyKnown() || table.IsNull() || !(table.Type().IsMapType() || table.Type().IsObjectType()) {
		return false
	}
	def, d := call.Args[2].Value(env.ctx)
	if d.HasErrors() || !def.IsWhollyKnown() {
		return false
	}
	key := &Expr{kind: kindEval, expr: call.Args[1], sc: e.sc, env: env}
	if !env.shortcut(key, call.Args[1]) || key.kind != kindAttr && key.kind != kindTemplate {
		return false
	}
	e.kind, e.key, e.def = kindLookup, key, def
	e.table = make(map[string]cty.Value, table.LengthInt())
	for it := table.ElementIterator(); it.Next(); {
		k, v := it.Element()
		e.table[k.AsString()] = v
	}
	return true
}

// templateParts returns the parts of a template made of literal text, references to sc's
// root and constant interpolations. In a keyed scope, a template of more than one value
// may also interpolate other expressions, each compiled on its own, and its values are
// marked for escaping.
func (env *evalEnv) templateParts(syn hclsyntax.Expression, sc scope) ([]part, bool) {
	t, ok := unparen(syn).(*hclsyntax.TemplateExpr)
	if !ok {
		return nil, false
	}
	var parts []part
	values, evaluated := 0, false
	for _, p := range t.Parts {
		if a, ok := rootRef(p, sc); ok {
			parts = append(parts, part{attr: a, isAttr: true, rng: p.Range()})
			values++
			continue
		}
		if usesRoot(p, sc) {
			if !sc.keyed {
				return nil, false
			}
			sub := &Expr{kind: kindEval, expr: p, sc: sc, env: env}
			sub.attrs, _, _ = env.refs(p, sc)
			env.fastPath(sub, p)
			parts = append(parts, part{expr: sub, rng: p.Range()})
			values++
			evaluated = true
			continue
		}
		v, d := p.Value(env.ctx)
		if d.HasErrors() {
			return nil, false
		}
		s, err := asString(v)
		if err != nil {
			return nil, false
		}
		if n := len(parts); n > 0 && !parts[n-1].isValue() {
			parts[n-1].lit += s
		} else {
			parts = append(parts, part{lit: s})
		}
	}
	if evaluated && values < 2 {
		return nil, false // one value: nothing to escape, so HCL evaluates it whole
	}
	if sc.keyed {
		markEscapes(parts)
	}
	return parts, true
}

// markEscapes marks, in each value that another value follows, the byte String escapes
// besides '%': the first byte other than '%' of the text between them, k bytes into it.
// The escaped value holds no such byte and decodes back (it holds '%' only in escapes), so
// it ends k bytes before the first occurrence of the byte after its start: every value
// can be read back from the rendered string. When the text is empty or all '%', no byte
// marks the boundary and the later value is marked joined.
func markEscapes(parts []part) {
	prev, text := -1, ""
	for i := range parts {
		p := &parts[i]
		if !p.isValue() {
			text += p.lit
			continue
		}
		if prev >= 0 {
			if sep := strings.TrimLeft(text, "%"); sep != "" {
				parts[prev].sep, parts[prev].escape = sep[0], true
			} else {
				p.joined = true
			}
		}
		prev, text = i, ""
	}
}

// rootRef returns the attribute a plain reference to sc's root names: request.ip gives
// "ip", request["x-forwarded-for"] gives "x-forwarded-for", and in a bare scope client
// gives "client".
func rootRef(x hclsyntax.Expression, sc scope) (string, bool) {
	switch x := x.(type) {
	case *hclsyntax.ParenthesesExpr:
		return rootRef(x.Expression, sc)
	case *hclsyntax.TemplateWrapExpr:
		return rootRef(x.Wrapped, sc)
	case *hclsyntax.ScopeTraversalExpr:
		t := x.Traversal
		if sc.root == "" || t.RootName() != sc.root {
			return "", false
		}
		if sc.bare {
			return sc.root, len(t) == 1
		}
		if len(t) != 2 {
			return "", false
		}
		return stepName(t[1])
	}
	return "", false
}

// unparen strips parentheses and template wrappers ("${...}").
func unparen(x hclsyntax.Expression) hclsyntax.Expression {
	for {
		switch p := x.(type) {
		case *hclsyntax.ParenthesesExpr:
			x = p.Expression
		case *hclsyntax.TemplateWrapExpr:
			x = p.Wrapped
		default:
			return x
		}
	}
}

// stepName returns the name a traversal step uses: .name or ["name"].
func stepName(s hcl.Traverser) (string, bool) {
	switch s := s.(type) {
	case hcl.TraverseAttr:
		return s.Name, true
	case hcl.TraverseIndex:
		if s.Key.Type() == cty.String && s.Key.IsKnown() && !s.Key.IsNull() {
			return s.Key.AsString(), true
		}
	}
	return "", false
}

// usesRoot reports whether x reads sc's root variable.
func usesRoot(x hcl.Expression, sc scope) bool {
	if sc.root == "" {
		return false
	}
	for _, t := range x.Variables() {
		if t.RootName() == sc.root {
			return true
		}
	}
	return false
}

// refs checks the variables expr reads in scope sc and returns the attributes of sc's root
// it reads. poisoned reports a reference to a local whose own definition failed: its
// error is already reported, so the expression is skipped without another.
func (env *evalEnv) refs(expr hcl.Expression, sc scope) (attrs []string, poisoned bool, diags hcl.Diagnostics) {
	for _, t := range expr.Variables() {
		root := t.RootName()
		switch {
		case root == "local":
			diags = append(diags, env.checkLocalRef(t)...)
			if name, ok := localName(t); ok && env.failed[name] {
				poisoned = true
			}
		case root == sc.root && sc.bare:
			attrs = append(attrs, root)
		case root == sc.root:
			if len(t) < 2 {
				diags = append(diags, errorf(t.SourceRange(), "Incomplete request reference", "Name the attribute: request.<attribute>, such as request.ip or request[\"x-api-key\"]. The request as a whole is not a value."))
				continue
			}
			name, ok := stepName(t[1])
			if !ok {
				diags = append(diags, errorf(t.SourceRange(), "Invalid request reference", "Request attributes are named by a string: request.<attribute> or request[\"<attribute>\"]."))
				continue
			}
			attrs = append(attrs, name)
		default:
			vars := []string{"local"}
			if sc.root != "" {
				vars = append(vars, sc.root)
			}
			diags = append(diags, errorf(t.SourceRange(), "Unknown variable", "There is no variable named %q.%s %s", root, suggestion(root, vars), sc.where))
		}
	}
	slices.Sort(attrs)
	return slices.Compact(attrs), poisoned, diags
}

// localName returns the name a local.<name> traversal reads.
func localName(t hcl.Traversal) (string, bool) {
	if len(t) < 2 {
		return "", false
	}
	return stepName(t[1])
}

// checkLocalRef checks that a traversal rooted at local names a defined local.
func (env *evalEnv) checkLocalRef(t hcl.Traversal) hcl.Diagnostics {
	if len(t) < 2 {
		return hcl.Diagnostics{errorf(t.SourceRange(), "Incomplete local reference", "Name the local value: local.<name>.")}
	}
	name, ok := stepName(t[1])
	if !ok {
		return hcl.Diagnostics{errorf(t.SourceRange(), "Invalid local reference", "Local values are named: local.<name>.")}
	}
	if _, ok := env.locals[name]; !ok && !env.failed[name] {
		names := make([]string, 0, len(env.locals))
		for n := range env.locals {
			names = append(names, n)
		}
		slices.Sort(names)
		return hcl.Diagnostics{errorf(t.SourceRange(), "Unknown local", "There is no local value named %q.%s Define it in a locals block.", name, suggestion(name, names))}
	}
	return nil
}

// native returns expr as native syntax when it is a JSON string, which HCL's JSON syntax
// reads as a template: the same template parsed with hclsyntax gets the fast paths and
// the static checks native files get. As in HCL's JSON parser, positions after an escape
// are a little early; strings that decode to line breaks or invalid UTF-8 are left to the
// JSON parser, as their positions would not stay inside the string.
func (env *evalEnv) native(expr hcl.Expression) hcl.Expression {
	if _, ok := expr.(hclsyntax.Expression); ok {
		return expr
	}
	r := expr.Range()
	if !env.json[r.Filename] {
		return expr
	}
	src := env.files[r.Filename]
	if r.Start.Byte < 0 || r.End.Byte > len(src) || r.End.Byte-r.Start.Byte < 2 {
		return expr
	}
	raw := src[r.Start.Byte:r.End.Byte]
	if raw[0] != '"' || raw[len(raw)-1] != '"' {
		return expr
	}
	inner := raw[1 : len(raw)-1]
	var s string
	if !utf8.Valid(inner) || json.Unmarshal(raw, &s) != nil || len(s) > len(inner) || strings.ContainsAny(s, "\r\n") {
		return expr
	}
	start := hcl.Pos{Line: r.Start.Line, Column: r.Start.Column + 1, Byte: r.Start.Byte + 1}
	t, diags := hclsyntax.ParseTemplate([]byte(s), r.Filename, start)
	if diags.HasErrors() {
		return expr
	}
	return t
}
