package verify

import (
	"testing"

	"github.com/rlctl/rlctl/dsl"
)

// TestPenaltyBoxProperty: the penalty box property holds for the engine script on
// rules of several algorithms, with and without escalation, and fails, with a
// counterexample, for each buggy box: the script's own text with one mistake.
func TestPenaltyBoxProperty(t *testing.T) {
	cfg := load(t, "testdata/box/box.hcl")
	bugs := []scriptBug{
		{"ends a microsecond early", "  local u, b = box_read(key)\n  if now < u then\n", "  local u, b = box_read(key)\n  if now < u - 1 then\n"},
		{"escalates past twice", "    len = b * 2\n", "    len = b * 2 + 1\n"},
		{"a cost that never fits offends", "  if ok == 1 or cost == 0 or retry == -1 then\n", "  if ok == 1 or cost == 0 then\n"},
		{"reset-after ignores the block", "    if reset < wait then\n", "    if false then\n"},
		{"forgets the last block early", "string.format('%.0f %.0f', now + len, len), keep)", "string.format('%.0f %.0f', now + len, len), 1)"},
		{"extended by what it refuses", "    return 0, 0, retry, reset, 0, true\n", "    return 0, 0, retry, reset, box[1], false\n"},
	}
	checkMutants(t, cfg, func(c *checker, p *dsl.Policy, ru *dsl.Rule, w []int64, i int) (Result, error) {
		return c.penaltyBox(p, ru, w, i, "")
	}, bugs)
}
