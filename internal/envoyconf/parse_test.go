package envoyconf

import (
	"strings"
	"testing"
)

// TestParse: what envoyproxy/ratelimit refuses to load is refused, at its line and column,
// with how to fix it; what it loads is read.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, src, err string
	}{
		{"empty domain", "descriptors:\n  - key: k\n", "c.yaml:1:1: the configuration has no domain"},
		{"empty file", "", "c.yaml: the file is empty"},
		{"not yaml", "domain: a\ndescriptors: [\n", "c.yaml: not YAML: line 2: did not find expected node content"},
		{"empty key", "domain: a\ndescriptors:\n  - value: v\n", "c.yaml:3:5: a descriptor has an empty key"},
		{"duplicate composite key", "domain: a\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n", `c.yaml:5:5: duplicate descriptor composite key "a.k_v" (first at line 3)`},
		{"duplicate composite key nested", "domain: a\ndescriptors:\n  - key: k\n    descriptors:\n      - key: j\n      - key: j\n", `c.yaml:6:9: duplicate descriptor composite key "a.k.j"`},
		{"bad unit", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", `c.yaml:4:17: invalid rate limit unit "FORTNIGHT". The units are second`},
		{"no unit", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}\n", `invalid rate limit unit ""`},
		{"unlimited with unit", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, unlimited: true}\n", "c.yaml:4:17: a rate_limit with unlimited: true has a unit"},
		{"replaces empty", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1, name: n, replaces: [{name: \"\"}]}\n", "a replaces entry has no name"},
		{"replaces self", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1, name: n, replaces: [{name: n}]}\n", `rate_limit "n" replaces itself`},
		{"misspelled", "domain: a\ndescriptors:\n  - key: k\n    ratelimit: {}\n", `c.yaml:4:5: config error, unknown key "ratelimit" in a descriptor. The fields of a descriptor are descriptors, detailed_metric, key, metadata, quota_mode, rate_limit, shadow_mode, share_threshold, value, value_to_metric (did you mean rate_limit?)`},
		{"non-string key", "0.25: a\ndescriptors: []\n", "c.yaml:1:1: config error, key is not of type string: 0.25"},
		{"list of non-maps", "domain: a\ndescriptors:\n  - a\n  - b\n", "c.yaml:3:5: config error, yaml file contains list of type other than map: a"},
		{"negative", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: -1}\n", `requests_per_unit "-1" is not a whole number from 0 to 4294967295`},
		{"too large", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 4294967296}\n", "is not a whole number"},
		{"share_threshold without a wildcard", "domain: a\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n", `share_threshold on "a.k_v", which has no wildcard`},
		{"not a bool", "domain: a\ndescriptors:\n  - key: k\n    shadow_mode: maybe\n", `"maybe" is not a boolean`},
		{"a field out of place", "domain: a\ndescriptors:\n  - key: k\n    unit: day\n", `unknown key "unit" in a descriptor`},
	} {
		_, err := Parse("c.yaml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
		}
	}

	c, err := Parse("ok.yaml", []byte(`domain: a
descriptors:
  - key: k
    value: "v*"
    share_threshold: true
    metadata: {team: x, tiers: [1, 2]}
    rate_limit: {unit: Hour, requests_per_unit: 0, name: n, replaces: [{name: m}]}
  - key: n
    value: 10
    rate_limit: {unlimited: true}
    descriptors:
      - key: j
        shadow_mode: yes
`))
	if err != nil {
		t.Fatal(err)
	}
	k, n := c.Descriptors[0], c.Descriptors[1]
	if k.Value != "v*" || !k.ShareThreshold || k.RateLimit.Unit != "HOUR" || k.RateLimit.RequestsPerUnit != 0 || k.RateLimit.Name != "n" || k.RateLimit.Replaces[0] != "m" {
		t.Errorf("k: %+v %+v", k, k.RateLimit)
	}
	if n.Value != "10" || !n.RateLimit.Unlimited || !n.Descriptors[0].ShadowMode || n.Pos != (Pos{Line: 8, Col: 5}) {
		t.Errorf("n: %+v %+v", n, n.RateLimit)
	}
}
