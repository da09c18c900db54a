package verify

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/rlctl/rlctl/dsl"
)

// The plugin catalogue (../testdata/plugins) proves that verify, in its default mode,
// catches the bugs real plugins ship:
//
//   - correct/NAME.{hcl,lua}: standard algorithms written as plugins. Each loads without
//     a diagnostic (warnings included) and fails no property; a warning is allowed only
//     when its guarantee declares a bound above 1.
//   - buggy/NAME.{hcl,lua}: one correct plugin with exactly one line changed. The Lua
//     opens with "-- base: <correct name>", "-- bug: <what is wrong>" and "-- caught-by:
//     <property>" in place of the base's header comment, and its .hcl is the base's with
//     the algorithm's name and source changed. verify must fail the named property, and
//     every failing counterexample must be a handful of requests (maxCatalogueSteps).
//     A fourth line "-- known-miss: <what verify lacks>" marks a bug verify does not catch
//     yet: the test logs it as missed instead of failing, and fails once verify catches
//     it, so that the line goes.

// maxCatalogueSteps is the most steps a buggy plugin's counterexample may take.
const maxCatalogueSteps = 12

// catalogueDir is the catalogue's root, relative to this package.
var catalogueDir = filepath.Join("..", "testdata", "plugins")

// catalogueRow is one plugin's line in the table TestCatalogue logs.
type catalogueRow struct {
	name, want string
	failed     []string
	miss       bool   // a known miss, not caught
	steps      string // the counterexample sizes of the failures, in result order
	took       time.Duration
	ok         bool
	ran        bool // false when -run left the plugin out
}

