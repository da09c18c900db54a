package dsl

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
)

// TestPoliciesDocCoversSchema holds docs/policies.md to the language Load accepts: every
// block and attribute of every schema, every built-in algorithm and parameter, every
// function of policy expressions and of expectations, and the values of the attributes
// that take one of a few strings, each has an entry in the section of its block. A
// section is a heading "`TYPE` block" (or "Files" for the top level, "Functions" for the
// policy functions) down to the next heading of its level or above, and an entry of NAME
// is a table row whose first cell starts with `NAME` (`NAME "LABEL"` for a block,
// `NAME(args)` for a function); a value is entered when it appears quoted, `"value"`.
//
// The schemas' names are read from this package's variables, and its source is parsed
// too: a name in an hcl.AttributeSchema, hcl.BlockHeaderSchema or figure literal that no
// check below covers fails the test, so a new schema cannot go undocumented unnoticed.
func TestPoliciesDocCoversSchema(t *testing.T) {
	const page = "docs/policies.md"
	b, err := os.ReadFile(filepath.Join("..", page))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	checked := map[string]bool{}

	// entries checks that the section headed by heading has an entry for each name.
	entries := func(heading string, names ...string) {
		t.Helper()
		sec, ok := docSection(doc, heading)
		if !ok {
			t.Errorf("%s has no section %q", page, heading)
			return
		}
		for _, n := range names {
			checked[n] = true
			row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(n) + "[` (]")
			if !row.MatchString(sec) {
				t.Errorf("%s: section %q has no entry for %s (a table row starting | `%s` |)", page, heading, n, n)
			}
		}
	}
	// values checks that each value appears quoted in the section headed by heading.
	values := func(heading string, vals ...string) {
		t.Helper()
		sec, _ := docSection(doc, heading)
		for _, v := range vals {
			if !strings.Contains(sec, strconv.Quote(v)) {
				t.Errorf("%s: section %q does not name the value %q", page, heading, v)
			}
		}
	}
	block := func(typ string) string { return "`" + typ + "` block" }
	attrs := func(s ...[]string) []string { return slices.Concat(s...) }

	entries("Files", blockTypes(rootSchema)...)
	for _, typ := range blockTypes(rootSchema) {
		if _, ok := docSection(doc, block(typ)); !ok {
			t.Errorf("%s has no section %q", page, block(typ))
		}
	}
	entries(block("policy"), attrs(attrNames(policySchema), blockTypes(policySchema))...)
	values(block("policy"), OnErrorAllow, OnErrorDeny, OnErrorLocal, ClockServer, ClockClient)
	entries(block("rule"), attrs(attrNames(&hcl.BodySchema{Attributes: ruleAttrs}))...)
	for _, a := range algorithms.Builtin() {
		entries(block("rule"), strconv.Quote(a.Name))
		for _, p := range a.Params {
			if p.Kind != algorithms.Lease {
				entries(block("rule"), p.Name)
			}
		}
	}
	values(block("rule"), "calendar_day", "calendar_week", "calendar_week_sunday", "calendar_month", "calendar_year")
	entries(block("unlimited"), attrNames(unlimitedSchema)...)
	entries(block("budget"), attrNames(budgetSchema)...)
	entries(block("algorithm"), attrs(attrNames(pluginSchema), blockTypes(pluginSchema))...)
	values(block("algorithm"), sortedKeys(kinds)...)
	for _, s := range algorithms.Shapes {
		entries(block("guarantee"), strconv.Quote(s.String()))
		for _, f := range guaranteeAttrs[s] {
			entries(block("guarantee"), f.name)
		}
	}
	entries(block("guarantee"), "bound", "why", "precision")
	entries(block("precision"), attrNames(precisionSchema)...)
	for _, f := range workFigures {
		entries(block("work"), f.name)
	}
	entries(block("work"), "fix")
	for _, k := range algorithms.KeyTypes {
		values(block("work"), k.String())
	}
	entries(block("scenario"), attrs(attrNames(scenarioSchema), blockTypes(scenarioSchema))...)
	for _, typ := range blockTypes(scenarioSchema) {
		if _, ok := docSection(doc, block(typ)); !ok {
			t.Errorf("%s has no section %q", page, block(typ))
		}
	}
	entries(block("traffic"), attrNames(trafficSchema)...)
	values(block("traffic"), patterns...)
	entries(block("fault"), attrNames(faultSchema)...)
	values(block("fault"), faultKinds...)
	entries(block("engine"), attrNames(engineSchema)...)
	values(block("engine"), evictionPolicies...)
	entries(block("override"), attrNames(changeSchema)...)
	entries(block("list"), attrNames(listChangeSchema)...)

	policyFns := policyFunctions()
	var expectFns []string
	for name := range scenarioFunctions(&Scenario{}, nil, nil) {
		if _, ok := policyFns[name]; !ok {
			expectFns = append(expectFns, name)
		}
	}
	slices.Sort(expectFns)
	entries(block("expect"), expectFns...)
	values(block("expect"), Deciders...)
	entries("Functions", sortedKeys(policyFns)...)

	for _, n := range schemaLiterals(t) {
		if !checked[n] {
			t.Errorf("the schema name %q (in this package's source) is checked against %s by no entry of this test: add it where its block is checked", n, page)
		}
	}
}

