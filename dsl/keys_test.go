package dsl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// compileKey loads a policy whose shard and only rule's key are the given expressions
// (shard omitted when "") and returns the policy.
func compileKey(t testing.TB, key, shard string) (*Policy, hcl.Diagnostics) {
	t.Helper()
	if shard != "" {
		shard = "shard = " + shard
	}
	src := fmt.Sprintf(`%s
policy "p" {
  %s
  rule "r" {
    algorithm = "fixed_window"
    key       = %s
    limit     = 10
    window    = "1m"
  }
}
`, testLocals, shard, key)
	cfg, diags := Parse(map[string][]byte{"p.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatalf("%s: %v", key, diags)
	}
	return cfg.Policies[0], diags
}

func mustKey(t testing.TB, e *Expr, r Request) string {
	t.Helper()
	s, err := e.String(r)
	if err != nil {
		t.Fatalf("%v: %v", r, err)
	}
	return s
}

// TestTemplateSeparatorsCannotBeForged: a value holding a template's separator does not
// render as two other values with the separator between them, in a key or a shard, and
// values without separators or '%' render as written.
func TestTemplateSeparatorsCannotBeForged(t *testing.T) {
	for _, src := range []string{
		`"${request.a}:${request.b}"`,
		`"${lower(request.a)}:${request.b}"`,
		`"${request.a}:${lower(request.b)}"`,
		`"${request.a}${local.prefix}${request.b}"`, // the separator is "rl"
		`"${request.a}%:${request.b}"`,
	} {
		t.Run(src, func(t *testing.T) {
			p, _ := compileKey(t, src, src)
			sep := strings.NewReplacer("${request.a}", "", "${request.b}", "", "${lower(request.a)}", "", "${lower(request.b)}", "", "${local.prefix}", "rl", `"`, "").Replace(src)
			x, y := attrs{"a": "x" + sep + "y", "b": "z"}, attrs{"a": "x", "b": "y" + sep + "z"}
			for _, e := range []*Expr{p.Shard, p.Rules[0].Key} {
				if kx, ky := mustKey(t, e, x), mustKey(t, e, y); kx == ky {
					t.Errorf("%v and %v share the key %q", x, y, kx)
				}
			}
			plain := attrs{"a": "acme", "b": "alice"}
			if got, want := mustKey(t, p.Rules[0].Key, plain), "acme"+sep+"alice"; got != want {
				t.Errorf("%v: key %q, want %q", plain, got, want)
			}
		})
	}
}

// TestKeyEscapes pins the escaped form of template values.
func TestKeyEscapes(t *testing.T) {
	tests := []struct {
		src  string
		r    attrs
		want string
	}{
		{`"${request.a}:${request.b}"`, attrs{"a": "x:y", "b": "z"}, "x%3Ay:z"},
		{`"${request.a}:${request.b}"`, attrs{"a": "x", "b": "y:z"}, "x:y:z"},
		{`"${request.a}:${request.b}"`, attrs{"a": "50%", "b": "%"}, "50%25:%"},
		{`"ip:${request.a}"`, attrs{"a": "a:b%"}, "ip:a:b%"},
		{`"${request.a}:"`, attrs{"a": "a:b%"}, "a:b%:"},
		{`"${request.a}%:${request.b}/${request.c}"`, attrs{"a": "%:/", "b": "%:/", "c": "%:/"}, "%25%3A/%:%25:%2F/%:/"},
		{`"${request.a}:${request.b}"`, attrs{"a": "{é\xff}"}, "{é\xff}:"},
	}
	for _, tt := range tests {
		p, _ := compileKey(t, tt.src, "")
		if got := mustKey(t, p.Rules[0].Key, tt.r); got != tt.want {
			t.Errorf("%s on %v: %q, want %q", tt.src, tt.r, got, tt.want)
		}
	}
}

// TestLookupReadsTemplatesUnescaped: escaping is for keys; a lookup table is indexed by
// the template's value as written, as HCL's lookup() would be.
func TestLookupReadsTemplatesUnescaped(t *testing.T) {
	env := testEnv(t)
	e, diags := compileString(t, env, `lookup({ "a:b:c" = "hit" }, "${request.a}:${request.b}", "miss")`, cty.String)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := mustKey(t, e, attrs{"a": "a:b", "b": "c"}); got != "hit" {
		t.Errorf("lookup of an escaped key: %q, want \"hit\"", got)
	}
}

// TestCaseFunctionsKeepInvalidUTF8: lower, upper and title fold case, and nothing else:
// values that differ in bytes that are not UTF-8 keep distinct keys.
func TestCaseFunctionsKeepInvalidUTF8(t *testing.T) {
	for _, f := range []string{"lower", "upper", "title"} {
		p, _ := compileKey(t, f+"(request.u)", "")
		key := p.Rules[0].Key
		seen := map[string]string{}
		for _, u := range []string{"a\xffb", "a\xfeb", "a\uFFFDb", "\xe2\x82", "\xe2\x82\xe2", "\xe2"} {
			k := mustKey(t, key, attrs{"u": u})
			if prev, ok := seen[k]; ok {
				t.Errorf("%s: %q and %q share the key %q", f, prev, u, k)
			}
			seen[k] = u
		}
	}
	for _, tt := range []struct{ f, in, want string }{
		{"lower", "ÀB\xffÇ", "àb\xffç"},
		{"upper", "àb\xffç ß", "ÀB\xffÇ ß"},
		{"title", "hello wörld\xff x_y\xffz", "Hello Wörld\xff X_y\xffz"},
	} {
		p, _ := compileKey(t, tt.f+"(request.u)", "")
		if got := mustKey(t, p.Rules[0].Key, attrs{"u": tt.in}); got != tt.want {
			t.Errorf("%s(%q) = %q, want %q", tt.f, tt.in, got, tt.want)
		}
	}
}

// TestCaseFunctionsMatchStrings: on valid UTF-8, lower, upper and title are
// strings.ToLower, ToUpper and Title, as go-cty's were.
func TestCaseFunctionsMatchStrings(t *testing.T) {
	funcs := policyFunctions()
	for _, s := range []string{"", "abc XYZ", "Straße ǅemal ǆ", "İstanbul ıi", "ΣΑΣ σας", "a_b-c d.e", "x\u0301y 日本 ｆｕｌｌ", "\uFFFD"} {
		s = cty.NormalizeString(s)
		//lint:ignore SA1019 strings.Title is the behaviour title keeps
		title := strings.Title(s)
		for name, want := range map[string]string{
			"lower": strings.ToLower(s),
			"upper": strings.ToUpper(s),
			"title": title,
		} {
			v, err := funcs[name].Call([]cty.Value{cty.StringVal(s)})
			if err != nil || v.AsString() != cty.NormalizeString(want) {
				t.Errorf("%s(%q) = %q (%v), want %q", name, s, v.AsString(), err, want)
			}
		}
	}
}

// TestValuesRunTogether: values with nothing but '%' between them cannot be told apart,
// and Load says so; separated values get no warning.
func TestValuesRunTogether(t *testing.T) {
	for src, warn := range map[string]bool{
		`"${request.a}${request.b}"`:           true,
		`"${request.a}%${lower(request.b)}"`:   true,
		`"${request.a}${local.n}${request.b}"`: false,
		`"${request.a}:${request.b}"`:          false,
		`"x${request.a}y"`:                     false,
	} {
		_, diags := compileKey(t, src, "")
		got := false
		for _, d := range diags {
			if d.Summary == "Values run together" && d.Severity == hcl.DiagWarning && d.Subject != nil {
				got = true
			}
		}
		if got != warn {
			t.Errorf("%s: warning %v, want %v (%v)", src, got, warn, diags)
		}
	}
}

// TestReferencesKeepUnicodeForms: plain references read the bytes as sent, so
// canonically equivalent but different values keep distinct keys; what HCL evaluates is
// read in NFC (Keys under Expr), so lower() merges them along with case.
func TestReferencesKeepUnicodeForms(t *testing.T) {
	nfc, nfd := attrs{"a": "\u00e9", "b": "x"}, attrs{"a": "e\u0301", "b": "x"}
	for src, distinct := range map[string]bool{
		`request.a`:                          true,
		`"${request.a}:${request.b}"`:        true,
		`"${request.b}:${request.a}"`:        true,
		`lower(request.a)`:                   false,
		`"${lower(request.a)}:${request.b}"`: false,
	} {
		p, _ := compileKey(t, src, "")
		key := p.Rules[0].Key
		if got := mustKey(t, key, nfc) != mustKey(t, key, nfd); got != distinct {
			t.Errorf("%s: distinct %v, want %v", src, got, distinct)
		}
	}
}

// keyTemplates are templates of keys that must render distinct keys for distinct values:
// those in nfc are read by an expression HCL evaluates, so up to Unicode NFC, the others as
// sent. In the last, c is run together with b (and warned about): (a, b+c) is what must
// stay distinct.
var keyTemplates = []struct{ src, nfc string }{
	{`"${request.a}:${request.b}"`, ""},
	{`"${request.a}::${request.b}"`, ""},
	{`"x${request.a}-${request.b}-${request.c}y"`, ""},
	{`"${request.a}%:${request.b}/${request.c}"`, ""},
	{`"${request.a}${local.prefix}${request.b}"`, ""},
	{`"${request.a}:${request.b}:${request.a}"`, ""},
	{`"${request.a}|${request.b == "" ? "" : request.b}-${request.c}"`, "b"},
	{`"%{if request.a != ""}${request.a}%{endif}:${request.b}"`, "a"},
	{`"${request.a}:${request.b}${request.c}"`, ""},
}

// keyOf returns what a key rendered by keyTemplates[i] must tell apart: the values it
// reads, NFC-normalized where HCL reads them.
func keyOf(i int, key *Expr, r attrs) string {
	var id []string
	for _, a := range key.Attrs() {
		v := r[a]
		if strings.Contains(keyTemplates[i].nfc, a) {
			v = cty.NormalizeString(v)
		}
		id = append(id, a+"="+v)
	}
	if i == len(keyTemplates)-1 {
		id = []string{r["a"], r["b"] + r["c"]}
	}
	return fmt.Sprintf("%q", id)
}

// TestKeyTemplatesAreInjective renders every template on every tuple of values from a
// set built of the templates' separators and escapes, and checks that distinct tuples
// never share a key; and, as a differential check against HCL, that the key is HCL's
// value of the template whenever no value holds '%' or a separator.
func TestKeyTemplatesAreInjective(t *testing.T) {
	values := []string{"", "x", ":", "%", "-", "|", "/", "rl", "r", "%3A", "%25", "x:y", "::", "-y-", "%:", "\xff", "é"}
	for i, tmpl := range keyTemplates {
		p, _ := compileKey(t, tmpl.src, "")
		key := p.Rules[0].Key
		slow := &Expr{kind: kindEval, expr: key.expr, attrs: key.attrs, sc: key.sc, env: key.env}
		seen := map[string]string{}
		for _, a := range values {
			for _, b := range values {
				for _, c := range values {
					r := attrs{"a": a, "b": b, "c": c}
					k, id := mustKey(t, key, r), keyOf(i, key, r)
					if prev, ok := seen[k]; ok && prev != id {
						t.Fatalf("%s: %s and %s share the key %q", tmpl.src, prev, id, k)
					}
					seen[k] = id
					if strings.ContainsAny(a+b+c, "%:-|/r") {
						continue
					}
					if want, err := slow.String(r); err != nil || k != want {
						t.Fatalf("%s on %v: key %q, HCL %q (%v)", tmpl.src, r, k, want, err)
					}
				}
			}
		}
	}
}

// FuzzTemplateKey: every template of keyTemplates renders distinct keys for what it must
// tell apart. The seed corpus is in testdata/fuzz/FuzzTemplateKey.
func FuzzTemplateKey(f *testing.F) {
	keys := make([]*Expr, len(keyTemplates))
	for i, tmpl := range keyTemplates {
		p, _ := compileKey(f, tmpl.src, "")
		keys[i] = p.Rules[0].Key
	}
	f.Fuzz(func(t *testing.T, a1, b1, c1, a2, b2, c2 string) {
		r1, r2 := attrs{"a": a1, "b": b1, "c": c1}, attrs{"a": a2, "b": b2, "c": c2}
		for i, key := range keys {
			k1, err1 := key.String(r1)
			k2, err2 := key.String(r2)
			if err1 != nil || err2 != nil {
				continue // an attribute HCL would read as a number beyond float64
			}
			if same := keyOf(i, key, r1) == keyOf(i, key, r2); (k1 == k2) != same {
				t.Fatalf("%s: %v renders %q, %v renders %q", keyTemplates[i].src, r1, k1, r2, k2)
			}
		}
	})
}
