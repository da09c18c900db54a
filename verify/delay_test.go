package verify

import (
	"testing"

	"github.com/rlctl/rlctl/dsl"
)

// TestDelayProperty: the delay property holds for the engine script on a rule of each
// rate algorithm, and fails, with a counterexample, for each buggy wait: the script's own
// text with one mistake. (A wait beyond the max delay never reaches the property: the
// wire refuses such a reply as malformed, TestDelayReplyBeyondMax.)
func TestDelayProperty(t *testing.T) {
	cfg := load(t, "testdata/delay/delay.hcl")
	bugs := []scriptBug{
		{"a delayed request told to go a microsecond before its slot", "  return 1, 0, later_offences, d\n", "  return 1, 0, later_offences, d - 1\n"},
		{"the slot checked at the arrival, not at its instant", "check_rules(KEYS, rs, st, later, n, now + d, 1)", "check_rules(KEYS, rs, st, later, n, now, 1)"},
	}
	checkMutants(t, cfg, func(c *checker, p *dsl.Policy, ru *dsl.Rule, w []int64, i int) (Result, error) {
		return c.delayProp(p, ru, w, i, "")
	}, bugs)
}
