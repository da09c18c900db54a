package dsl

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
)

// lintSummaries are the summaries of the plugin lint's diagnostics.
var lintSummaries = []string{"Plugin check writes", "Command never called", "Plugin check returns the wrong shape"}

// lintDiags loads algorithm "quota" with the given commands expression and Lua source
// (and more HCL after the block, such as locals) and returns the lint's diagnostics.
func lintDiags(t *testing.T, commands, src, more string) hcl.Diagnostics {
	t.Helper()
	_, diags := Parse(map[string][]byte{"p.hcl": []byte(fmt.Sprintf(`algorithm "quota" {
  source   = "quota.lua"
  params   = { limit = "count", window = "duration" }
  commands = %s
}
%s`, commands, more)), "quota.lua": []byte(src)})
	var lint hcl.Diagnostics
	for _, d := range diags {
		if slices.Contains(lintSummaries, d.Summary) {
			lint = append(lint, d)
		}
	}
	return lint
}

// quotaSource is a plugin whose check's body is body, with a commit that writes with
// PSETEX; body can use the locals n (the count so far) and limit.
func quotaSource(helpers, body string) string {
	return `params = {'pos', 'pos'}
` + helpers + `
function check(key, now, cost, p)
  local limit = p[1]
  local n = tonumber(call('GET', key)) or 0
` + body + `
end

function commit(key, n)
  call('PSETEX', key, 1000, n)
end
`
}