func TestCatalogue(t *testing.T) {
	if raceEnabled {
		t.Skip("the catalogue runs verify's default budget on every plugin, too slow under the race detector; it runs in its own non-race stage")
	}
	var rows []catalogueRow
	caught, buggy, passing, correct := 0, 0, 0, 0
	var misses []string
	for _, kind := range []string{"correct", "buggy"} {
		paths, err := filepath.Glob(filepath.Join(catalogueDir, kind, "*.hcl"))
		if err != nil {
			t.Fatal(err)
		}
		if len(paths) == 0 {
			t.Fatalf("no plugins in %s", filepath.Join(catalogueDir, kind))
		}
		for _, path := range paths {
			name := strings.TrimSuffix(filepath.Base(path), ".hcl")
			row := catalogueRow{name: kind + "/" + name}
			t.Run(kind+"/"+name, func(t *testing.T) {
				row.ran = true
				if kind == "correct" {
					correct++
					row.want = "(none)"
					row.ok = checkCorrect(t, path, &row)
					if row.ok {
						passing++
					}
					return
				}
				buggy++
				row.ok = checkBuggy(t, path, name, &row)
				if row.ok {
					caught++
				}
				if row.miss {
					misses = append(misses, name)
				}
			})
			if row.ran {
				rows = append(rows, row)
			}
		}
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "plugin\texpected\tfailed\tcounterexample steps\tseconds\tverdict")
	for _, r := range rows {
		failed := strings.Join(r.failed, ", ")
		if failed == "" {
			failed = "-"
		}
		steps := r.steps
		if steps == "" {
			steps = "-"
		}
		verdict := map[bool]string{true: "ok", false: "WRONG"}[r.ok]
		if r.miss {
			verdict = "known miss"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.2f\t%s\n", r.name, r.want, failed, steps, r.took.Seconds(), verdict)
	}
	w.Flush()
	t.Logf("plugin catalogue:\n%s", b.String())
	t.Logf("buggy plugins caught: %d/%d", caught, buggy)
	if len(misses) > 0 {
		t.Logf("known misses (verify does not catch them yet): %s", strings.Join(misses, ", "))
	}
	t.Logf("correct plugins passing: %d/%d", passing, correct)
}

// checkCorrect checks a correct plugin: a clean load, no failure, and a warning only
// under a declared bound.
func checkCorrect(t *testing.T, path string, row *catalogueRow) bool {
	t.Helper()
	cfg, diags := dsl.Load(path)
	if len(diags) > 0 {
		t.Errorf("load: %v (a correct plugin loads without a diagnostic, as rlctl validate reports)", diags)
		if diags.HasErrors() {
			return false
		}
	}
	if !checkHeader(t, strings.TrimSuffix(path, ".hcl")+".lua") {
		return false
	}
	f, took, ok := catalogueCheck(t, cfg)
	row.took = took
	if !ok {
		return false
	}
	bounded := len(cfg.Plugins) == 1 && !cfg.Plugins[0].Guarantee.Bound.IsExact()
	good := true
	for _, r := range f.Results {
		switch {
		case r.Status == Fail:
			row.failed = append(row.failed, r.Property)
			t.Errorf("%s/%s %s: FAIL %s%s", r.Policy, r.Rule, r.Property, r.Detail, counterText(r.Counterexample))
			good = false
		case r.Status == Warn && !bounded:
			t.Errorf("%s/%s %s: WARN %s, but the guarantee declares no bound above 1", r.Policy, r.Rule, r.Property, r.Detail)
			good = false
		}
	}
	return good
}

// checkHeader checks that a correct plugin's Lua opens with a comment that states its
// keys, parameters, definitions, precision and TTL, as lua/gcra.lua does.
func checkHeader(t *testing.T, luaPath string) bool {
	t.Helper()
	src, err := os.ReadFile(luaPath)
	if err != nil {
		t.Error(err)
		return false
	}
	lines := strings.Split(string(src), "\n")
	head := strings.Join(lines[:len(lines)-len(belowHeader(lines))], "\n")
	good := true
	for _, want := range []string{"KEYS:", "params:", "check:", "precision:", "TTL:"} {
		if !strings.Contains(head, "-- "+want) {
			t.Errorf("%s: the header comment does not state %q", luaPath, want)
			good = false
		}
	}
	return good
}

// checkBuggy checks a buggy plugin: its header, the one changed line against its base, its
// .hcl against the base's, and that verify fails the property the header names with small
// counterexamples.
func checkBuggy(t *testing.T, path, name string, row *catalogueRow) bool {
	t.Helper()
	luaPath := strings.TrimSuffix(path, ".hcl") + ".lua"
	src, err := os.ReadFile(luaPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	var base, want string
	if len(lines) < 4 || !strings.HasPrefix(lines[0], "-- base: ") || !strings.HasPrefix(lines[1], "-- bug: ") || !strings.HasPrefix(lines[2], "-- caught-by: ") {
		t.Fatalf("%s must open with the lines -- base: <correct name>, -- bug: <what is wrong>, -- caught-by: <property>", luaPath)
	}
	base = strings.TrimPrefix(lines[0], "-- base: ")
	want = strings.TrimPrefix(lines[2], "-- caught-by: ")
	miss, knownMiss := strings.CutPrefix(lines[3], "-- known-miss: ")
	row.want = want
	if !slices.Contains(catalogueProps, want) {
		t.Errorf("caught-by %q is not a property: %s", want, strings.Join(catalogueProps, ", "))
	}
	good := oneLineChanged(t, luaPath, lines, filepath.Join(catalogueDir, "correct", base+".lua"))
	good = sameHCL(t, path, filepath.Join(catalogueDir, "correct", base+".hcl"), base, name) && good

	cfg, diags := dsl.Load(path)
	if diags.HasErrors() {
		t.Fatalf("load: %v", diags)
	}
	f, took, ok := catalogueCheck(t, cfg)
	row.took = took
	if !ok {
		return false
	}
	var sizes []string
	for _, r := range f.Results {
		if r.Status != Fail {
			continue
		}
		if !slices.Contains(row.failed, r.Property) {
			row.failed = append(row.failed, r.Property)
		}
		if r.Counterexample == nil {
			sizes = append(sizes, r.Property+":-")
			continue
		}
		n := len(r.Counterexample.Steps)
		sizes = append(sizes, fmt.Sprintf("%s:%d", r.Property, n))
		if n > maxCatalogueSteps {
			t.Errorf("%s: the counterexample has %d steps, more than %d%s", r.Property, n, maxCatalogueSteps, counterText(r.Counterexample))
			good = false
		}
	}
	row.steps = strings.Join(sizes, " ")
	switch caught := slices.Contains(row.failed, want); {
	case knownMiss && caught:
		t.Errorf("verify now fails %s: remove the known-miss line (%s)", want, miss)
		return good
	case knownMiss:
		row.miss = true
		t.Logf("KNOWN MISS: verify does not fail %s (failed: %v): %s", want, row.failed, miss)
		return false
	case !caught:
		t.Errorf("verify did not fail %s (failed: %v): the bug is %s", want, row.failed, strings.TrimPrefix(lines[1], "-- bug: "))
		for _, r := range f.Results {
			t.Logf("%s/%s %s: %s %s", r.Policy, r.Rule, r.Property, r.Status, r.Detail)
		}
		return false
	}
	return good
}

// catalogueProps are the properties a caught-by line may name.
var catalogueProps = []string{PropErrors, PropLimit, PropRetryAfter, PropDenials, PropRemaining, PropPartial, PropResetAfter, PropSkew, PropAtomicity, PropExpiry, PropDeterminism, PropRace, PropRaceCluster}

// belowHeader returns lines without the comment lines they open with.
func belowHeader(lines []string) []string {
	i := 0
	for i < len(lines) && strings.HasPrefix(lines[i], "--") {
		i++
	}
	return lines[i:]
}

// oneLineChanged checks that a buggy plugin's Lua, below its header, is its base's Lua,
// below the base's header comment, with exactly one line changed.
func oneLineChanged(t *testing.T, luaPath string, lines []string, basePath string) bool {
	t.Helper()
	src, err := os.ReadFile(basePath)
	if err != nil {
		t.Errorf("base: %v", err)
		return false
	}
	got, want := belowHeader(lines), belowHeader(strings.Split(string(src), "\n"))
	if len(got) != len(want) {
		t.Errorf("%s has %d lines below its header, its base %s %d: change exactly one line, add or remove none", luaPath, len(got), basePath, len(want))
		return false
	}
	var diff []int
	for i := range got {
		if got[i] != want[i] {
			diff = append(diff, i)
		}
	}
	if len(diff) != 1 {
		t.Errorf("%s differs from %s in %d lines below the header, want exactly 1", luaPath, basePath, len(diff))
		return false
	}
	return true
}

// sameHCL checks that a buggy plugin's .hcl is its base's with the algorithm's name (in
// its block and the rule) and source changed, and nothing else.
func sameHCL(t *testing.T, path, basePath, base, name string) bool {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
		return false
	}
	src, err := os.ReadFile(basePath)
	if err != nil {
		t.Errorf("base: %v", err)
		return false
	}
	want := strings.NewReplacer(
		fmt.Sprintf("algorithm %q", base), fmt.Sprintf("algorithm %q", name),
		fmt.Sprintf("%q", base+".lua"), fmt.Sprintf("%q", name+".lua"),
	).Replace(string(src))
	// A rule's algorithm attribute, however hcl fmt aligns it.
	want = regexp.MustCompile(`(algorithm\s+= )`+regexp.QuoteMeta(fmt.Sprintf("%q", base))).ReplaceAllString(want, "${1}"+fmt.Sprintf("%q", name))
	if string(got) != want {
		t.Errorf("%s is not %s with the algorithm %q renamed %q (and its source):\n%s", path, basePath, base, name, want)
		return false
	}
	return true
}

// catalogueCheck runs verify in its default mode on cfg.
func catalogueCheck(t *testing.T, cfg *dsl.Config) (*Findings, time.Duration, bool) {
	t.Helper()
	start := time.Now()
	f, err := Check(cfg)
	took := time.Since(start)
	if err != nil {
		t.Errorf("verify could not run: %v", err)
		return nil, took, false
	}
	return f, took, true
}

// counterText renders a counterexample for a failure message.
func counterText(ce *Counterexample) string {
	if ce == nil {
		return ""
	}
	var b strings.Builder
	for _, s := range ce.Steps {
		mark := " "
		if s.Mark {
			mark = ">"
		}
		fmt.Fprintf(&b, "\n  %s %v %s: %s", mark, s.At, s.Request, s.Result)
	}
	return b.String()
}
