package verify

import (
	"strings"
	"testing"

	"github.com/rlctl/rlctl/algorithms"
)

// TestCheckResetNoKey: a reply that counts state while no key is left is a TTL of 0 only
// when the request charged something; a denied request or a peek that leaves no key and
// reports less than an empty key's remaining is the remaining property's finding, and
// reset-after says nothing of it.
func TestCheckResetNoKey(t *testing.T) {
	empty := probes{done: true, fresh: 3, atReset: 3}
	for _, c := range []struct {
		name    string
		allowed bool
		cost    int64
		fail    bool
	}{
		{"allowed and charged", true, 1, true},
		{"denied", false, 5, false},
		{"a peek", true, 0, false},
	} {
		steps := []step{{at: 0, cost: c.cost, probe: true}}
		res := []result{{allowed: c.allowed, rr: algorithms.RuleResult{Allowed: c.allowed, Remaining: 0}, probes: empty}}
		v := checkReset(&subject{}, steps, res)
		if got := v != nil && strings.Contains(v.msg, "as a TTL of 0 does"); got != c.fail {
			t.Errorf("%s: %v, want a TTL-of-0 finding: %v", c.name, v, c.fail)
		}
	}
}
