package verify

import (
	"strings"
	"testing"

	"github.com/rlctl/rlctl/dsl"
)

// scriptBug is a buggy engine script: its own text with one mistake, from replaced by to.
type scriptBug struct{ name, from, to string }

// checkMutants holds a property checked on traces of its own to the engine script and to
// its buggy variants: prop (penaltyBox, override, lists) must pass on every rule of cfg
// on the script, and fail, with a counterexample, on at least one of them for each bug. A bug's text must occur exactly once in the script, so that each
// mutation is the mistake it names.
func checkMutants(t *testing.T, cfg *dsl.Config, prop func(c *checker, p *dsl.Policy, ru *dsl.Rule, w []int64, i int) (Result, error), bugs []scriptBug) {
	run := func(t *testing.T, bug *scriptBug) map[string]Result {
		t.Helper()
		c, err := newChecker(cfg, options{seed: DefaultSeed, budget: 3000, clients: DefaultClients})
		if err != nil {
			t.Fatal(err)
		}
		if bug != nil {
			if n := strings.Count(c.script.Library, bug.from); n != 1 {
				t.Fatalf("the mutation's text occurs %d times in the engine script, want once", n)
			}
			s := *c.script
			s.Library = strings.Replace(s.Library, bug.from, bug.to, 1)
			c.script = &s
		}
		out := map[string]Result{}
		for _, p := range cfg.Policies {
			for i, ru := range p.Rules {
				w, err := ru.Wire(nil)
				if err != nil {
					t.Fatal(err)
				}
				r, err := prop(c, p, ru, w, i)
				if err != nil {
					t.Fatalf("%s/%s: %v", p.Name, ru.Name, err)
				}
				out[p.Name+"/"+ru.Name] = r
			}
		}
		return out
	}
	for name, r := range run(t, nil) {
		if r.Status != Pass {
			t.Errorf("rule %s on the engine script: %s %s", name, r.Status, r.Detail)
		}
	}
	for _, bug := range bugs {
		t.Run(bug.name, func(t *testing.T) {
			caught := false
			for name, r := range run(t, &bug) {
				if r.Status == Fail {
					caught = true
					if r.Counterexample == nil || len(r.Counterexample.Steps) == 0 {
						t.Errorf("rule %s: a failure without a counterexample: %s", name, r.Detail)
					}
					t.Logf("%s: %s", name, r.Detail)
				}
			}
			if !caught {
				t.Error("no rule's property failed")
			}
		})
	}
}
