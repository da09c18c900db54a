package verify

import (
	"strings"
	"testing"
)

// TestOverrideProperty: the override property holds for the engine script on a rule of
// every built-in, and fails, with a counterexample, for each buggy override: the
// script's own text with one mistake.
func TestOverrideProperty(t *testing.T) {
	cfg := load(t, "testdata/override/override.hcl")
	bugs := []struct{ name, from, to string }{
		{"an override read from a stale copy",
			"local function overridden(key, now, p, ovr, r)\n  local v = redis_pcall('GET', key .. OVR)\n",
			"local ovr_copy = {}\nlocal function overridden(key, now, p, ovr, r)\n  local v = ovr_copy[key]\n  if v == nil then\n    v = redis_pcall('GET', key .. OVR)\n    ovr_copy[key] = v\n  end\n"},
		{"an override that ends a microsecond late", "  elseif now < ends then\n", "  elseif now <= ends then\n"},
		{"a change that forgets what a gcra key used", "  local used = ceil(delay(key, at, rate) / period)\n", "  local used = 0\n"},
		{"a change that gives back a token_bucket's fraction", "  local used = ceil((full - l) / p[3])\n", "  local used = math.floor((full - l) / p[3])\n"},
		{"a change that forgets a fixed window's count", "    return 'an override of fixed_window keeps its window'\n  end\n", "    return 'an override of fixed_window keeps its window'\n  end\n  call('DEL', key)\n"},
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
		for _, p := range cfg.Policies {
			ru := p.Rules[0]
			w, err := ru.Wire(nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := c.override(p, ru, w, 0, "")
			if err != nil {
				t.Fatalf("%s: %v", p.Name, err)
			}
			out[p.Name] = r
		}
		return out
	}
	for name, r := range run(t, nil) {
		if r.Status != Pass {
			t.Errorf("policy %s on the engine script: %s %s", name, r.Status, r.Detail)
		}
	}
	for _, bug := range bugs {
		t.Run(bug.name, func(t *testing.T) {
			var caught []string
			for name, r := range run(t, func(s string) string { return strings.Replace(s, bug.from, bug.to, 1) }) {
				if r.Status == Fail {
					caught = append(caught, name)
					if r.Counterexample == nil || len(r.Counterexample.Steps) == 0 {
						t.Errorf("policy %s: a failure without a counterexample: %s", name, r.Detail)
					}
					t.Logf("%s: %s", name, r.Detail)
				}
			}
			if len(caught) == 0 {
				t.Error("no rule's override property failed")
			}
		})
	}
}
