package verify

import (
	"strings"
	"testing"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/engine"
)

// TestRigWatchesPlugins: verify runs a script of built-ins bounded (watched at each Redis
// command) and a script with a plugin under the instruction limit, so a plugin's call that
// loops without a command is stopped and becomes an error reply, what the errors property
// reports (the plugin: ../testdata/runaway).
func TestRigWatchesPlugins(t *testing.T) {
	builtins, err := engine.Compile(load(t, "testdata/builtins.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if !builtins.Script().Bounded() {
		t.Fatal("the built-ins' script is not bounded")
	}
	cfg := load(t, "../testdata/runaway/spin.hcl")
	plan, err := engine.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	script := plan.Script()
	if script.Bounded() {
		t.Fatal("a script with a plugin is bounded")
	}
	g, err := newRig(script)
	if err != nil {
		t.Fatal(err)
	}
	ru := cfg.Policies[0].Rules[0]
	c := &algorithms.Call{Op: algorithms.OpCheck, Rules: []algorithms.Rule{{
		Key: "k", Algorithm: ru.Algorithm, Cost: 1, Params: []int64{3}, Compiled: plan.Compiled(ru),
	}}}
	_, err = g.do(0, 0, c)
	if err == nil || !strings.Contains(err.Error(), "Lua instructions") {
		t.Fatalf("the plugin's runaway call: %v, want the instruction limit's error", err)
	}
}
