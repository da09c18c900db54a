package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/rlctl/rlctl/dsl"
)

// TestPoliciesDocExamples loads every ```hcl block of docs/policies.md with dsl.Parse, as
// a file of its own beside the repository's policies/plugins/ Lua (so source =
// "plugins/simple_gcra.lua" resolves). The marker on the line before a block says what
// it must give:
//
//	(none)                    no diagnostic at all
//	<!-- warns: SUMMARY -->   no error, and a warning of that summary
//	<!-- fails: SUMMARY -->   an error of that summary
//	<!-- fragment -->         part of a file: it must parse, and is not loaded
//
// An example that loads and declares scenarios is then simulated (rlctl simulate -check),
// and its expectations must hold. Every block the page shows is then a file that loads
// as the page says, and most show a whole file. dsl's TestPoliciesDocCoversSchema holds the page to the language's names.
func TestPoliciesDocExamples(t *testing.T) {
	const page = "docs/policies.md"
	doc, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	lua := map[string][]byte{}
	luaFiles, err := filepath.Glob(filepath.Join(root, "policies", "plugins", "*.lua"))
	if err != nil || len(luaFiles) == 0 {
		t.Fatalf("no plugin Lua under policies/plugins: %v", err)
	}
	for _, f := range luaFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lua["plugins/"+filepath.Base(f)] = b
	}
	lines := strings.Split(string(doc), "\n")
	marker := regexp.MustCompile(`^<!-- (warns|fails): (.+) -->$`)
	loaded, fragments := 0, 0
	for _, b := range fencedBlocks(t, page, string(doc)) {
		if b.lang != "hcl" {
			continue
		}
		prev := ""
		if b.line >= 2 {
			prev = lines[b.line-2]
		}
		name := page + ":" + strconv.Itoa(b.line)
		if prev == "<!-- fragment -->" {
			fragments++
			if _, d := hclsyntax.ParseConfig([]byte(b.text), name, hcl.InitialPos); d.HasErrors() {
				t.Errorf("%s: the fragment does not parse: %s", name, d.Error())
			}
			continue
		}
		loaded++
		files := map[string][]byte{"example.hcl": []byte(b.text)}
		for k, v := range lua {
			files[k] = v
		}
		cfg, diags := dsl.Parse(files)
		var want, summary string
		if m := marker.FindStringSubmatch(prev); m != nil {
			want, summary = m[1], m[2]
		}
		found := false
		for _, d := range diags {
			isErr := d.Severity == hcl.DiagError
			switch {
			case d.Summary == summary && (want == "fails") == isErr:
				found = true
			case isErr || want == "":
				t.Errorf("%s: %s", name, diagText(d))
			}
		}
		if want != "" && !found {
			t.Errorf("%s: the example should give the %s %q, and does not", name, map[string]string{"warns": "warning", "fails": "error"}[want], summary)
		}
		if !diags.HasErrors() && len(cfg.Scenarios) > 0 {
			simulateExample(t, name, files)
		}
	}
	if loaded < 25 || fragments*4 > loaded {
		t.Errorf("%s: %d examples loaded and %d fragments; the page should show mostly whole files", page, loaded, fragments)
	}
}

// simulateExample runs rlctl simulate -check on an example's files, written to a
// directory of their own: its scenarios' expectations must hold.
func simulateExample(t *testing.T, name string, files map[string][]byte) {
	dir := t.TempDir()
	for f, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if code := run([]string{"simulate", "-check", filepath.Join(dir, "example.hcl")}, &env{stdout: &out, stderr: &out}); code != 0 {
		t.Errorf("%s: rlctl simulate -check exits %d:\n%s", name, code, out.String())
	}
}

// diagText is a diagnostic on one line, with its place.
func diagText(d *hcl.Diagnostic) string {
	at := ""
	if d.Subject != nil {
		at = d.Subject.String() + ": "
	}
	sev := "error"
	if d.Severity == hcl.DiagWarning {
		sev = "warning"
	}
	return at + sev + ": " + d.Summary + ": " + d.Detail
}
