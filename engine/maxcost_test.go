package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/luahost"
)

// A plugin's max_cost is a refusal, not a wrong answer: a request that would charge a rule
// more is an ErrRequest naming the rule, and one within it is decided.
func TestMaxCostRefusesLargerCosts(t *testing.T) {
	cfg, diags := dsl.Parse(map[string][]byte{
		"p.hcl": []byte(`algorithm "one" {
  source   = "one.lua"
  params   = { limit = "count" }
  commands = ["GET", "SET"]
  max_cost = 1
  guarantee "none" {}
}
policy "p" {
  rule "r" {
    algorithm = "one"
    key       = "k"
    limit     = 3
  }
}`),
		"one.lua": []byte(`params = {'pos'}
function check(key, now, cost, p)
  local n = tonumber(call('GET', key)) or 0
  if n + cost > p[1] then
    return 0, p[1] - n, -1, 0, p[1]
  end
  return 1, p[1] - n - cost, 0, 0, p[1], {n + cost}
end
function commit(key, w)
  call('SET', key, w[1])
end`),
	})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	plan, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := New(NewLocal(luahost.New()), plan)
	ctx := context.Background()
	d, err := e.AllowN(ctx, Attrs{}, 1)
	if err != nil || !d.Allowed {
		t.Fatalf("AllowN(1): %+v, %v; want allowed", d, err)
	}
	_, err = e.AllowN(ctx, Attrs{}, 2)
	if !errors.Is(err, ErrRequest) || !strings.Contains(err.Error(), `rule "r"`) || !strings.Contains(err.Error(), "max_cost") {
		t.Fatalf("AllowN(2): %v; want ErrRequest naming rule r and max_cost", err)
	}
	if d, err := e.AllowN(ctx, Attrs{}, 1); err != nil || !d.Allowed || len(d.Rules) != 1 || d.Rules[0].Remaining != 1 {
		t.Fatalf("after the refusal, AllowN(1): %+v, %v; want allowed with 1 left (the refusal charged nothing)", d, err)
	}
}
