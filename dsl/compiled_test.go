package dsl

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// progLocals are the locals the generated expressions read: testLocals and tables of each
// kind contains, lookup and indexes take.
const progLocals = testLocals + `
locals {
  names  = ["alice", "Zoë", "", "5", "true"]
  nums   = [1, 5, -1, 0, 2.5]
  mixed  = ["1", 1, true]
  codes  = tomap({ a = "x", b = "y", "Zoë" = "z" })
  counts = tomap({ a = 1, b = 2 })
  flags  = { a = true, b = false }
  empty  = {}
}
`

// progEnv returns the evaluation environment of a file holding progLocals.
func progEnv(t testing.TB) *evalEnv {
	t.Helper()
	l := newLoader(nil)
	blocks := l.parse(source{name: "locals.hcl", src: []byte(progLocals)})
	var locals []*hcl.Block
	for _, b := range blocks {
		if b.Type == "locals" {
			locals = append(locals, b)
		}
	}
	l.decodeLocals(locals)
	if l.diags.HasErrors() {
		t.Fatal(l.diags)
	}
	return l.env
}

// progValues are attribute values that probe conversions: numerals of every form HCL reads
// (and some it does not), huge numbers, negative zero, bools, Unicode in and out of NFC,
// invalid UTF-8 and addresses.
var progValues = []string{
	"", "0", "-0", "+0", "1", "-1", "007", "+5", "1.5", "2", "3", "-7", "10",
	"9007199254740992", "9007199254740993", "-9007199254740992", "4503599627370497",
	"18446744073709551616", "1e3", "1e400", "-1e-400", "1" + strings.Repeat("0", 400),
	"0x10", "1_0", " 5", "5 ", "inf", "NaN",
	"true", "false", "TRUE", "True",
	"alice", "Alice", "ALICE", "Zoë", "Zoe\u0308", "ZOË", "ß", "İ", "ǅ", "日本", "\xff\xfe", " x ",
	"a", "b", "x", "POST", "/login", "/v1/items",
	"10.1.2.3", "::ffff:10.0.0.1", "2001:db8::1", "10.0.0.0/8",
}

var progAttrs = []string{"a", "b", "n", "flag"}

// exprGen generates policy expressions of the forms prog compiles, by type.
type exprGen struct{ rnd *rand.Rand }

func (g *exprGen) pick(xs ...string) string { return xs[g.rnd.IntN(len(xs))] }

func (g *exprGen) attr() string {
	a := progAttrs[g.rnd.IntN(len(progAttrs))]
	if g.rnd.IntN(8) == 0 {
		return fmt.Sprintf("request[%q]", a)
	}
	return "request." + a
}

func (g *exprGen) str(d int) string {
	if d <= 0 || g.rnd.IntN(3) == 0 {
		return g.pick(g.attr(), g.attr(), `""`, `"x"`, `"Zoë"`, `"alice"`, "local.prefix", `"/login"`)
	}
	d--
	switch g.rnd.IntN(15) {
	case 14:
		return fmt.Sprintf("try(%s, %s)", g.str(d), g.pick(g.str(d), `"none"`))
	case 0:
		return "lower(" + g.str(d) + ")"
	case 1:
		return "upper(" + g.str(d) + ")"
	case 2:
		return "trimspace(" + g.str(d) + ")"
	case 3:
		return fmt.Sprintf("trimprefix(%s, %s)", g.str(d), g.str(d))
	case 4:
		return fmt.Sprintf("trimsuffix(%s, %s)", g.str(d), g.str(d))
	case 5:
		return fmt.Sprintf(`"${%s}:${%s}"`, g.str(d), g.num(d))
	case 6:
		return fmt.Sprintf(`"p-${%s}${%s}"`, g.str(d), g.boolean(d))
	case 7:
		return fmt.Sprintf("%s ? %s : %s", g.boolean(d), g.str(d), g.str(d))
	case 8:
		return fmt.Sprintf("(%s ? %s : %s)", g.boolean(d), g.str(d), g.num(d))
	case 9:
		return fmt.Sprintf("lookup(local.%s, %s, %s)", g.pick("windows", "codes"), g.str(d), g.pick(g.str(d), g.num(d)))
	case 10:
		return fmt.Sprintf("local.%s[%s]", g.pick("windows", "codes"), g.str(d))
	case 11:
		return "tostring(" + g.pick(g.num(d), g.boolean(d), g.str(d)) + ")"
	case 12:
		return fmt.Sprintf(`"%%{if %s}yes%%{else}${%s}%%{endif}"`, g.boolean(d), g.str(d))
	}
	return fmt.Sprintf(`"${local.prefix}/${%s}"`, g.str(d))
}

