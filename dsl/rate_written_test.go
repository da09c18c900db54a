package dsl

import (
	"slices"
	"testing"
)

// TestRatesAsWritten: a plugin's rate reaches its Lua as written ("6/m": 6 and 60000000
// µs), constant or from the request; a built-in's reduced (1 and 10000000), the same rate
// in the smallest numbers.
func TestRatesAsWritten(t *testing.T) {
	cfg, diags := Parse(map[string][]byte{
		"p.hcl": []byte(`algorithm "drip" {
  source   = "drip.lua"
  params   = { rate = "rate", burst = "count" }
  commands = ["GET", "SET"]
  guarantee "rate" {
    burst = param.burst
    rate  = param.rate
  }
}
policy "p" {
  rule "plugin" {
    algorithm = "drip"
    key       = "a"
    rate      = "6/m"
    burst     = 3
  }
  rule "plugin_per_request" {
    algorithm = "drip"
    key       = "b"
    rate      = request.rate
    burst     = 3
  }
  rule "builtin" {
    algorithm = "gcra"
    key       = "c"
    rate      = "6/m"
    burst     = 3
  }
}
`),
		"drip.lua": []byte(`params = {'pos', 'pos', 'pos'}
function check(key, now, cost, p)
  return 1, 1, 0, 0, 1, false
end
function commit(key, w) end
`),
	})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := map[string][]int64{"plugin": {6, 60000000, 3}, "plugin_per_request": {6, 60000000, 3}, "builtin": {1, 10000000, 3}}
	for _, ru := range cfg.Policies[0].Rules {
		got, err := ru.Wire(mapRequest{"rate": "6/m"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want[ru.Name]) {
			t.Errorf("rule %s: wire %v, want %v", ru.Name, got, want[ru.Name])
		}
	}
}
