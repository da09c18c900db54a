package fuzz

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/verify"
)

// pluginGlob finds the plugin policies FuzzAlgorithms checks besides the built-ins: each
// file defines plugin algorithms (and may have policies of its own) that verify must pass.
const pluginGlob = "../testdata/plugins/correct/*.hcl"

// algorithmBudget is the number of requests verify.Check generates per rule and input:
// small, so that an input takes well under a second and the fuzzer tries many seeds and
// parameters instead.
const algorithmBudget = 100

// subject is an algorithm FuzzAlgorithms checks: a built-in, or a plugin and the files
// that define it.
type subject struct {
	alg *algorithms.Algorithm
	// For plugins: the file that defines alg, with its policies and scenarios removed, and
	// the Lua sources it names, by the names dsl.Parse resolves them to.
	files map[string][]byte
	// own is the plugin's file as written, checked instead when the plugin refuses the
	// fuzzed parameters.
	own *dsl.Config
}

// subjects returns every built-in algorithm and every plugin defined by a file
// pluginGlob finds.
func subjects(tb testing.TB) []subject {
	var out []subject
	for _, a := range algorithms.Builtin() {
		out = append(out, subject{alg: a})
	}
	paths, err := filepath.Glob(pluginGlob)
	if err != nil {
		tb.Fatal(err)
	}
	for _, path := range paths {
		out = append(out, plugins(tb, path)...)
	}
	return out
}

// plugins returns the plugins the policy file at path defines.
func plugins(tb testing.TB, path string) []subject {
	cfg, diags := dsl.Load(path)
	if diags.HasErrors() {
		tb.Fatalf("%s does not load:\n%s", path, diags.Error())
	}
	src, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	defs, err := definitions(path, src)
	if err != nil {
		tb.Fatal(err)
	}
	files := map[string][]byte{path: defs}
	for _, a := range cfg.Plugins {
		files[a.File] = []byte(a.Source)
	}
	var out []subject
	for _, a := range cfg.Plugins {
		out = append(out, subject{alg: a, files: files, own: cfg})
	}
	return out
}

// definitions returns src, a policy file, without its policy and scenario blocks.
func definitions(path string, src []byte) ([]byte, error) {
	f, diags := hclwrite.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("%s: %s", path, diags.Error())
	}
	for _, b := range f.Body().Blocks() {
		if b.Type() == "policy" || b.Type() == "scenario" {
			f.Body().RemoveBlock(b)
		}
	}
	return f.Bytes(), nil
}

// The values fuzzed parameters draw from: counts 1..maxCount; rates of 1..maxRateAmount
// per one of fuzzDurations; durations from fuzzDurations: the shortest a policy may
// write, odd ones, a second and a minute.
const (
	maxCount      = 9
	maxRateAmount = 5
)

var fuzzDurations = []string{"1ms", "7ms", "250ms", "999ms", "1s", "1m"}

// policyText returns a policy with one rule of alg whose parameters params chooses, each
// within the range its kind allows.
func policyText(alg *algorithms.Algorithm, params []byte) string {
	at := func(i int) int {
		if i < len(params) {
			return int(params[i])
		}
		return 0
	}
	var b strings.Builder
	fmt.Fprintf(&b, "policy \"fuzz\" {\n  rule \"r\" {\n    algorithm = %q\n    key       = \"k\"\n", alg.Name)
	for i, p := range alg.Params {
		switch p.Kind {
		case algorithms.Count:
			fmt.Fprintf(&b, "    %s = %d\n", p.Name, 1+at(2*i)%maxCount)
		case algorithms.Duration:
			fmt.Fprintf(&b, "    %s = %q\n", p.Name, fuzzDurations[at(2*i)%len(fuzzDurations)])
		case algorithms.Rate:
			fmt.Fprintf(&b, "    %s = \"%d/%s\"\n", p.Name, 1+at(2*i)%maxRateAmount, fuzzDurations[at(2*i+1)%len(fuzzDurations)])
		case algorithms.Lease:
			// the engine supplies the lease
		}
	}
	b.WriteString("  }\n}\n")
	return b.String()
}

// config returns a policy with one rule of s's algorithm and the parameters params
// chooses, and its text; ok is false when dsl refuses the parameters, which only a
// plugin's declarations may do.
func (s subject) config(t *testing.T, params []byte) (cfg *dsl.Config, text string, ok bool) {
	text = policyText(s.alg, params)
	files := map[string][]byte{"fuzz.hcl": []byte(text)}
	for name, src := range s.files {
		files[name] = src
	}
	cfg, diags := dsl.Parse(files)
	if !diags.HasErrors() {
		return cfg, text, true
	}
	if s.own == nil {
		t.Fatalf("the policy for built-in %s does not load:\n%s\n%s", s.alg.Name, text, diags.Error())
	}
	t.Logf("%s refuses the fuzzed parameters:\n%s", s.alg.Name, diags.Error())
	return nil, text, false
}