func (g *exprGen) num(d int) string {
	if d <= 0 || g.rnd.IntN(3) == 0 {
		return g.pick(g.attr(), g.attr(), "0", "1", "-1", "2", "7", "9007199254740992", "local.n", "1.5")
	}
	d--
	switch g.rnd.IntN(17) {
	case 12:
		return fmt.Sprintf("%s(%s / %s)", g.pick("ceil", "floor"), g.num(d), g.num(d))
	case 13:
		return fmt.Sprintf("%s(%s)", g.pick("ceil", "floor"), g.num(d))
	case 14:
		return fmt.Sprintf("%s(%s, %s)", g.pick("max", "min"), g.num(d), g.num(d))
	case 15:
		return fmt.Sprintf("min(%s, %s, %s)", g.num(d), g.num(d), g.num(d))
	case 16:
		return fmt.Sprintf("try(%s, %s)", g.num(d), g.pick(g.num(d), "1"))
	case 0:
		return fmt.Sprintf("%s + %s", g.num(d), g.num(d))
	case 1:
		return fmt.Sprintf("%s - %s", g.num(d), g.num(d))
	case 2:
		return fmt.Sprintf("%s * %s", g.num(d), g.num(d))
	case 3:
		return fmt.Sprintf("(%s / %s)", g.num(d), g.num(d))
	case 4:
		return fmt.Sprintf("(%s %% %s)", g.num(d), g.num(d))
	case 5:
		return "-" + g.num(d)
	case 6:
		return fmt.Sprintf("(%s ? %s : %s)", g.boolean(d), g.num(d), g.num(d))
	case 7:
		return fmt.Sprintf("lookup(local.%s, %s, %s)", g.pick("tiers", "counts", "empty"), g.str(d), g.num(d))
	case 8:
		return fmt.Sprintf("local.%s[%s]", g.pick("tiers", "counts"), g.str(d))
	case 9:
		return "tonumber(" + g.pick(g.str(d), g.num(d)) + ")"
	}
	return "(" + g.num(d) + ")"
}

func (g *exprGen) boolean(d int) string {
	if d <= 0 || g.rnd.IntN(4) == 0 {
		return g.pick("true", "false", g.attr()+` != ""`, g.attr()+` == "x"`, "request.flag")
	}
	d--
	switch g.rnd.IntN(18) {
	case 17:
		return "can(" + g.pick(g.num(d), g.str(d), g.boolean(d)) + ")"
	case 0:
		return fmt.Sprintf("%s == %s", g.str(d), g.str(d))
	case 1:
		return fmt.Sprintf("%s != %s", g.str(d), g.str(d))
	case 2:
		return fmt.Sprintf("%s == %s", g.num(d), g.num(d))
	case 3:
		return fmt.Sprintf("%s != %s", g.pick(g.str(d), g.num(d), g.boolean(d)), g.pick(g.str(d), g.num(d), g.boolean(d)))
	case 4:
		return fmt.Sprintf("%s %s %s", g.num(d), g.pick("<", "<=", ">", ">="), g.num(d))
	case 5:
		return fmt.Sprintf("%s && %s", g.boolean(d), g.boolean(d))
	case 6:
		return fmt.Sprintf("(%s || %s)", g.boolean(d), g.boolean(d))
	case 7:
		return "!" + g.boolean(d)
	case 8:
		return fmt.Sprintf("(%s ? %s : %s)", g.boolean(d), g.boolean(d), g.boolean(d))
	case 9:
		return fmt.Sprintf("%s(%s, %s)", g.pick("startswith", "endswith", "strcontains", "glob"), g.str(d), g.str(d))
	case 10:
		return fmt.Sprintf("cidrcontains(%q, %s)", g.pick("10.0.0.0/8", "2001:db8::/32", "0.0.0.0/0"), g.str(d))
	case 11:
		return fmt.Sprintf("contains(local.%s, %s)", g.pick("names", "mixed"), g.pick(g.str(d), g.num(d), g.boolean(d)))
	case 12:
		return fmt.Sprintf("contains(local.nums, %s)", g.num(d))
	case 13:
		return "tobool(" + g.pick(g.str(d), g.boolean(d)) + ")"
	case 14:
		return fmt.Sprintf("lookup(local.flags, %s, %s)", g.str(d), g.boolean(d))
	case 15:
		return fmt.Sprintf("%s == %s", g.boolean(d), g.boolean(d))
	}
	return "(" + g.boolean(d) + ")"
}

