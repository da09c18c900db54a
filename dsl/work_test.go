package dsl

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
)

// The rule of the report: a sliding_log of a million per hour charged 1000 a request keeps
// up to 1000 entries, and validate says so with the figures and how to fix it.
func TestRuleBudgetWarning(t *testing.T) {
	cfg, diags := Parse(map[string][]byte{"p.hcl": []byte(`policy "api" {
  rule "per_ip" {
    algorithm = "sliding_log"
    key       = "all"
    limit     = 1000000
    window    = "1h"
    cost      = 1000
  }
}
`)})
	if diags.HasErrors() || len(diags) != 1 {
		t.Fatalf("want one warning: %v", diags)
	}
	d := diags[0]
	if d.Severity != hcl.DiagWarning || d.Summary != "Rule past its Redis budget" || d.Subject.Start.Line != 2 || d.Subject.Start.Column != 3 {
		t.Errorf("%s at %v", d.Summary, d.Subject)
	}
	for _, want := range []string{"sliding_log 1000000 per 1h, requests of cost 1000 or more", "6004 elements", "past the budget of 2000 per call",
		"1000 entries (a zset), 157.7 KiB, past the budget of 64 KiB per key", "use sliding_window", `budget { work = 6029, memory = "158KiB" }`} {
		if !strings.Contains(d.Detail, want) {
			t.Errorf("detail lacks %q:\n%s", want, d.Detail)
		}
	}
	w := cfg.Policies[0].Rules[0].Work
	if w == nil || w.Entries != 1000 || w.Elements != 6004 || w.Type != algorithms.KeyZset {
		t.Errorf("work %+v", w)
	}
}

// Budgets: a policy's block over the files' top-level one over the default, attribute by
// attribute.
func TestBudgets(t *testing.T) {
	cfg, diags := Parse(map[string][]byte{"p.hcl": []byte(`budget {
  work = 3
}

policy "tight" {
  rule "r" {
    algorithm = "gcra"
    key       = "all"
    rate      = "1/s"
    burst     = 1
  }
}

policy "raised" {
  budget {
    work   = 40000
    memory = "1.5MiB"
  }
  rule "r" {
    algorithm = "sliding_log"
    key       = "all"
    limit     = 5000
    window    = "1m"
  }
}
`)})
	if diags.HasErrors() || len(diags) != 1 || diags[0].Subject.Start.Line != 6 || !strings.Contains(diags[0].Detail, "4 steps, past the budget of 3 per call") {
		t.Fatalf("want one warning, on the gcra rule: %v", diags)
	}
	if strings.Contains(diags[0].Detail, "per key") {
		t.Errorf("a rule within its memory budget is warned about its memory: %s", diags[0].Detail)
	}
	if b := cfg.Policies[0].Budget; b != (Budget{Work: 3, Memory: DefaultBudget.Memory}) {
		t.Errorf("tight: %+v", b)
	}
	if b := cfg.Policies[1].Budget; b != (Budget{Work: 40000, Memory: 3 << 19}) {
		t.Errorf("raised: %+v", b)
	}
}

// A rule's work is the worst over the values its parameters can take, for its smallest
// positive cost; unknown parameters leave it unknown.
func TestRuleWork(t *testing.T) {
	cfg, diags := Parse(map[string][]byte{"p.hcl": []byte(`locals {
  limits = { free = 10, pro = 300 }
}

policy "p" {
  rule "tiers" {
    algorithm = "sliding_log"
    key       = request.user
    when      = request.user != ""
    limit     = lookup(local.limits, request.plan, 20)
    window    = "1m"
    cost      = request.method == "POST" ? 5 : 0
  }
  rule "computed" {
    algorithm = "sliding_log"
    key       = "all"
    limit     = tonumber(request.limit)
    window    = "1m"
  }
}
`)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	w := cfg.Policies[0].Rules[0].Work
	if w == nil || w.Entries != 300/5 {
		t.Errorf("tiers: %+v, want 60 entries (300 / 5)", w)
	}
	if w := cfg.Policies[0].Rules[1].Work; w != nil {
		t.Errorf("computed: %+v, want none", w)
	}
}

// A plugin's work block: figures over its parameters and costs, memory from the model.
func TestPluginWork(t *testing.T) {
	cfg, diags := Parse(map[string][]byte{
		"p.hcl": []byte(`algorithm "log" {
  source   = "log.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["GET"]
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
  work "zset" {
    commands      = 4 + ceil(log(param.limit, 2))
    elements      = 2 * param.limit / cost.min + cost.max
    entries       = param.limit / cost.min
    element_bytes = 20
    fix           = "keep the limit small"
  }
}

policy "p" {
  rule "r" {
    algorithm = "log"
    key       = "all"
    limit     = 1024
    window    = "1m"
    cost      = 4
  }
}
`),
		"log.lua": []byte(`params = {'pos', 'pos'}
function check(key, now, cost, p)
  local n = tonumber(call('GET', key)) or 0
  return 1, p[1] - n, 0, 0, p[1]
end
function commit(key, w)
end
`)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	w := cfg.Policies[0].Rules[0].Work
	want := algorithms.Work{Commands: 14, Elements: 2*256 + 1024, Type: algorithms.KeyZset, Entries: 256, Memory: algorithms.KeyMemory(algorithms.KeyZset, 256, 20)}
	if w == nil || *w != want {
		t.Errorf("work %+v, want %+v", w, want)
	}
	if cfg.Plugins[0].Complexity.Fix != "keep the limit small" {
		t.Errorf("fix %q", cfg.Plugins[0].Complexity.Fix)
	}
}

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{{"512", 512}, {"512B", 512}, {"64KiB", 65536}, {"100KB", 100_000}, {"1.5MiB", 3 << 19}, {"2GiB", 2 << 30}} {
		if got, err := parseBytes(tc.in); err != nil || got != tc.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "KiB", "64 KiB", "64kb", "0.5B", "0", "1.2.3KiB"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) accepted", in)
		}
	}
}