// TestPluginLint runs each check of the plugin lint on plugins that break it and plugins
// that keep it; want lists the lint's diagnostics as file:line:col: severity: summary, and
// detail what their Details say, in order.
func TestPluginLint(t *testing.T) {
	const okBody = `  if n + cost <= limit then
    return 1, limit - n - cost, 0, p[2], limit, n + cost
  end
  return 0, limit - n, p[2], p[2], limit`
	for _, tc := range []struct {
		name, commands, src, more string
		want                      []string
		detail                    []string
	}{
		// check writes
		{
			name:     "write in check",
			commands: `["GET", "SET", "PSETEX"]`,
			src:      quotaSource("", "  call('SET', key, n + cost)\n"+okBody),
			want:     []string{"quota.lua:6:1: warning: Plugin check writes"},
			detail:   []string{"check runs SET here, but check must not write", "commit(key, pending)", "sixth value"},
		},
		{
			name:     "write in a local function check calls, two deep",
			commands: `["GET", "DEL", "PSETEX"]`,
			src: quotaSource(`local function reset(key)
  redis.pcall('DEL', key)
end

local function fix(key, n)
  if n < 0 then
    reset(key)
  end
  return n
end`, "  n = fix(key, n)\n"+okBody),
			want:   []string{"quota.lua:3:1: warning: Plugin check writes"},
			detail: []string{"check runs DEL here (through fix, called at line 15, then reset, called at line 8), but"},
		},
		{
			name:     "engine helper that writes",
			commands: `["GET", "PEXPIRE", "PSETEX"]`,
			src:      quotaSource("", "  expire_us(key, p[2])\n"+okBody),
			want:     []string{"quota.lua:6:1: warning: Plugin check writes"},
			detail:   []string{"check calls the engine's expire_us here, which runs PEXPIRE, but"},
		},
		{
			name:     "check calls commit",
			commands: `["GET", "PSETEX"]`,
			src:      quotaSource("", "  commit(key, n + cost)\n"+okBody),
			want:     []string{"quota.lua:14:1: warning: Plugin check writes"},
			detail:   []string{"check runs PSETEX here (through commit, called at line 6), but"},
		},
		{
			name:     "reads in check through a local function, writes in commit",
			commands: `["GET", "PTTL", "PSETEX"]`,
			src:      psetexPlugin,
		},
		{
			name:     "writers called only from commit, a local shadowing the engine helper",
			commands: `["GET", "PEXPIRE", "PSETEX"]`,
			src: `params = {'pos', 'pos'}

local function store(key, n)
  call('PSETEX', key, 1000, n)
  expire_us(key, 1000)
end

function check(key, now, cost, p)
  local expire_us = function(k, us) return us end
  local n = tonumber(redis.pcall('GET', key)) or 0
  return 1, p[1] - n, 0, expire_us(key, p[2]), p[1], n + cost
end

function commit(key, n)
  store(key, n)
end
`,
		},
		// commands never called
		{
			name:     "listed, never called",
			commands: `["GET", "PTTL", "PSETEX", "del"]`,
			src:      psetexPlugin,
			want:     []string{"p.hcl:4:40: warning: Command never called"},
			detail:   []string{`Algorithm "quota" lists DEL in commands, but its Lua never calls DEL`, "remove it from commands, or call it"},
		},
		{
			name:     "listed through a local, never called",
			commands: `local.cmds`,
			more:     "locals {\n  cmds = [\"GET\", \"PTTL\", \"HSET\", \"PSETEX\"]\n}\n",
			src:      psetexPlugin,
			want:     []string{"p.hcl:4:14: warning: Command never called"},
			detail:   []string{"lists HSET in commands"},
		},
		{
			name:     "called only through an engine helper",
			commands: `["GET", "PSETEX", "PEXPIRE"]`,
			src:      strings.Replace(quotaSource("", okBody), "  call('PSETEX', key, 1000, n)\n", "  call('PSETEX', key, 1000, n)\n  expire_us(key, 1000)\n", 1),
		},
		{
			name:     "a command that is not a constant: unchecked",
			commands: `["GET", "PSETEX", "DEL"]`,
			src:      strings.Replace(quotaSource("", okBody), "call('PSETEX'", "call(p.cmd or 'PSETEX'", 1),
		},
		{
			name:     "redis.call as a value: unchecked",
			commands: `["GET", "PSETEX", "DEL"]`,
			src:      "local run = redis.call\n" + quotaSource("", okBody),
		},
		// check's return shape
		{
			name:     "boolean allowed",
			commands: `["GET", "PSETEX"]`,
			src:      quotaSource("", "  return true, limit - n, 0, p[2], limit, n + cost"),
			want:     []string{"quota.lua:6:1: error: Plugin check returns the wrong shape"},
			detail:   []string{"This return of check gives true as allowed (value 1)", algorithms.CheckContract},
		},
		{
			name:     "four values, in a loop",
			commands: `["GET", "PSETEX"]`,
			src:      quotaSource("", "  for i = 1, 2 do\n    if i > n then\n      return 0, 0, p[2], p[2]\n    end\n  end\n"+okBody),
			want:     []string{"quota.lua:8:1: error: Plugin check returns the wrong shape"},
			detail:   []string{"This return of check gives 4 values."},
		},
		{
			name:     "a string, a nil and an allowed of 2",
			commands: `["GET", "PSETEX"]`,
			src:      quotaSource("", "  if n > 0 then\n    return 1, 'many', 0, nil, limit\n  end\n  return 2, limit, 0, 0, limit"),
			want: []string{
				"quota.lua:7:1: error: Plugin check returns the wrong shape",
				"quota.lua:9:1: error: Plugin check returns the wrong shape",
			},
			detail: []string{
				`gives the string "many" as remaining (value 2), nil as reset_after_us (value 4).`,
				"gives 2 as allowed (value 1).",
			},
		},
		{
			name:     "seven values",
			commands: `["GET", "PSETEX"]`,
			src:      quotaSource("", "  return 1, limit - n, 0, p[2], limit, n + cost, 'extra'"),
			want:     []string{"quota.lua:6:1: error: Plugin check returns the wrong shape"},
			detail:   []string{"gives 7 values."},
		},
		{
			name:     "an alias of a local function",
			commands: `["GET", "PSETEX"]`,
			src: `params = {'pos', 'pos'}
local function my_check(key, now, cost, p)
  return false, 0, 0, 0, p[1]
end
check = my_check
function commit(key, n)
  call('PSETEX', key, 1000, n)
  call('GET', key)
end
`,
			want:   []string{"quota.lua:3:1: error: Plugin check returns the wrong shape"},
			detail: []string{"false as allowed (value 1)"},
		},
		{
			name:     "tail calls, open-ended values, false pending, nested functions",
			commands: `["GET", "PSETEX"]`,
			src: quotaSource(`local function deny(limit, n, wait)
  return 0, limit - n, wait, wait, limit
end`, `  local function broken()
    return true
  end
  if cost > limit then
    return deny(limit, n, -1)
  end
  if n + cost > limit then
    return 0, deny(limit, n, p[2])
  end
  return 1, limit - n - cost, 0, p[2], limit, false`),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diags := lintDiags(t, tc.commands, tc.src, tc.more)
			if got, want := diagLines(diags), strings.Join(append(tc.want, ""), "\n"); got != want {
				t.Errorf("diagnostics\n%s\nwant\n%s", got, want)
			}
			for i, d := range diags {
				if i < len(tc.detail) && !strings.Contains(d.Detail, tc.detail[i]) {
					t.Errorf("detail %q lacks %q", d.Detail, tc.detail[i])
				}
			}
		})
	}
}

