package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/playground"
	"github.com/rogpeppe/go-internal/txtar"
)

// playgroundCase is files TestPlaygroundMatchesCLI runs both ways.
type playgroundCase struct {
	name    string
	files   map[string]string
	example bool // one or all of the example policies, whose scenarios take a while
}

// playgroundCases are every example policy, all of them at once, and the playground's
// own cases, files with mistakes among them (playground/testdata/*.txtar).
func playgroundCases(t *testing.T) []playgroundCase {
	var cases []playgroundCase
	all := map[string]string{}
	for _, ex := range playground.Examples() {
		cases = append(cases, playgroundCase{ex.Name, ex.Files, true})
		maps.Copy(all, ex.Files)
	}
	cases = append(cases, playgroundCase{"all_examples", all, true})
	paths, err := filepath.Glob("../../playground/testdata/*.txtar")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no playground cases: %v", err)
	}
	for _, path := range paths {
		ar, err := txtar.ParseFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files := map[string]string{}
		for _, f := range ar.Files {
			files[f.Name] = string(f.Data)
		}
		cases = append(cases, playgroundCase{strings.TrimSuffix(filepath.Base(path), ".txtar"), files, false})
	}
	return cases
}

// TestPlaygroundMatchesCLI holds the playground to the CLI: for the same files, in a
// directory, and the same seed, budget and duration, Validate, Format, Simulate and
// Verify give what rlctl validate, fmt, simulate (-plot, -seed, -scenario) and verify
// (-json) print, byte for byte.
func TestPlaygroundMatchesCLI(t *testing.T) {
	verifies := map[string]bool{"login": true, "simple_gcra": true, "plugin_lua_runtime_error": true, "unknown_algorithm": true}
	for _, c := range playgroundCases(t) {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range c.files {
				writeTestFile(t, filepath.Join(dir, name), text)
			}
			t.Chdir(dir)
			var policies []string
			for _, name := range slices.Sorted(maps.Keys(c.files)) {
				if strings.HasSuffix(name, ".hcl") || strings.HasSuffix(name, ".json") {
					policies = append(policies, name)
				}
			}
			rlctl := func(args ...string) (string, int) {
				var out bytes.Buffer
				code := run(append(args, policies...), &env{stdout: &out, stderr: &out})
				return out.String(), code
			}

			out, code := rlctl("validate")
			v := playground.Validate(c.files)
			same(t, "validate", v.Text, out)
			if v.OK != (code == 0) {
				t.Errorf("Validate: OK %v; rlctl validate exits %d", v.OK, code)
			}
			if text := diagnosticsText(v.Diagnostics); !strings.HasPrefix(out, text) {
				t.Errorf("Validate: the diagnostics' texts are not what rlctl validate prints first:\n%s", text)
			}

			// The last scenario, to run alone.
			scenario := ""
			for _, name := range policies {
				for _, line := range strings.Split(c.files[name], "\n") {
					if s, ok := strings.CutPrefix(line, "scenario \""); ok {
						scenario, _, _ = strings.Cut(s, "\"")
					}
				}
			}
			seed := int64(7)
			sims := []playground.SimulateOptions{{}, {Seed: &seed}, {Scenario: scenario, Seed: &seed}, {Scenario: "nope"}}
			if raceEnabled && c.example && c.name != "simple_gcra" {
				sims = nil // minutes under the race detector; the other cases cover the code
			}
			for _, o := range sims {
				args := []string{"simulate", "-plot", filepath.Join(t.TempDir(), "plot.svg")}
				if o.Seed != nil {
					args = append(args, "-seed", fmt.Sprint(*o.Seed))
				}
				if o.Scenario != "" {
					args = append(args, "-scenario", o.Scenario)
				}
				out, code := rlctl(args...)
				s := playground.Simulate(c.files, o)
				same(t, strings.Join(args[:1], " ")+fmt.Sprintf(" %+v", o), s.Text, out)
				if (s.Error != "") != (code != 0) {
					t.Errorf("Simulate(%+v): error %q; rlctl simulate exits %d", o, s.Error, code)
				}
				for _, r := range s.Reports {
					plot := args[2]
					if len(s.Reports) > 1 {
						plot = strings.TrimSuffix(plot, ".svg") + "-" + r.Scenario + ".svg"
					}
					b, err := os.ReadFile(plot)
					if err != nil {
						t.Fatal(err)
					}
					same(t, "simulate -plot of "+r.Scenario, r.SVG, string(b))
				}
			}

			if verifies[c.name] && !raceEnabled {
				for _, o := range []playground.VerifyOptions{{Budget: 40, Duration: "1m"}, {Seed: &seed, Budget: 60}} {
					args := []string{"verify", "-budget", fmt.Sprint(o.Budget)}
					if o.Seed != nil {
						args = append(args, "-seed", fmt.Sprint(*o.Seed))
					}
					if o.Duration != "" {
						args = append(args, "-duration", o.Duration)
					}
					out, code := rlctl(args...)
					calls := 0
					r := playground.Verify(c.files, o, func(done, total int) {
						calls++
						if done > total {
							t.Errorf("progress %d of %d", done, total)
						}
					})
					same(t, strings.Join(args, " "), r.Text, out)
					if failed := r.Fails > 0 || r.Error != ""; failed != (code != 0) {
						t.Errorf("Verify(%+v): %d fails, error %q; rlctl verify exits %d", o, r.Fails, r.Error, code)
					}
					if r.Error == "" && calls == 0 {
						t.Errorf("Verify(%+v) reported no progress", o)
					}
					var stdout, stderr bytes.Buffer
					run(append(append(args, "-json"), policies...), &env{stdout: &stdout, stderr: &stderr})
					if r.Error == "" || r.Findings != nil {
						same(t, strings.Join(args, " ")+" -json", string(r.Findings), stdout.String())
					}
				}
			}

			// Last, as fmt rewrites the files.
			for _, name := range policies {
				f := playground.Format(name, c.files[name])
				out, code := rlctlFmt(t, "-check", name)
				want := ""
				if f.Changed {
					want = name + "\n"
				}
				if f.Error != "" {
					want = diagnosticsText(f.Diagnostics) + "rlctl: error: " + f.Error + "\n"
				}
				same(t, "fmt -check "+name, want, out)
				if (f.Changed || f.Error != "") != (code != 0) {
					t.Errorf("Format(%s): changed %v, error %q; rlctl fmt -check exits %d", name, f.Changed, f.Error, code)
				}
				rlctlFmt(t, name)
				b, err := os.ReadFile(name)
				if err != nil {
					t.Fatal(err)
				}
				same(t, "fmt "+name, f.Formatted, string(b))
			}
		})
	}
}

// rlctlFmt runs rlctl fmt with args, stdout and stderr together.
func rlctlFmt(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code := run(append([]string{"fmt"}, args...), &env{stdout: &out, stderr: &out})
	return out.String(), code
}

func diagnosticsText(ds []playground.Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.Text)
	}
	return b.String()
}

// same fails t when the playground's got is not the CLI's want.
func same(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s: the playground gives\n%s\nrlctl prints\n%s", what, got, want)
	}
}

func writeTestFile(t *testing.T, name, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
