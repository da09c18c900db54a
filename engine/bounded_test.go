package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/luahost"
)

// TestLocalBoundsBuiltinsOnly: Local calls a script of built-ins with FCallBounded, which
// the host's instruction limit does not stop, and a script with a plugin with FCall, under
// the limit, so a plugin's runaway call (../testdata/runaway) fails instead of running on.
func TestLocalBoundsBuiltinsOnly(t *testing.T) {
	ctx := context.Background()
	// 100 instructions: enough for the library's top level (definitions only, about 55
	// when written; a library is loaded under the limit), less than any engine call takes.
	l := NewLocal(luahost.New(luahost.WithInstructionLimit(100)))
	call := func(p *Plan, ru *dsl.Rule) (any, error) {
		c := &algorithms.Call{Op: algorithms.OpCheck, Now: algorithms.ServerTime, Rules: []algorithms.Rule{{
			Key: "k:" + ru.Name, Algorithm: ru.Algorithm, Cost: 1, Params: p.Compiled(ru).Params, Compiled: p.Compiled(ru),
		}}}
		argv, err := c.Argv()
		if err != nil {
			t.Fatal(err)
		}
		return l.Eval(ctx, p.Script(), c.Keys(), argv)
	}

	builtin := compile(t, `policy "p" {
  rule "r" {
    algorithm = "gcra"
    key       = "k"
    rate      = "10/s"
    burst     = 5
  }
}`)
	if _, err := call(builtin, builtin.policies[0].Rules[0]); err != nil {
		t.Fatalf("a built-in's call under an instruction limit of 100: %v", err)
	}

	cfg, diags := dsl.Load("../testdata/runaway/spin.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	plugin, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(plugin, cfg.Policies[0].Rules[0]); err == nil || !strings.Contains(err.Error(), "Lua instructions") {
		t.Fatalf("a plugin's runaway call: %v, want the instruction limit's error", err)
	}
}
