package verify

import (
	"testing"

	"github.com/rlctl/rlctl/dsl"
)

// TestListsProperty: the lists property holds for the engine script on a rule of every
// built-in, and fails, with a counterexample, for each buggy list: the script's own text
// with one mistake.
func TestListsProperty(t *testing.T) {
	cfg := load(t, "testdata/lists/lists.hcl")
	bugs := []scriptBug{
		{"an exempt key checked at its cost and charged",
			"  if on == 'exempt' then\n    per = 0\n  end\n  local ok, remaining, retry, reset, limit, write, _, _, w2, w3, w4 = check(key, now, per * g, p)\n  local len, blocked = 0, on and true or false\n",
			"  local ok, remaining, retry, reset, limit, write, _, _, w2, w3, w4 = check(key, now, per * g, p)\n  local len, blocked = 0, on == 'deny'\n"},
		{"a deny retry a microsecond short", "  if retry ~= -1 and retry < lists[3] then\n    retry = lists[3]\n", "  if retry ~= -1 and retry < lists[3] then\n    retry = lists[3] - 1\n"},
		{"the lists swapped", "    return 'deny'\n  end\n  if lists[1] and call('EXISTS', key .. LIST .. lists[1]) == 1 then\n    return 'exempt'\n", "    return 'exempt'\n  end\n  if lists[1] and call('EXISTS', key .. LIST .. lists[1]) == 1 then\n    return 'deny'\n"},
		{"membership read from a stale copy",
			"local function listed(key, lists)\n",
			"local list_copy = {}\nlocal function listed(key, lists)\n  if list_copy[key] ~= nil then\n    return list_copy[key]\n  end\n  local on = false\n  if lists[2] and call('EXISTS', key .. LIST .. lists[2]) == 1 then\n    on = 'deny'\n  elseif lists[1] and call('EXISTS', key .. LIST .. lists[1]) == 1 then\n    on = 'exempt'\n  end\n  list_copy[key] = on\n"},
	}
	checkMutants(t, cfg, func(c *checker, p *dsl.Policy, ru *dsl.Rule, w []int64, i int) (Result, error) {
		return c.lists(p, ru, w, i, "")
	}, bugs)
}
