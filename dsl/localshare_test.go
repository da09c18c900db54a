package dsl

import (
	"slices"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/algorithms"
)

// local_share is decoded onto the policy (1 when absent), and a plugin whose guarantee
// names its parameters as they are declares the slots that a share scales.
func TestLocalShare(t *testing.T) {
	const lua = "params = {'pos', 'pos', 'pos'}\nfunction check(key, now, cost, p)\n  local n = tonumber(call('GET', key)) or 0\n  return 1, p[1] - n, 0, 0, p[1]\nend\nfunction commit(key, w)\nend\n"
	src := `
policy "shared" {
  on_error    = "local"
  local_share = 3
  rule "w" {
    algorithm = "quota"
    key       = "all"
    limit     = 30
    window    = "1m"
  }
  rule "r" {
    algorithm = "meter"
    key       = "all"
    rate      = "10/s"
    size      = 30
  }
}

policy "whole" {
  on_error = "local"
  rule "r" {
    algorithm = "gcra"
    key       = "all"
    rate      = "1/s"
    burst     = 10
  }
}

algorithm "quota" {
  source   = "q.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["GET"]
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
  work "string" {
    commands = 1
    elements = 1
    entries  = 1
  }
}

algorithm "meter" {
  source   = "m.lua"
  params   = { rate = "rate", size = "count" }
  commands = ["GET"]
  guarantee "rate" {
    burst = param.size
    rate  = param.rate
  }
  work "string" {
    commands = 1
    elements = 1
    entries  = 1
  }
}
`
	cfg, diags := Parse(map[string][]byte{"p.hcl": []byte(src), "q.lua": []byte(strings.Replace(lua, ", 'pos'}", "}", 1)), "m.lua": []byte(lua)})
	if diags.HasErrors() || len(diags) > 0 {
		t.Fatal(diags)
	}
	shared, _ := cfg.Policy("shared")
	whole, _ := cfg.Policy("whole")
	if shared.LocalShare != 3 || whole.LocalShare != 1 {
		t.Errorf("local shares %d and %d, want 3 and 1", shared.LocalShare, whole.LocalShare)
	}
	for _, c := range []struct {
		rule string
		want algorithms.Slots
		w    []int64
		got  []int64
	}{
		{"w", algorithms.Slots{Amount: 0, Rate: -1}, []int64{30, 60_000_000}, []int64{10, 60_000_000}},
		{"r", algorithms.Slots{Amount: 2, Rate: 0}, []int64{10, 1_000_000, 30}, []int64{10, 3_000_000, 10}},
	} {
		alg := shared.Rules[0].Algorithm
		if c.rule == "r" {
			alg = shared.Rules[1].Algorithm
		}
		if s := alg.Guarantee.Share; s == nil || *s != c.want {
			t.Errorf("%s's slots %+v, want %+v", alg.Name, s, c.want)
			continue
		}
		out, err := alg.Share(c.w, 3)
		if err != nil || !slices.Equal(out, c.got) {
			t.Errorf("%s shares %v as %v (%v), want %v", alg.Name, c.w, out, err, c.got)
		}
	}
}
