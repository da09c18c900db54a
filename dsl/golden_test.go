package dsl

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/rogpeppe/go-internal/txtar"
)

var update = flag.Bool("update", false, "rewrite golden files and the fuzz seed corpus")

// TestDiagnostics loads each archive in testdata/diagnostics: its files are the input
// (policies, Lua), and its diags section lists the expected diagnostics as
// file:line:col: severity: summary, in order.
func TestDiagnostics(t *testing.T) {
	paths, err := filepath.Glob("testdata/diagnostics/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 30 {
		t.Errorf("%d golden archives, want at least 30", len(paths))
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			a, err := txtar.ParseFile(path)
			if err != nil {
				t.Fatal(err)
			}
			files := map[string][]byte{}
			di := -1
			for i, f := range a.Files {
				if f.Name == "diags" {
					di = i
					continue
				}
				files[f.Name] = f.Data
			}
			_, diags := Parse(files)
			got := diagLines(diags)
			if *update {
				if di < 0 {
					a.Files = append(a.Files, txtar.File{Name: "diags"})
					di = len(a.Files) - 1
				}
				a.Files[di].Data = []byte(got)
				if err := os.WriteFile(path, txtar.Format(a), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if di < 0 {
				t.Fatal("no diags section; run with -update")
			}
			if got == "" {
				t.Error("the archive yields no diagnostics; every golden case must be invalid")
			}
			if want := string(a.Files[di].Data); got != want {
				t.Errorf("diagnostics differ\ngot:\n%s\nwant:\n%s", got, want)
			}
			checkSubjects(t, files, diags)
		})
	}
}

// diagLines formats diagnostics one a line: file:line:col: severity: summary.
func diagLines(diags hcl.Diagnostics) string {
	var b strings.Builder
	for _, d := range diags {
		sev := "error"
		if d.Severity == hcl.DiagWarning {
			sev = "warning"
		}
		if d.Subject == nil {
			fmt.Fprintf(&b, "?: %s: %s\n", sev, d.Summary)
			continue
		}
		fmt.Fprintf(&b, "%s:%d:%d: %s: %s\n", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, sev, d.Summary)
	}
	return b.String()
}

// checkSubjects asserts that every diagnostic has a subject inside its file, and a detail.
func checkSubjects(t *testing.T, files map[string][]byte, diags hcl.Diagnostics) {
	t.Helper()
	for _, d := range diags {
		if d.Subject == nil {
			t.Errorf("diagnostic %q has no subject", d.Summary)
			continue
		}
		src, ok := files[d.Subject.Filename]
		if !ok {
			t.Errorf("diagnostic %q is about %q, which is not an input file", d.Summary, d.Subject.Filename)
			continue
		}
		s, e := d.Subject.Start, d.Subject.End
		if s.Byte < 0 || s.Byte > e.Byte || e.Byte > len(src) || s.Line < 1 || s.Column < 1 {
			t.Errorf("diagnostic %q: subject %v lies outside the file's %d bytes", d.Summary, d.Subject, len(src))
		}
		if d.Detail == "" {
			t.Errorf("diagnostic %q has no detail", d.Summary)
		}
	}
}

// TestPolicies loads every example policy: each must be free of errors and warnings,
// carry a scenario, and be in canonical format.
func TestPolicies(t *testing.T) {
	paths, err := filepath.Glob("../policies/*.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 4 {
		t.Fatalf("%d example policies, want at least 4", len(paths))
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cfg, diags := Load(path)
			if len(diags) > 0 {
				var b bytes.Buffer
				WriteDiagnostics(&b, cfg.Files, diags, 100, false)
				t.Fatalf("diagnostics:\n%s", b.String())
			}
			if len(cfg.Policies) == 0 || len(cfg.Scenarios) == 0 {
				t.Errorf("%d policies and %d scenarios; want at least one of each", len(cfg.Policies), len(cfg.Scenarios))
			}
			for _, s := range cfg.Scenarios {
				if len(s.Expect) == 0 {
					t.Errorf("scenario %q expects nothing", s.Name)
				}
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			out, fd := Format(path, src)
			if fd.HasErrors() {
				t.Fatal(fd)
			}
			if !bytes.Equal(out, src) {
				t.Errorf("not in canonical format; Format gives:\n%s", out)
			}
		})
	}
	cfg, diags := Load("../policies")
	if len(diags) > 0 {
		t.Fatalf("loading the directory: %v", diags)
	}
	if len(cfg.Policies) < 4 {
		t.Errorf("the directory has %d policies", len(cfg.Policies))
	}
}