func (g *exprGen) request() attrs {
	r := attrs{}
	for _, a := range progAttrs {
		if g.rnd.IntN(5) > 0 {
			r[a] = progValues[g.rnd.IntN(len(progValues))]
		}
	}
	return r
}

// hclOnly is e as HCL alone evaluates it.
func hclOnly(e *Expr) *Expr {
	return &Expr{kind: kindEval, expr: e.expr, attrs: e.attrs, sc: e.sc, env: e.env}
}

// compareEval evaluates e as a string, a bool and a whole number, compiled and by HCL, and
// reports where they differ: a different value, or an error on one side only.
func compareEval(t *testing.T, src string, e *Expr, r Request) {
	t.Helper()
	slow := hclOnly(e)
	show := func(v any, err error) string {
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("%q", fmt.Sprint(v))
	}
	check := func(as string, fv any, ferr error, sv any, serr error) {
		t.Helper()
		if (ferr != nil) != (serr != nil) || ferr == nil && fv != sv {
			t.Errorf("%s as %s on %q: compiled %s, HCL %s", src, as, r, show(fv, ferr), show(sv, serr))
		}
	}
	fs, ferr := e.String(r)
	ss, serr := slow.String(r)
	check("string", fs, ferr, ss, serr)
	fb, ferr := e.Bool(r)
	sb, serr := slow.Bool(r)
	check("bool", fb, ferr, sb, serr)
	fn, ferr := e.Int(r)
	sn, serr := slow.Int(r)
	check("int", fn, ferr, sn, serr)
}

// TestProgMatchesHCL evaluates generated expressions of every compiled form on generated
// requests (attributes missing, empty, numerals of every kind, huge numbers, Unicode,
// invalid UTF-8) compiled and by HCL, and requires the same value or an error from both.
func TestProgMatchesHCL(t *testing.T) {
	env := progEnv(t)
	g := &exprGen{rnd: rand.New(rand.NewPCG(1, 2))}
	n, compiled := 1500, 0
	if testing.Short() {
		n = 300
	}
	for i := 0; i < n; i++ {
		var src string
		switch i % 3 {
		case 0:
			src = g.boolean(3)
		case 1:
			src = g.str(3)
		default:
			src = g.num(3)
		}
		x, diags := hclsyntax.ParseExpression([]byte(src), "gen.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", src, diags)
		}
		e, diags := env.compile(x, requestScope, cty.DynamicPseudoType)
		if diags.HasErrors() || e.kind != kindEval {
			continue // ill-typed at load time (such as 1.5 % "x"), or a shortcut
		}
		if e.prog == nil {
			continue // a non-whole literal: not compiled
		}
		compiled++
		for j := 0; j < 12; j++ {
			compareEval(t, src, e, g.request())
		}
		compareEval(t, src, e, attrs{})
	}
	t.Logf("%d of %d generated expressions compiled", compiled, n)
	if compiled < n/4 {
		t.Errorf("only %d of %d generated expressions compiled", compiled, n)
	}
}

// TestProgCompiles checks which forms compile and which are left to HCL.
func TestProgCompiles(t *testing.T) {
	env := progEnv(t)
	tests := []struct {
		src      string
		compiled bool
	}{
		{`request.path == "/login" && request.method == "POST"`, true},
		{`lower(request.username)`, true},
		{`request.ip != "" ? 2 : 1`, true},
		{`tonumber(request.size) * 2 + 1`, true},
		{`contains(local.names, lower(request.user))`, true},
		{`local.tiers[request.plan]`, true},
		{`lookup(local.tiers, lower(request.plan), 30)`, true},
		{`cidrcontains("10.0.0.0/8", request.ip)`, true},
		{`"u:${lower(request.user)}"`, true},
		{`try(max(1, ceil(tonumber(request.content_length) / 1048576)), 1)`, true},
		{`can(tonumber(request.n))`, true},
		{`request.n * 1.5`, false},                       // not whole
		{`format("%s-%s", request.a, request.b)`, false}, // not compiled
		{`cidrcontains(request.prefix, request.ip)`, false},
		{`lookup(local.tiers, request.plan, "none")`, false}, // an object's attribute or a string
		{`contains(split(",", request.list), "x")`, false},
	}
	for _, tt := range tests {
		e, diags := compileString(t, env, tt.src, cty.DynamicPseudoType)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", tt.src, diags)
		}
		if got := e.prog != nil; got != tt.compiled {
			t.Errorf("%s: compiled %v, want %v", tt.src, got, tt.compiled)
		}
	}
}