// fastCalls finds the commands a fast rule's factory calls.
var fastCalls = regexp.MustCompile(`call\('([A-Z]+)'`)

// TestBuiltinsPassPluginLint runs each built-in algorithm's Lua through the plugin
// checker: none writes in check or returns another shape. A built-in's commands are a list
// it shares with others (the hash ones, the sorted-set ones), so a command it does not
// call is one that another built-in with the same list calls.
func TestBuiltinsPassPluginLint(t *testing.T) {
	used := map[string][]string{} // a built-in's name → the commands its Lua calls
	fast := map[string][]string{} // → the commands its fast rules call
	diags := map[string]hcl.Diagnostics{}
	for _, a := range algorithms.Builtin() {
		c := &luaChecker{file: a.Name + ".lua", src: []byte(a.Source), alg: a}
		c.check()
		diags[a.Name] = c.diags
		for _, call := range c.lint.calls {
			for _, cmd := range append([]string{call.cmd}, engine().helpers[call.helper]...) {
				if cmd != "" && !slices.Contains(used[a.Name], cmd) {
					used[a.Name] = append(used[a.Name], cmd)
				}
			}
		}
		if c.lint.opaque {
			t.Errorf("%s: the lint cannot name every command the Lua runs", a.Name)
		}
		// Its compiled rules' own check and commit (algorithms/fast.go) run under the
		// same list.
		for _, m := range fastCalls.FindAllStringSubmatch(algorithms.FastSource(a), -1) {
			fast[a.Name] = append(fast[a.Name], m[1])
		}
	}
	for _, a := range algorithms.Builtin() {
		var unused []string
		for _, cmd := range a.Commands {
			if slices.Contains(used[a.Name], cmd) || slices.Contains(fast[a.Name], cmd) {
				continue
			}
			unused = append(unused, cmd)
			if !slices.ContainsFunc(algorithms.Builtin(), func(b *algorithms.Algorithm) bool {
				return slices.Equal(b.Commands, a.Commands) && slices.Contains(used[b.Name], cmd)
			}) {
				t.Errorf("%s lists %s, and no built-in with its commands calls it", a.Name, cmd)
			}
		}
		for _, d := range diags[a.Name] {
			if d.Summary == "Command never called" && slices.ContainsFunc(append(unused, fast[a.Name]...), func(cmd string) bool { return strings.Contains(d.Detail, " lists "+cmd+" ") }) {
				continue
			}
			t.Errorf("%s: %s: %s", a.Name, d.Summary, d.Detail)
		}
	}
}

// TestNeverCalledInJSON checks the warning's subject in HCL's JSON syntax: the list
// element naming the command.
func TestNeverCalledInJSON(t *testing.T) {
	_, diags := Parse(map[string][]byte{"p.hcl.json": []byte(`{"algorithm": {"quota": {
  "source": "quota.lua",
  "params": {"limit": "count", "window": "duration"},
  "commands": ["GET", "PTTL", "PSETEX", "HSET"]
}}}
`), "quota.lua": []byte(psetexPlugin)})
	var got []string
	for _, d := range diags {
		if slices.Contains(lintSummaries, d.Summary) {
			got = append(got, diagLines(hcl.Diagnostics{d}))
		}
	}
	if want := []string{"p.hcl.json:4:41: warning: Command never called\n"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
