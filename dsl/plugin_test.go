package dsl

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/luahost"
)

// TestAllowedCommandsAreLuahosts holds the plugin allowlist to luahost's command table:
// every command luahost implements is allowed or forbidden with a reason, every allowed
// command is one luahost runs, and the built-in algorithms call only allowed commands.
func TestAllowedCommandsAreLuahosts(t *testing.T) {
	implemented := luahost.Commands()
	for _, c := range implemented {
		_, forbidden := forbiddenCommands[c]
		if allowed := slices.Contains(allowedCommands, c); allowed == forbidden {
			t.Errorf("%s: allowed %v, forbidden %v; want exactly one", c, allowed, forbidden)
		}
	}
	if !slices.IsSorted(allowedCommands) || len(allowedCommands) == 0 {
		t.Errorf("allowedCommands not sorted or empty: %v", allowedCommands)
	}
	h := luahost.New(luahost.WithTimeout(0), luahost.WithInstructionLimit(1e9), luahost.WithStrictKeys(false))
	for _, c := range allowedCommands {
		if !slices.Contains(implemented, c) {
			t.Errorf("%s is allowed; luahost does not implement it", c)
			continue
		}
		// With no arguments every command fails its arity check or runs; none is unknown.
		_, err := h.Eval(context.Background(), `return redis.pcall(ARGV[1])`, nil, []string{c})
		if err != nil && !strings.HasPrefix(err.Error(), "ERR Wrong number of args") {
			t.Errorf("%s on luahost: %v", c, err)
		}
	}
	for _, a := range algorithms.Builtin() {
		for _, c := range a.Commands {
			if !slices.Contains(allowedCommands, c) {
				t.Errorf("built-in %s calls %s, which plugins may not", a.Name, c)
			}
		}
	}
}

// TestCommandNotAvailable checks the diagnostic of a command luahost lacks: it names the
// command, suggests the closest allowed one and lists what is available.
func TestCommandNotAvailable(t *testing.T) {
	_, diags := Parse(map[string][]byte{"p.hcl": []byte(`algorithm "quota" {
  source   = "quota.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["GET", "PSETX"]
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
}
`), "quota.lua": []byte(psetexPlugin)})
	var found bool
	for _, d := range diags {
		if d.Summary != "Command not available" {
			t.Errorf("unexpected diagnostic %s: %s", d.Summary, d.Detail)
			continue
		}
		found = true
		for _, want := range []string{"cannot call PSETX.", `Did you mean "PSETEX"?`, strings.Join(allowedCommands, ", ")} {
			if !strings.Contains(d.Detail, want) {
				t.Errorf("detail %q lacks %q", d.Detail, want)
			}
		}
		if d.Subject == nil || d.Subject.Start.Line != 4 || d.Subject.Start.Column != 22 {
			t.Errorf("subject %v, want the name PSETX at 4:22", d.Subject)
		}
	}
	if !found {
		t.Error("PSETX loads")
	}
}

// windowPlugin keeps a rule's count in a string that expires at the end of its window,
// which starts at the first charge. Formatted with the TTL command, the microseconds in
// its unit and the command that writes the count with a TTL: PTTL, 1000, PSETEX or TTL,
// 1000000, SETEX.
const windowPlugin = `-- KEYS: the rule's key, a string: the cost charged in the current window.
-- params: limit (count), window (microseconds).
params = {'pos', 'pos'}

local function state(key, window)
  local n = tonumber(call('GET', key)) or 0
  local ttl = call('%[1]s', key)
  if ttl < 0 then
    ttl = cdiv(window, %[2]d)
  end
  return n, ttl
end

function check(key, now, cost, p)
  local limit = p[1]
  local n, ttl = state(key, p[2])
  if cost > limit then
    return 0, nonneg(limit - n), -1, 0, limit
  end
  if n + cost <= limit then
    return 1, limit - n - cost, 0, ttl * %[2]d, limit, {n + cost, ttl}
  end
  return 0, nonneg(limit - n), ttl * %[2]d, ttl * %[2]d, limit
end

function commit(key, w)
  call('%[3]s', key, w[2], w[1])
end
`

var psetexPlugin = fmt.Sprintf(windowPlugin, "PTTL", 1000, "PSETEX")

