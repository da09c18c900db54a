package verify

import (
	"strings"
	"testing"
)

// TestListsProperty: the lists property holds for the engine script on a rule of every
// built-in, and fails, with a counterexample, for each buggy list: the script's own text
// with one mistake.
func TestListsProperty(t *testing.T) {
	cfg := load(t, "testdata/lists/lists.hcl")
	bugs := []struct{ name, from, to string }{
		{"an exempt key checked at its cost and charged",
			"  if on == 'exempt' then\n    per = 0\n  end\n  local ok, remaining, retry, reset, limit, write, _, _, w2, w3, w4 = check(key, now, per * g, p)\n  local len, blocked = 0, on and true or false\n",
			"  local ok, remaining, retry, reset, limit, write, _, _, w2, w3, w4 = check(key, now, per * g, p)\n  local len, blocked = 0, on == 'deny'\n"},
		{"a deny retry a microsecond short", "  if retry ~= -1 and retry < lists[3] then\n    retry = lists[3]\n", "  if retry ~= -1 and retry < lists[3] then\n    retry = lists[3] - 1\n"},
		{"the lists swapped", "    return 'deny'\n  end\n  if lists[1] and call('EXISTS', key .. LIST .. lists[1]) == 1 then\n    return 'exempt'\n", "    return 'exempt'\n  end\n  if lists[1] and call('EXISTS', key .. LIST .. lists[1]) == 1 then\n    return 'deny'\n"},
		{"membership read from a stale copy",
			"local function listed(key, lists)\n",
			"local list_copy = {}\nlocal function listed(key, lists)\n  if list_copy[key] ~= nil then\n    return list_copy[key]\n  end\n  local on = false\n  if lists[2] and call('EXISTS', key .. LIST .. lists[2]) == 1 then\n    on = 'deny'\n  elseif lists[1] and call('EXISTS', key .. LIST .. lists[1]) == 1 then\n    on = 'exempt'\n  end\n  list_copy[key] = on\n"},
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
			r, err := c.lists(p, ru, w, 0, "")
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
				t.Error("no rule's lists property failed")
			}
		})
	}
}