// TestProgClient checks traffic templates, whose client is a number.
func TestProgClient(t *testing.T) {
	env := progEnv(t)
	for _, src := range []string{`"192.0.2.${client % 256}"`, `client * 3 - 1`, `client % 2 == 0`} {
		x, diags := hclsyntax.ParseExpression([]byte(src), "gen.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		e, diags := env.compile(x, clientScope, cty.DynamicPseudoType)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		if e.prog == nil {
			t.Errorf("%s: not compiled", src)
			continue
		}
		for _, c := range []string{"0", "1", "255", "256", "-3", "9007199254740993", "x", ""} {
			compareEval(t, src, e, attrs{"client": c})
		}
	}
}

// FuzzProgMatchesHCL checks, for any expression that compiles, that the compiled closure
// and HCL give the same value or both an error on a request of the two attributes a and b
// (request.n and request.flag read a too).
func FuzzProgMatchesHCL(f *testing.F) {
	f.Add(`request.a == "x" && request.b != ""`, "x", "")
	f.Add(`tonumber(request.a) % 7 - request.b`, "-15", "3")
	f.Add(`"${lower(request.a)}:${request.b == "" ? 0 : request.n}"`, "ZOË", "1")
	f.Add(`lookup(local.tiers, upper(request.a), 30) > request.b`, "pro", "9007199254740993")
	f.Add(`contains(local.nums, request.a * 1)`, "-0", "")
	f.Add(`request.flag || startswith(request.b, "/v1/")`, "1", "/v1/x")
	f.Add(`glob(request.a, "x*y*z") && !glob(request.b, "*")`, "xaybz", "")
	env := progEnv(f)
	f.Fuzz(func(t *testing.T, src, a, b string) {
		x, diags := hclsyntax.ParseExpression([]byte(src), "fuzz.hcl", hcl.InitialPos)
		if diags.HasErrors() || len(src) > 500 {
			return
		}
		e, diags := env.compile(x, requestScope, cty.DynamicPseudoType)
		if diags.HasErrors() || e == nil || e.prog == nil {
			return
		}
		compareEval(t, src, e, attrs{"a": a, "b": b, "n": a, "flag": a})
	})
}

// BenchmarkMatch evaluates login.hcl's policy match, rule conditions and keys on a request,
// compiled and by HCL.
func BenchmarkMatch(b *testing.B) {
	cfg, diags := Load("../policies/login.hcl")
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	p := cfg.Policies[0]
	r := &loginRequest{ip: "192.0.2.7", path: "/login", method: "POST", username: "Alice"}
	run := func(b *testing.B, match *Expr, whens, keys []*Expr) {
		b.ReportAllocs()
		for b.Loop() {
			if ok, err := match.Bool(r); !ok || err != nil {
				b.Fatal(ok, err)
			}
			for _, w := range whens {
				if ok, err := w.Bool(r); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
			for _, k := range keys {
				if _, err := k.String(r); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	var whens, keys, slowWhens, slowKeys []*Expr
	for _, ru := range p.Rules {
		if ru.When != nil {
			whens = append(whens, ru.When)
			slowWhens = append(slowWhens, hclOnly(ru.When))
		}
		keys = append(keys, ru.Key)
		if ru.Key.kind == kindEval {
			slowKeys = append(slowKeys, hclOnly(ru.Key))
		} else {
			slowKeys = append(slowKeys, ru.Key)
		}
	}
	b.Run("compiled", func(b *testing.B) {
		if p.Match.prog == nil {
			b.Fatal("match is not compiled")
		}
		run(b, p.Match, whens, keys)
	})
	b.Run("hcl", func(b *testing.B) { run(b, hclOnly(p.Match), slowWhens, slowKeys) })
}

// loginRequest is a Request as an engine might implement it: fields, no map.
type loginRequest struct{ ip, path, method, username string }

func (r *loginRequest) Attr(name string) string {
	switch name {
	case "ip":
		return r.ip
	case "path":
		return r.path
	case "method":
		return r.method
	case "username":
		return r.username
	}
	return ""
}
