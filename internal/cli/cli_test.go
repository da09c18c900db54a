package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/dsl"
)

func TestDiagnosticText(t *testing.T) {
	src := "policy \"api\" {\n  rule \"r\" {\n    algorithm = \"gcar\"\n  }\n}\n"
	files := SourceFiles("a.hcl", []byte(src))
	rg := &hcl.Range{Filename: "a.hcl", Start: hcl.Pos{Line: 3, Column: 17, Byte: 43}, End: hcl.Pos{Line: 3, Column: 23, Byte: 49}}
	d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown algorithm", Detail: "Did you mean \"gcra\"?", Subject: rg}
	got := DiagnosticText(files, d, false)
	want := "a.hcl:3:17: error: Unknown algorithm\n\n  on a.hcl line 3, in policy \"api\":\n   3:     algorithm = \"gcar\"\n\nDid you mean \"gcra\"?\n\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	w := &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "No policy files", Detail: "Name one."}
	if got := DiagnosticText(nil, w, false); !strings.HasPrefix(got, "warning: No policy files\n") || strings.Count(got, "No policy files") != 1 {
		t.Errorf("without a subject: %q", got)
	}
}

func TestWriteLoad(t *testing.T) {
	cfg, diags := dsl.Parse(map[string][]byte{"a.hcl": []byte("policy \"api\" {\n")})
	var b strings.Builder
	if WriteLoad(&b, cfg, diags, false) || !strings.HasPrefix(b.String(), "a.hcl:") || !strings.HasSuffix(b.String(), "\nrlctl: error: 1 problem\n") {
		t.Errorf("%q", b.String())
	}
	cfg, diags = dsl.Parse(map[string][]byte{"a.hcl": []byte("policy \"api\" {\n  rule \"r\" {\n    algorithm = \"gcra\"\n    key = request.user\n    rate = \"1/s\"\n    burst = 2\n  }\n}\n")})
	b.Reset()
	if !WriteLoad(&b, cfg, diags, false) || !strings.Contains(b.String(), "warning: Key can be empty") {
		t.Errorf("%q", b.String())
	}
	if got := Summary(cfg, len(diags)); got != "1 policy, 1 rule, 0 scenarios: valid with 1 warning" {
		t.Errorf("summary %q", got)
	}
}

func TestScenarios(t *testing.T) {
	cfg := &dsl.Config{Scenarios: []*dsl.Scenario{{Name: "a"}, {Name: "b"}}}
	for _, tc := range []struct {
		cfg   *dsl.Config
		name  string
		trace bool
		want  string // the scenarios' names, or what WriteError prints
	}{
		{cfg, "", false, "a b"},
		{cfg, "b", false, "b"},
		{cfg, "", true, "<nil>"},
		{cfg, "c", false, "rlctl: error: no scenario named \"c\"\nrlctl: hint: the scenarios are a, b\n"},
		{&dsl.Config{}, "c", false, "rlctl: error: no scenario named \"c\"\n"},
		{&dsl.Config{}, "", false, "rlctl: error: the files declare no scenario\nrlctl: hint: add a scenario block (see 'rlctl help scenario'), or replay recorded traffic with -trace FILE\n"},
	} {
		ss, err := Scenarios(tc.cfg, tc.name, tc.trace)
		var got strings.Builder
		if err != nil {
			WriteError(&got, err)
		} else {
			var names []string
			for _, s := range ss {
				if s == nil {
					names = append(names, "<nil>")
				} else {
					names = append(names, s.Name)
				}
			}
			got.WriteString(strings.Join(names, " "))
		}
		if got.String() != tc.want {
			t.Errorf("Scenarios(%q, %v): %q, want %q", tc.name, tc.trace, got.String(), tc.want)
		}
	}
}

func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		fails, warns int
		strict       bool
		want         string
	}{
		{0, 3, false, ""},
		{1, 3, false, "1 property failed"},
		{2, 1, true, "2 properties failed and 1 warning (-strict)"},
		{0, 4, true, "4 warnings (-strict)"},
	} {
		if got := Verdict(tc.fails, tc.warns, tc.strict); got != tc.want {
			t.Errorf("Verdict(%d, %d, %v) = %q, want %q", tc.fails, tc.warns, tc.strict, got, tc.want)
		}
	}
	if _, err := Duration("0s"); err == nil || err.Error() != `"0s": want a positive duration such as 10m or 90s` {
		t.Errorf("Duration(0s): %v", err)
	}
	var b strings.Builder
	WriteError(&b, errors.New("plain"))
	if b.String() != "rlctl: error: plain\n" {
		t.Errorf("%q", b.String())
	}
}