// docSection returns the text under the markdown heading whose title is heading, down to
// the next heading of the same level or above.
func docSection(doc, heading string) (string, bool) {
	lines := strings.Split(doc, "\n")
	fenced := false
	level := 0
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		n := len(l) - len(strings.TrimLeft(l, "#"))
		isHeading := !fenced && n > 0 && strings.HasPrefix(l[n:], " ")
		switch {
		case level == 0 && isHeading && strings.TrimSpace(l[n:]) == heading:
			level = n
		case level > 0 && isHeading && n <= level:
			return strings.Join(out, "\n"), true
		case level > 0:
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n"), level > 0
}

// attrNames returns a schema's attribute names, in order.
func attrNames(s *hcl.BodySchema) []string {
	var out []string
	for _, a := range s.Attributes {
		out = append(out, a.Name)
	}
	return out
}

// blockTypes returns a schema's block types, in order.
func blockTypes(s *hcl.BodySchema) []string {
	var out []string
	for _, b := range s.Blocks {
		out = append(out, b.Type)
	}
	return out
}

// schemaLiterals returns the names written as string literals in this package's
// hcl.AttributeSchema (Name), hcl.BlockHeaderSchema (Type) and figure (name) literals,
// whatever variable or function holds them.
func schemaLiterals(t *testing.T) []string {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var visit func(n ast.Node, in bool)
	visit = func(n ast.Node, in bool) {
		ast.Inspect(n, func(x ast.Node) bool {
			lit, ok := x.(*ast.CompositeLit)
			if !ok || x == n {
				return true
			}
			typ := ""
			if lit.Type != nil {
				typ = types(lit.Type)
			}
			schema := in || strings.Contains(typ, "AttributeSchema") || strings.Contains(typ, "BlockHeaderSchema") ||
				strings.Contains(typ, "BodySchema") || strings.Contains(typ, "figure")
			if schema {
				for _, e := range lit.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					key, _ := kv.Key.(*ast.Ident)
					val, _ := kv.Value.(*ast.BasicLit)
					if key != nil && val != nil && val.Kind == token.STRING && (key.Name == "Name" || key.Name == "Type" || key.Name == "name") {
						s, err := strconv.Unquote(val.Value)
						if err == nil && !slices.Contains(names, s) {
							names = append(names, s)
						}
					}
				}
			}
			visit(lit, schema)
			return false
		})
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		visit(af, false)
	}
	if len(names) < 50 {
		t.Fatalf("only %d schema names found in the package's source: the search is broken", len(names))
	}
	return names
}

// types writes a type expression's identifiers: "[]hcl.AttributeSchema" gives
// "hcl.AttributeSchema".
func types(e ast.Expr) string {
	var b strings.Builder
	ast.Inspect(e, func(x ast.Node) bool {
		if id, ok := x.(*ast.Ident); ok {
			b.WriteString(id.Name + ".")
		}
		return true
	})
	return b.String()
}
