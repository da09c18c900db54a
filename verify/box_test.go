package verify

import (
	"strings"
	"testing"
)

// TestPenaltyBoxProperty: the penalty box property holds for the engine script on
// rules of several algorithms, with and without escalation, and fails, with a
// counterexample, for each buggy box: the script's own text with one mistake.
func TestPenaltyBoxProperty(t *testing.T) {
	cfg := load(t, "testdata/box/box.hcl")
	bugs := []struct{ name, from, to string }{
		{"ends a microsecond early", "  if now < u then\n", "  if now < u - 1 then\n"},
		{"escalates past twice", "    len = b * 2\n", "    len = b * 2 + 1\n"},
		{"a cost that never fits offends", "  if ok == 1 or cost == 0 or retry == -1 then\n", "  if ok == 1 or cost == 0 then\n"},
		{"reset-after ignores the block", "    if reset < wait then\n", "    if false then\n"},
		{"forgets the last block early", "string.format('%.0f %.0f', now + len, len), keep)", "string.format('%.0f %.0f', now + len, len), 1)"},
		{"extended by what it refuses", "    return 0, 0, retry, reset, 0, true\n", "    return 0, 0, retry, reset, box[1], false\n"},
	}
	run := func(t *testing.T, mutate func(string) string) map[string]Result {
		t.Helper()
		c, err := newChecker(cfg, options{seed: DefaultSeed, budget: 3000, clients: DefaultClients})
		if err != nil {
			t.Fatal(err)
		}
		if mutate != nil {
			s := *c.script
			if s.Library = mutate(s.Library); s.Library == c.script.Library {
				t.Fatal("the mutation does not apply to the engine script")
			}
			c.script = &s
		}
		out := map[string]Result{}
		p := cfg.Policies[0]
		for i, ru := range p.Rules {
			w, err := ru.Wire(nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := c.penaltyBox(p, ru, w, i, "")
			if err != nil {
				t.Fatalf("%s: %v", ru.Name, err)
			}
			out[ru.Name] = r
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
			for name, r := range run(t, func(s string) string { return strings.Replace(s, bug.from, bug.to, 1) }) {
				if r.Status == Fail {
					caught = true
					if r.Counterexample == nil || len(r.Counterexample.Steps) == 0 {
						t.Errorf("rule %s: a failure without a counterexample: %s", name, r.Detail)
					}
				}
			}
			if !caught {
				t.Error("no rule's penalty box property failed")
			}
		})
	}
}
