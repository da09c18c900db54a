package dsl

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

const testLocals = `
locals {
  prefix = "rl"
  n      = 5
  tiers  = { free = 60, pro = 600, "Zoë" = 7 }
  windows = { free = "1m", pro = "10s" }
}
`

// testEnv returns the evaluation environment of a file holding testLocals.
func testEnv(t testing.TB) *evalEnv {
	t.Helper()
	l := newLoader(nil)
	blocks := l.parse(source{name: "locals.hcl", src: []byte(testLocals)})
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

func compileString(t testing.TB, env *evalEnv, src string, want cty.Type) (*Expr, hcl.Diagnostics) {
	t.Helper()
	x, diags := hclsyntax.ParseExpression([]byte(src), "expr.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("%s: %v", src, diags)
	}
	return env.compile(x, requestScope, want)
}

func TestCompile(t *testing.T) {
	env := testEnv(t)
	tests := []struct {
		src   string
		want  cty.Type
		kind  exprKind
		attrs string // comma-separated
		err   string // a substring of the first diagnostic's summary and detail
	}{
		{src: `request.ip`, kind: kindAttr, attrs: "ip"},
		{src: `request["x-api-key"]`, kind: kindAttr, attrs: "x-api-key"},
		{src: `(request.ip)`, kind: kindAttr, attrs: "ip"},
		{src: `"${request.ip}"`, kind: kindAttr, attrs: "ip"},
		{src: `"${request.tenant}:${request.user}"`, kind: kindTemplate, attrs: "tenant,user"},
		{src: `"${local.prefix}-${request.user}-${local.n}"`, kind: kindTemplate, attrs: "user"},
		{src: `"ip:${request.ip}"`, kind: kindTemplate, attrs: "ip"},
		{src: `lookup(local.tiers, request.plan, 30)`, kind: kindLookup, attrs: "plan"},
		{src: `lookup(local.tiers, "${request.plan}", 30)`, kind: kindLookup, attrs: "plan"},
		{src: `lookup(local.windows, "${request.region}-${request.plan}", "1m")`, kind: kindLookup, attrs: "plan,region"},
		{src: `lower(request.user)`, kind: kindEval, attrs: "user"},
		{src: `request.method == "POST" ? 5 : 1`, want: cty.Number, kind: kindEval, attrs: "method"},
		{src: `"%{if request.a != ""}x%{endif}"`, kind: kindEval, attrs: "a"},
		{src: `lookup(local.tiers, lower(request.plan), 30)`, kind: kindEval, attrs: "plan"},
		{src: `1 + 2`, want: cty.Number, kind: kindConst},
		{src: `local.tiers.pro`, want: cty.Number, kind: kindConst},
		{src: `"n${local.n}"`, kind: kindConst},
		{src: `upper("a")`, kind: kindConst},
		{src: `request.ip != ""`, want: cty.Bool, kind: kindEval, attrs: "ip"},
		{src: `request.flag`, want: cty.Bool, kind: kindAttr, attrs: "flag"},
		{src: `requst.ip`, err: `Unknown variable: There is no variable named "requst". Did you mean "request"?`},
		{src: `request`, err: "Incomplete request reference"},
		{src: `request[0]`, err: "Invalid request reference"},
		{src: `local.tier`, err: `Unknown local: There is no local value named "tier". Did you mean "tiers"?`},
		{src: `local`, err: "Incomplete local reference"},
		{src: `lowr(request.user)`, err: `Call to unknown function: There is no function named "lowr". Did you mean "lower"?`},
		{src: `upper(request.user, 1)`, err: "Too many function arguments"},
		{src: `request.user.name`, err: "Unsupported attribute"},
		{src: `{ a = 1 }`, want: cty.Bool, err: "Incorrect value type: A bool is required"},
		{src: `"yes"`, want: cty.Bool, err: "Incorrect value type"},
		{src: `cidrcontains("10.0.0/8", request.ip)`, want: cty.Bool, err: "not a CIDR prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			want := tt.want
			if want == cty.NilType {
				want = cty.String
			}
			e, diags := compileString(t, env, tt.src, want)
			if tt.err != "" {
				if !diags.HasErrors() {
					t.Fatalf("no error; want %q", tt.err)
				}
				if got := diags[0].Summary + ": " + diags[0].Detail; !strings.Contains(got, tt.err) {
					t.Fatalf("error %q; want %q", got, tt.err)
				}
				if e != nil {
					t.Error("an Expr despite errors")
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if e.kind != tt.kind {
				t.Errorf("kind %d, want %d", e.kind, tt.kind)
			}
			if got := strings.Join(e.Attrs(), ","); got != tt.attrs {
				t.Errorf("attrs %q, want %q", got, tt.attrs)
			}
		})
	}
}

// attrs is a Request with attributes in a map.
type attrs map[string]string

func (a attrs) Attr(name string) string { return a[name] }

func TestEval(t *testing.T) {
	env := testEnv(t)
	req := attrs{
		"ip": "10.1.2.3", "user": "Alice", "tenant": "acme", "plan": "pro", "method": "POST",
		"path": "/v1/items", "n": "5", "half": "1.5", "yes": "true", "big": "1e300",
	}
	tests := []struct {
		src  string
		as   string // "string", "bool" or "int"
		r    Request
		want string // the value printed, or "error: <substring>"
	}{
		{`request.ip`, "string", req, "10.1.2.3"},
		{`request.missing`, "string", req, ""},
		{`"${request.tenant}:${request.user}"`, "string", req, "acme:Alice"},
		{`"${request.tenant}:${request.user}"`, "string", attrs{}, ":"},
		{`"${local.prefix}:${request.user}"`, "string", req, "rl:Alice"},
		{`lower(request.user)`, "string", req, "alice"},
		{`lookup(local.tiers, request.plan, 30)`, "int", req, "600"},
		{`lookup(local.tiers, request.plan, 30)`, "int", attrs{"plan": "gold"}, "30"},
		{`lookup(local.tiers, request.plan, 30)`, "int", attrs{"plan": "Zoe\u0308"}, "7"}, // NFC, as HCL
		{`lookup(local.tiers, request.plan, 30)`, "string", req, "600"},
		{`request.method == "POST" ? 5 : 1`, "int", req, "5"},
		{`request.method == "POST" ? 5 : 1`, "int", attrs{}, "1"},
		{`request.n`, "int", req, "5"},
		{`request.half`, "int", req, "error: not a whole number"},
		{`request.big`, "int", req, "error: beyond 2^53"},
		{`request.n`, "int", attrs{"n": "1e100000000"}, "error: a number above 1e308 is beyond 2^53"},
		{`request.n`, "int", attrs{"n": "-1e-100000000"}, "error: a number closer to 0 than 1e-308 is not a whole number"},
		{`request.missing`, "int", req, "error: a whole number is required"},
		{`tonumber(request.n) * 2`, "int", req, "10"},
		{`request.ip != ""`, "bool", req, "true"},
		{`request.ip != ""`, "bool", attrs{}, "false"},
		{`request.yes`, "bool", req, "true"},
		{`request.user`, "bool", req, "error: a bool is required"},
		{`startswith(request.path, "/v1/")`, "bool", req, "true"},
		{`endswith(request.path, "items")`, "bool", req, "true"},
		{`strcontains(request.path, "1/i")`, "bool", req, "true"},
		{`cidrcontains("10.0.0.0/8", request.ip)`, "bool", req, "true"},
		{`cidrcontains("10.0.0.0/8", request.ip)`, "bool", attrs{"ip": "bogus"}, "false"},
		{`cidrcontains("2001:db8::/32", request.ip)`, "bool", attrs{"ip": "2001:db8::1"}, "true"},
		{`regex("^[a-z]+$", request.user)`, "string", req, "error: pattern did not match"},
		{`try(regex("^[a-z]+$", request.user), "none")`, "string", req, "none"},
		{`local.n`, "int", req, "5"},
		{`"${tonumber(request.n) * 2}"`, "string", attrs{"n": "21"}, "42"},
		{`"${tonumber(request.n) * 2}"`, "string", attrs{"n": "1e100000000"}, "error: too large or too small"},
		{`"${tonumber(request.n) * 2}"`, "string", attrs{"n": "1" + strings.Repeat("0", 400)}, "error: too large or too small"},
	}
	for _, tt := range tests {
		t.Run(tt.src+"/"+tt.as, func(t *testing.T) {
			want := map[string]cty.Type{"string": cty.String, "bool": cty.Bool, "int": cty.Number}[tt.as]
			e, diags := compileString(t, env, tt.src, want)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			var got string
			var err error
			switch tt.as {
			case "string":
				got, err = e.String(tt.r)
			case "bool":
				var b bool
				b, err = e.Bool(tt.r)
				got = map[bool]string{true: "true", false: "false"}[b]
			case "int":
				var n int64
				n, err = e.Int(tt.r)
				got = strings.TrimSpace(strings.Repeat(" ", 0) + itoa(n))
			}
			if err != nil {
				got = "error: " + err.Error()
			}
			if strings.HasPrefix(tt.want, "error: ") {
				if !strings.HasPrefix(got, "error: ") || !strings.Contains(got, strings.TrimPrefix(tt.want, "error: ")) {
					t.Fatalf("got %q, want %q", got, tt.want)
				}
				return
			}
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func itoa(n int64) string { return cty.NumberIntVal(n).AsBigFloat().Text('f', 0) }

// TestFastPathMatchesHCL checks that every fast path gives what HCL's own evaluation of
// the same expression gives, on requests with missing, empty, Unicode and invalid UTF-8
// attributes.
func TestFastPathMatchesHCL(t *testing.T) {
	env := testEnv(t)
	srcs := []string{
		`request.user`,
		`request["x-api-key"]`,
		`"${request.tenant}:${request.user}"`,
		`"${local.prefix}/${request.user}/${local.n}"`,
		`lookup(local.tiers, request.plan, 30)`,
		`lookup(local.tiers, "${request.plan}", "none")`,
		`lookup(local.windows, "${request.plan}", "1m")`,
	}
	reqs := []Request{
		attrs{},
		attrs{"user": "u1", "tenant": "t1", "plan": "pro", "x-api-key": "k"},
		attrs{"user": "", "tenant": "", "plan": ""},
		attrs{"user": "Zoë", "plan": "Zoe\u0308", "tenant": "日本"},
		attrs{"user": "{}\x00:", "plan": "free"},
	}
	for _, src := range srcs {
		e, diags := compileString(t, env, src, cty.String)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		if e.kind == kindEval || e.kind == kindConst {
			t.Fatalf("%s: not on a fast path", src)
		}
		slow := &Expr{kind: kindEval, expr: e.expr, attrs: e.attrs, sc: e.sc, env: env}
		for _, r := range reqs {
			fast, ferr := e.String(r)
			want, serr := slow.String(r)
			if (ferr != nil) != (serr != nil) || cty.NormalizeString(fast) != want {
				t.Errorf("%s on %v: fast path %q (%v), HCL %q (%v)", src, r, fast, ferr, want, serr)
			}
		}
	}
}

// TestParamWire checks parameters evaluated per request, and that constant and table
// parameters are computed once at load time.
func TestParamWire(t *testing.T) {
	cfg, diags := Parse(map[string][]byte{"p.hcl": []byte(testLocals + `
policy "p" {
  rule "table" {
    algorithm = "sliding_window"
    key       = "all"
    limit     = lookup(local.tiers, request.plan, 30)
    window    = lookup(local.windows, request.plan, "1m")
  }
  rule "expr" {
    algorithm = "token_bucket"
    key       = "all"
    capacity  = tonumber(request.cap)
    rate      = request.rate
  }
  rule "const" {
    algorithm = "gcra"
    key       = "all"
    rate      = "600/m"
    burst     = 10
  }
  rule "lease" {
    algorithm = "concurrency"
    key       = "all"
    max       = 2
    ttl       = "1m"
  }
}
`)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	rules := cfg.Policies[0].Rules
	tests := []struct {
		rule int
		r    Request
		want string // fmt of the wire values, or "error: <substring>"
	}{
		{0, attrs{"plan": "pro"}, "[600 10000000]"},
		{0, attrs{"plan": "free"}, "[60 60000000]"},
		{0, attrs{}, "[30 60000000]"},
		{1, attrs{"cap": "100", "rate": "10/s"}, "[100 1 100000]"},
		{1, attrs{"cap": "0", "rate": "10/s"}, "error: at least 1"},
		{1, attrs{"cap": "100", "rate": "10/sec"}, "error: unknown unit"},
		{1, attrs{"cap": "x", "rate": "10/s"}, "error: "},
		{1, attrs{"cap": "9007199254740992", "rate": "1/1d"}, "error: too large"},
		{2, attrs{}, "[1 100000 10]"},
		{3, attrs{}, "[2 60000000 0]"},
	}
	for _, tt := range tests {
		w, err := rules[tt.rule].Wire(tt.r)
		got := fmtWire(w)
		if err != nil {
			got = "error: " + err.Error()
		}
		if strings.HasPrefix(tt.want, "error: ") {
			if !strings.HasPrefix(got, "error: ") || !strings.Contains(got, strings.TrimPrefix(tt.want, "error: ")) {
				t.Errorf("rule %s on %v: %s, want %s", rules[tt.rule].Name, tt.r, got, tt.want)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("rule %s on %v: %s, want %s", rules[tt.rule].Name, tt.r, got, tt.want)
		}
	}
	if rules[0].Params[0].table == nil || rules[0].Params[1].table == nil {
		t.Error("lookup parameters are not precomputed tables")
	}
	if rules[2].wire == nil || rules[3].wire == nil {
		t.Error("constant rules have no precomputed wire values")
	}
	if p := rules[3].Params[2]; p.Kind != 3 || p.Const[0] != 0 {
		t.Errorf("lease parameter %+v", p)
	}
}

func fmtWire(w []int64) string {
	parts := make([]string, len(w))
	for i, v := range w {
		parts[i] = itoa(v)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// keyRequest is a Request as an engine might implement it: fields, no map.
type keyRequest struct{ tenant, user string }

func (r *keyRequest) Attr(name string) string {
	switch name {
	case "tenant":
		return r.tenant
	case "user":
		return r.user
	}
	return ""
}

func BenchmarkRenderKey(b *testing.B) {
	env := testEnv(b)
	e, diags := compileString(b, env, `"${request.tenant}:${request.user}"`, cty.String)
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	r := &keyRequest{tenant: "acme", user: "user-12345"}
	run := func(b *testing.B, e *Expr) {
		b.ReportAllocs()
		for b.Loop() {
			if s, err := e.String(r); err != nil || len(s) != 15 {
				b.Fatal(s, err)
			}
		}
	}
	b.Run("template", func(b *testing.B) {
		if e.kind != kindTemplate {
			b.Fatalf("kind %d: not on the template fast path", e.kind)
		}
		run(b, e)
	})
	b.Run("hcl", func(b *testing.B) {
		run(b, &Expr{kind: kindEval, expr: e.expr, attrs: e.attrs, sc: e.sc, env: env})
	})
}

func BenchmarkRuleWire(b *testing.B) {
	cfg, diags := Load("../policies/public_api.hcl")
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	rules := cfg.Policies[0].Rules
	r := attrs{"plan": "pro", "user": "alice", "tenant": "acme", "ip": "192.0.2.1"}
	for _, ru := range []*Rule{rules[0], rules[1]} { // constant; lookup table
		b.Run(ru.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ru.Wire(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestGlobMatch holds glob() to a regular expression of the same pattern (each '*' as
// "(?s:.*)", everything else quoted) on every string of up to five characters of an
// alphabet that has the pattern characters.
func TestGlobMatch(t *testing.T) {
	const alphabet = "ab*"
	all := func(n int) []string { // every string of at most n characters
		out := []string{""}
		for i := 0; i < len(out); i++ {
			if len(out[i]) < n {
				for _, c := range alphabet {
					out = append(out, out[i]+string(c))
				}
			}
		}
		return out
	}
	strs := all(5)
	for _, pat := range all(4) {
		parts := strings.Split(pat, "*")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		re := regexp.MustCompile("^" + strings.Join(parts, "(?s:.*)") + "$")
		for _, s := range strs {
			if got, want := Glob(s, pat), re.MatchString(s); got != want {
				t.Fatalf("glob(%q, %q) = %v, want %v", s, pat, got, want)
			}
		}
	}
}
