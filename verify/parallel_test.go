package verify

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// findingsBytes runs Check and returns its whole output: the JSON form and the verbose
// text, as rlctl verify prints them.
func findingsBytes(t *testing.T, paths []string, opts ...Option) ([]byte, *Findings) {
	t.Helper()
	f, err := Check(load(t, paths...), opts...)
	if err != nil {
		t.Fatal(err)
	}
	js, err := f.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := f.WriteText(&text, true); err != nil {
		t.Fatal(err)
	}
	return append(js, text.Bytes()...), f
}

// Check's findings are the same bytes whatever the number of workers, for every seed:
// on the built-in algorithms, on the example policies (several rules, client clocks, a
// plugin), and on policies with findings, among them a plugin whose findings depend on
// math.random (each check then starts on hosts of its own).
func TestCheckWorkersSameBytes(t *testing.T) {
	t.Parallel()
	examples, _ := filepath.Glob("../policies/*.hcl")
	cases := []struct {
		name   string
		paths  []string
		budget int
		fails  bool // the findings include a failure
	}{
		{"builtins", []string{"testdata/builtins.hcl"}, 100, false},
		{"policies", examples, 60, false},
		{"fixed_window", []string{"testdata/fixed_window.hcl"}, 300, false},
		{"careless_window", []string{"testdata/careless_window.hcl"}, 300, true},
		{"jitter_window", []string{"testdata/jitter_window.hcl"}, 300, true},
	}
	for _, tc := range cases {
		budget := tc.budget
		if raceEnabled {
			budget = max(budget/3, 20)
		}
		for _, seed := range []int64{1, 7, 1234} {
			t.Run(fmt.Sprintf("%s/seed=%d", tc.name, seed), func(t *testing.T) {
				t.Parallel()
				one, f := findingsBytes(t, tc.paths, WithSeed(seed), WithBudget(budget), WithWorkers(1))
				if tc.fails && f.Count(Fail) == 0 {
					t.Fatalf("no failure found: the case proves nothing about findings\n%s", one)
				}
				for _, n := range []int{3} {
					many, _ := findingsBytes(t, tc.paths, WithSeed(seed), WithBudget(budget), WithWorkers(n))
					if !bytes.Equal(one, many) {
						t.Fatalf("1 worker and %d workers differ at byte %d:\n%s", n, firstDiff(one, many), lineDiff(one, many))
					}
				}
			})
		}
	}
}

// The jitter plugin's findings come from math.random: another seed finds another breach.
func TestCheckJitterDependsOnRandom(t *testing.T) {
	t.Parallel()
	f, err := Check(load(t, "testdata/jitter_window.hcl"), WithBudget(200))
	if err != nil {
		t.Fatal(err)
	}
	r := find(t, f, "jitter", "per_user", PropRetryAfter)
	if r.Status != Fail || !strings.Contains(r.Detail, "unsound") {
		t.Fatalf("retry-after: %s %s", r.Status, r.Detail)
	}
}

// Progress reports count every check and every script call, and never overlap.
func TestCheckProgress(t *testing.T) {
	t.Parallel()
	var reports []CheckProgress
	busy := false
	f, err := Check(load(t, "testdata/builtins.hcl"), WithBudget(100), WithWorkers(3), WithCheckProgress(func(p CheckProgress) {
		if busy {
			t.Error("progress reports overlap")
		}
		busy = true
		reports = append(reports, p)
		busy = false
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) == 0 {
		t.Fatal("no progress reported")
	}
	last := reports[len(reports)-1]
	// 7 policies of one rule: traces and race (redis.call) per rule, atomicity and race
	// per policy, override for the two overridable rules, delay for the three rules of a
	// rate (gcra, token_bucket, leaky_bucket), and settle for those and fixed_window.
	if last.Total != 37 || last.Done != last.Total {
		t.Errorf("last report %+v, want 37 of 37 checks", last)
	}
	// The findings count the calls of the traces and races; progress counts every call,
	// the reruns that render counterexamples too.
	if last.Calls < int64(f.Calls) || f.Calls == 0 {
		t.Errorf("last report counts %d calls, the findings %d", last.Calls, f.Calls)
	}
	for i := 1; i < len(reports); i++ {
		if reports[i].Done < reports[i-1].Done || reports[i].Calls < reports[i-1].Calls {
			t.Fatalf("progress went back: %+v then %+v", reports[i-1], reports[i])
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// lineDiff shows the first line where a and b differ.
func lineDiff(a, b []byte) string {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("%d lines against %d", len(la), len(lb))
}