// TestSetexPluginsLoadAndRun loads plugins that write with PSETEX and SETEX and runs each
// in the engine script on luahost, as verify, simulate and the in-process backends do.
func TestSetexPluginsLoadAndRun(t *testing.T) {
	cfg, diags := Parse(map[string][]byte{
		"p.hcl": []byte(`algorithm "window_ms" {
  source   = "psetex.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["GET", "PTTL", "PSETEX"]
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
}

algorithm "window_s" {
  source   = "setex.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["GET", "TTL", "SETEX"]
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
}
`),
		"psetex.lua": []byte(psetexPlugin),
		"setex.lua":  []byte(fmt.Sprintf(windowPlugin, "TTL", 1000000, "SETEX")),
	})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if len(cfg.Plugins) != 2 {
		t.Fatalf("%d plugins", len(cfg.Plugins))
	}
	for _, plugin := range cfg.Plugins {
		t.Run(plugin.Name, func(t *testing.T) {
			script, err := algorithms.Assemble([]*algorithms.Algorithm{plugin})
			if err != nil {
				t.Fatal(err)
			}
			clock := luahost.NewManualClock(time.UnixMilli(1764472786000))
			h := luahost.New(luahost.WithTimeout(0), luahost.WithInstructionLimit(1e9), luahost.WithClock(clock), luahost.WithCommands(script.Commands()...))
			if _, err := h.Load(script.Source); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			call := func() algorithms.Reply {
				t.Helper()
				c := &algorithms.Call{Op: algorithms.OpCheck, Now: clock.Now().UnixMicro(), Rules: []algorithms.Rule{
					{Key: "rl:k", Algorithm: plugin, Cost: 1, Params: []int64{2, 1_000_000}},
				}}
				argv, err := c.Argv()
				if err != nil {
					t.Fatal(err)
				}
				v, err := h.EvalSHA(ctx, script.SHA1, c.Keys(), argv)
				if err != nil {
					t.Fatal(err)
				}
				r, err := algorithms.DecodeReply(v, 1)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			var got []bool
			for range 3 {
				got = append(got, call().Allowed)
				clock.Advance(100 * time.Millisecond)
			}
			if want := []bool{true, true, false}; !slices.Equal(got, want) {
				t.Errorf("allowed %v, want %v", got, want)
			}
			ttl, err := h.Do(ctx, "PTTL", "rl:k")
			n, _ := ttl.(int64)
			if err != nil || n <= 0 || n > 1000 {
				t.Errorf("PTTL 300ms into the window = %v, %v; want the window's rest", ttl, err)
			}
			clock.Advance(time.Duration(n+1) * time.Millisecond)
			if r := call(); !r.Allowed || r.Rules[0].Remaining != 1 {
				t.Errorf("after the window: %+v", r)
			}
		})
	}
}

// A plugin's own validate(p) runs at load time on a rule's constant parameters, as every
// request would run it: a rule it refuses is an error at the rule, with its message; a
// rule it accepts loads.
func TestPluginValidateAtLoad(t *testing.T) {
	lua := `params = {'pos', 'pos'}
function validate(p)
  if p[2] % p[1] ~= 0 then
    return 'the window must be a multiple of the limit'
  end
end
function check(key, now, cost, p)
  return 1, p[1], 0, 0, p[1]
end
function commit(key, w) end
`
	policy := func(window string) []byte {
		return []byte(`algorithm "even" {
  source   = "even.lua"
  params   = { limit = "count", window = "duration" }
  commands = []
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
}
policy "p" {
  rule "r" {
    algorithm = "even"
    key       = "k"
    limit     = 7
    window    = "` + window + `"
  }
}
`)
	}
	_, diags := Parse(map[string][]byte{"p.hcl": policy("1s"), "even.lua": []byte(lua)})
	var found bool
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			found = d.Summary == "Parameters out of range" && strings.Contains(d.Detail, "even's validate refuses them: the window must be a multiple of the limit") && d.Subject.Start.Line == 14
			if !found {
				t.Errorf("unexpected %s: %s (%v)", d.Summary, d.Detail, d.Subject)
			}
		}
	}
	if !found {
		t.Fatalf("validate's refusal not reported: %v", diags)
	}
	if _, diags := Parse(map[string][]byte{"p.hcl": policy("7s"), "even.lua": []byte(lua)}); diags.HasErrors() {
		t.Fatalf("accepted parameters: %v", diags)
	}
}