// verdict checks s with the parameters params chooses and seed, and returns the policy
// checked and a description of every failed property ("" when none). A plugin that
// refuses the parameters, when dsl loads them or at run time in its validate(p), is
// checked on the policies of its own file instead.
func (s subject) verdict(t *testing.T, params []byte, seed int64) (text, failed string) {
	cfg, text, ok := s.config(t, params)
	if ok {
		var refusal string
		failed, refusal = check(t, cfg, seed)
		if refusal == "" || s.own == nil {
			return text, failed
		}
		t.Logf("%s's validate refuses the fuzzed parameters: %s", s.alg.Name, refusal)
	}
	failed, _ = check(t, s.own, seed)
	return "(the policies of " + s.alg.File + ")", failed
}

// refusal matches the error the engine script raises when a rule's parameters are refused
// by its algorithm's validate(p) (see lua/dispatch.lua): the same at every request.
var refusal = regexp.MustCompile(`^RLCTL rule \d+: `)

// check runs verify.Check on cfg with seed and returns a description of every failed
// property, or "", and the first error that is a parameter refusal (see refusal).
func check(t *testing.T, cfg *dsl.Config, seed int64) (failed, refused string) {
	f, err := verify.Check(cfg, verify.WithSeed(seed), verify.WithBudget(algorithmBudget))
	if err != nil {
		t.Fatalf("verify.Check: %v", err)
	}
	var b strings.Builder
	for _, r := range f.Results {
		if r.Status != verify.Fail {
			continue
		}
		if refused == "" && refusal.MatchString(r.Error) {
			refused = r.Error
		}
		fmt.Fprintf(&b, "%s/%s %s %s: %s FAILED\n  statement: %s\n  detail: %s\n", r.Policy, r.Rule, r.Algorithm, r.Params, r.Property, r.Statement, r.Detail)
		if r.Error != "" {
			fmt.Fprintf(&b, "  error: %s\n", r.Error)
		}
		if ce := r.Counterexample; ce != nil {
			fmt.Fprintf(&b, "  counterexample (shrunk from %d %s):\n", ce.Original, ce.Unit)
			for _, st := range ce.Steps {
				mark := " "
				if st.Mark {
					mark = ">"
				}
				client := ""
				if st.Client > 0 {
					client = fmt.Sprintf(" client %d", st.Client)
				}
				fmt.Fprintf(&b, "  %s %v%s %s: %s\n", mark, st.At, client, st.Request, st.Result)
			}
		}
	}
	return b.String(), refused
}

// FuzzAlgorithms checks every algorithm — the built-ins and each plugin of the policy
// files pluginGlob finds — with verify.Check on a policy of one rule, its parameters
// chosen by params within the ranges their kinds allow, and the seed of verify's traffic
// generators; it fails when verify reports any property failed (fixed_window's
// documented boundary burst is a warning, not a failure). The first byte of params
// chooses the algorithm. The seed corpus has one input per algorithm.
func FuzzAlgorithms(f *testing.F) {
	subs := subjects(f)
	for i := range subs {
		f.Add(int64(i+1), []byte{byte(i), 3, 2, 4, 1, 5})
	}
	f.Fuzz(func(t *testing.T, seed int64, params []byte) {
		if len(params) == 0 {
			return
		}
		s := subs[int(params[0])%len(subs)]
		if text, failed := s.verdict(t, params[1:], seed); failed != "" {
			t.Errorf("verify fails %s with seed %d on\n%s\n%s", s.alg.Name, seed, text, failed)
		}
	})
}

// TestAlgorithmsFindFlawedPlugin runs FuzzAlgorithms's check on verify's example of a
// flawed plugin, naive_window (its retry-after is the end of the current window), and
// requires a failure: the target reports what verify finds.
func TestAlgorithmsFindFlawedPlugin(t *testing.T) {
	const path = "../verify/testdata/naive_window.hcl"
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("verify's flawed example plugin is gone (%v): point this test at another", err)
	}
	for _, s := range plugins(t, path) {
		if text, failed := s.verdict(t, []byte{3, 0, 4}, 1); failed == "" {
			t.Errorf("verify passes %s on\n%s", s.alg.Name, text)
		} else {
			t.Logf("found, as expected:\n%s", failed)
		}
	}
}
