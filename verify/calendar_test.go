package verify

import (
	"testing"

	"github.com/rlctl/rlctl/dsl"
)

// TestCalendarProperty: the calendar property holds for the engine script on calendar
// rules of every unit, in zones with daylight saving (north and south, at 02:00 and at
// midnight) and an odd offset, and fails, with a counterexample, for each buggy calendar:
// the script's own text with one mistake.
func TestCalendarProperty(t *testing.T) {
	cfg := load(t, "testdata/calendar/calendar.hcl")
	bugs := []scriptBug{
		{"a month of 30 days", "      if now < cal[i] then\n", "      if now < cal[i - 1] + 2592000000000 then\n"},
		{"a period that ends an hour late (a day of 24 hours)", "        return cal[i - 1], cal[i]\n", "        return cal[i - 1], cal[i] + 3600000000\n"},
	}
	checkMutants(t, cfg, func(c *checker, p *dsl.Policy, ru *dsl.Rule, w []int64, i int) (Result, error) {
		return c.calendarProp(p, ru, w, i, "")
	}, bugs)
}
