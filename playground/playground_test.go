package playground

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rogpeppe/go-internal/txtar"
)

// testCase returns the files of testdata/name.txtar.
func testCase(t *testing.T, name string) map[string]string {
	t.Helper()
	ar, err := txtar.ParseFile(filepath.Join("testdata", name+".txtar"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range ar.Files {
		files[f.Name] = string(f.Data)
	}
	return files
}

func TestExamples(t *testing.T) {
	exs := Examples()
	var names []string
	for _, ex := range exs {
		names = append(names, ex.Name)
		want := []string{ex.Name + ".hcl"}
		if ex.Name == "simple_gcra" {
			want = []string{"plugins/simple_gcra.lua", "simple_gcra.hcl"}
		}
		if got := slices.Sorted(maps.Keys(ex.Files)); !slices.Equal(got, want) {
			t.Errorf("example %s has files %q, want %q", ex.Name, got, want)
		}
		if r := Validate(ex.Files); !r.OK || len(r.Diagnostics) != 0 {
			t.Errorf("example %s: %s", ex.Name, r.Text)
		}
	}
	matches, _ := filepath.Glob("../policies/*.hcl")
	if len(exs) != len(matches) || !slices.IsSorted(names) {
		t.Errorf("examples %q; want one for each of %q, sorted", names, matches)
	}
	exs[0].Files["x"] = "changed"
	if _, ok := Examples()[0].Files["x"]; ok {
		t.Error("a change to Examples' result shows in the next call")
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ok      bool
		summary string
		diags   []string // file:line:col: severity: summary of each
	}{
		{"syntax_error", false, "1 problem", []string{"bad.hcl:3:11: error: Invalid expression"}},
		{"unknown_algorithm", false, "1 problem", []string{"bad.hcl:4:17: error: Unknown algorithm"}},
		{"warning", true, "1 policy, 1 rule, 0 scenarios: valid with 1 warning", []string{"log.hcl:2:3: warning: Rule past its Redis budget"}},
		{"not_canonical_json", true, "2 policies, 2 rules, 0 scenarios: valid with 1 warning", []string{"a.hcl:6:8: warning: Key can be empty"}},
		{"plugin_lua_syntax_error", false, "1 problem", []string{"p.hcl:1:1: warning: Missing work", "p.hcl:23:1: warning: Scenario expects nothing", "plugins/w.lua:4:3: error: Lua syntax error"}},
		{"plugin_missing_lua", false, "1 problem", []string{"p.hcl:1:1: warning: Missing work", "p.hcl:2:14: error: Cannot read plugin source", "p.hcl:23:1: warning: Scenario expects nothing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Validate(testCase(t, tc.name))
			var diags []string
			for _, d := range r.Diagnostics {
				diags = append(diags, d.Text[:strings.Index(d.Text, "\n")])
				if !strings.Contains(r.Text, d.Text) {
					t.Errorf("Text lacks the diagnostic's\n%s", d.Text)
				}
				if d.File != "" && (d.Line < 1 || d.Column < 1 || d.EndLine < d.Line || d.EndLine == d.Line && d.EndColumn < d.Column) {
					t.Errorf("%s: the range %d:%d to %d:%d", d.Summary, d.Line, d.Column, d.EndLine, d.EndColumn)
				}
			}
			if r.OK != tc.ok || r.Summary != tc.summary || !slices.Equal(diags, tc.diags) {
				t.Errorf("ok %v, summary %q, diagnostics %q; want %v, %q, %q\n%s", r.OK, r.Summary, diags, tc.ok, tc.summary, tc.diags, r.Text)
			}
			last := "rlctl: error: " + tc.summary + "\n"
			if tc.ok {
				last = tc.summary + "\n"
			}
			if !strings.HasSuffix(r.Text, last) {
				t.Errorf("Text does not end with %q:\n%s", last, r.Text)
			}
		})
	}
}

func TestDiagnosticFields(t *testing.T) {
	r := Validate(testCase(t, "unknown_algorithm"))
	if len(r.Diagnostics) != 1 {
		t.Fatalf("%d diagnostics", len(r.Diagnostics))
	}
	d := r.Diagnostics[0]
	want := Diagnostic{Severity: "error", Summary: "Unknown algorithm", File: "bad.hcl", Line: 4, Column: 17, EndLine: 4, EndColumn: 23}
	got := d
	got.Detail, got.Text = "", ""
	if got != want || !strings.Contains(d.Detail, `Did you mean "gcra"?`) {
		t.Errorf("got %+v\nwant %+v", d, want)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"ok":false`, `"summary":"1 problem"`, `"diagnostics":[{`, `"severity":"error"`, `"end_line":4`, `"end_column":23`, `"text":"bad.hcl:4:17: error: Unknown algorithm\n`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("the JSON lacks %s: %s", key, b)
		}
	}
}

func TestFormat(t *testing.T) {
	files := testCase(t, "not_canonical_json")
	f := Format("a.hcl", files["a.hcl"])
	if !f.Changed || f.Error != "" || len(f.Diagnostics) != 0 || !strings.HasPrefix(f.Formatted, "policy \"api\" {\n  rule \"per_user\" {\n    algorithm = \"gcra\"\n") {
		t.Errorf("a.hcl: %+v", f)
	}
	if again := Format("a.hcl", f.Formatted); again.Changed || again.Formatted != f.Formatted {
		t.Errorf("formatting the canonical form changes it: %+v", again)
	}
	if f := Format("b.hcl.json", files["b.hcl.json"]); f.Error != "b.hcl.json: fmt formats native syntax (.hcl), not JSON" || f.Changed || f.Formatted != files["b.hcl.json"] {
		t.Errorf("b.hcl.json: %+v", f)
	}
	bad := testCase(t, "syntax_error")["bad.hcl"]
	f = Format("bad.hcl", bad)
	if f.Error != "bad.hcl does not parse; not rewritten" || f.Changed || f.Formatted != bad || len(f.Diagnostics) == 0 || f.Diagnostics[0].Line != 3 {
		t.Errorf("bad.hcl: %+v", f)
	}
}

func TestSimulate(t *testing.T) {
	ex := Examples()
	i := slices.IndexFunc(ex, func(e Example) bool { return e.Name == "simple_gcra" })
	seed := int64(5)
	r := Simulate(ex[i].Files, SimulateOptions{Seed: &seed})
	if r.Error != "" || len(r.Reports) != 1 {
		t.Fatalf("%+v", r)
	}
	rep := r.Reports[0]
	if rep.Scenario != "export_loop" || rep.Failed || !strings.HasPrefix(rep.Text, `scenario "export_loop" · policy "exports" · 5m of virtual time · seed 5`) ||
		!strings.HasPrefix(rep.SVG, "<svg") || r.Text != rep.Text {
		t.Errorf("%+v", rep)
	}
	if again := Simulate(ex[i].Files, SimulateOptions{Seed: &seed}); again.Text != r.Text {
		t.Error("the same files and seed give another report")
	}
	for _, tc := range []struct {
		files map[string]string
		opts  SimulateOptions
		err   string
	}{
		{testCase(t, "syntax_error"), SimulateOptions{}, "1 problem"},
		{testCase(t, "no_scenario"), SimulateOptions{}, "the files declare no scenario"},
		{ex[i].Files, SimulateOptions{Scenario: "nope"}, `no scenario named "nope"`},
		{ex[i].Files, SimulateOptions{Seed: new(int64(-1))}, "seed -1 is negative"},
		{testCase(t, "plugin_lua_runtime_error"), SimulateOptions{}, `simulating scenario "peek": `},
	} {
		r := Simulate(tc.files, tc.opts)
		if !strings.HasPrefix(r.Error, tc.err) || len(r.Reports) != 0 {
			t.Errorf("Simulate(%+v): error %q, %d reports; want %q", tc.opts, r.Error, len(r.Reports), tc.err)
		}
	}
}

func TestVerify(t *testing.T) {
	files := testCase(t, "plugin_lua_runtime_error")
	var done, total, calls int
	r := Verify(files, VerifyOptions{Budget: 30, Duration: "1m"}, func(d, n int) {
		if d < done || n != total && total != 0 {
			t.Errorf("progress %d of %d after %d of %d", d, n, done, total)
		}
		done, total, calls = d, n, calls+1
	})
	if r.Error != "" || r.Fails != 1 || r.Warns != 1 || !strings.Contains(r.Text, "    FAIL  atomicity          plugins/w.lua:6: cannot perform sub operation") ||
		!strings.HasSuffix(r.Text, "\nrlctl: error: 1 property failed\n") {
		t.Errorf("error %q, %d fails, %d warns:\n%s", r.Error, r.Fails, r.Warns, r.Text)
	}
	if calls == 0 || done != total {
		t.Errorf("progress: %d calls, last %d of %d", calls, done, total)
	}
	var f struct {
		Schema  int               `json:"schema"`
		Seed    int64             `json:"seed"`
		Budget  int               `json:"budget"`
		Results []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(r.Findings, &f); err != nil || f.Schema != 1 || f.Seed != 1 || f.Budget != 30 || len(f.Results) == 0 {
		t.Errorf("findings %s: %v", r.Findings, err)
	}
	for _, tc := range []struct {
		opts VerifyOptions
		err  string
	}{
		{VerifyOptions{Budget: -1}, "budget -1: want at least 1 request"},
		{VerifyOptions{Duration: "soon"}, `duration "soon": want a positive duration such as 10m or 90s`},
	} {
		if r := Verify(files, tc.opts, nil); r.Error != tc.err || r.Findings != nil {
			t.Errorf("Verify(%+v): error %q; want %q", tc.opts, r.Error, tc.err)
		}
	}
	if r := Verify(testCase(t, "unknown_algorithm"), VerifyOptions{}, nil); r.Error != "1 problem" || r.Findings != nil || len(r.Diagnostics) != 1 {
		t.Errorf("invalid files: %+v", r)
	}
}

func TestReference(t *testing.T) {
	ref := Reference()
	var names []string
	for _, topic := range ref {
		names = append(names, topic.Name)
		if topic.Short == "" || !strings.HasSuffix(topic.Text, "\n") || len(topic.Text) < 200 {
			t.Errorf("topic %s: short %q and %d bytes of text; want a line and the reference", topic.Name, topic.Short, len(topic.Text))
		}
	}
	if want := []string{"policy", "scenario", "plugins"}; !slices.Equal(names, want) {
		t.Errorf("topics %q, want %q", names, want)
	}
	if !slices.Equal(ref, dsl.Topics()) {
		t.Error("Reference is not dsl.Topics")
	}
	ref[0].Text = "changed"
	if Reference()[0].Text == "changed" {
		t.Error("a change to Reference's result shows in the next call")
	}
}
