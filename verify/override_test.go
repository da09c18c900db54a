package verify

import (
	"testing"

	"github.com/rlctl/rlctl/dsl"
)

// TestOverrideProperty: the override property holds for the engine script on a rule of
// every built-in, and fails, with a counterexample, for each buggy override: the
// script's own text with one mistake.
func TestOverrideProperty(t *testing.T) {
	cfg := load(t, "testdata/override/override.hcl")
	bugs := []scriptBug{
		{"an override read from a stale copy",
			"local function overridden(key, now, p, ovr, r)\n  local v = redis_pcall('GET', key .. OVR)\n",
			"local ovr_copy = {}\nlocal function overridden(key, now, p, ovr, r)\n  local v = ovr_copy[key]\n  if v == nil then\n    v = redis_pcall('GET', key .. OVR)\n    ovr_copy[key] = v\n  end\n"},
		{"an override that ends a microsecond late", "  elseif now < ends then\n", "  elseif now <= ends then\n"},
		{"a change that forgets what a gcra key used", "  local used = ceil(delay(key, at, rate) / period)\n", "  local used = 0\n"},
		{"a change that gives back a token_bucket's fraction", "  local used = ceil((full - l) / p[3])\n", "  local used = math.floor((full - l) / p[3])\n"},
		{"a change that forgets a fixed window's count", "    return 'an override of fixed_window keeps its window'\n  end\n", "    return 'an override of fixed_window keeps its window'\n  end\n  call('DEL', key)\n"},
	}
	checkMutants(t, cfg, func(c *checker, p *dsl.Policy, ru *dsl.Rule, w []int64, i int) (Result, error) {
		return c.override(p, ru, w, i, "")
	}, bugs)
}
