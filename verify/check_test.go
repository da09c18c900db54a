package verify

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
)

// testBudget keeps the checks quick, under the race detector too (which slows luahost
// about fivefold).
var testBudget = map[bool]int{false: 600, true: 300}[raceEnabled]

func find(t *testing.T, f *Findings, policy, rule, prop string) Result {
	t.Helper()
	for _, r := range f.Results {
		if r.Policy == policy && r.Rule == rule && r.Property == prop {
			return r
		}
	}
	t.Fatalf("no result for %s/%s %s", policy, rule, prop)
	return Result{}
}

func check(t *testing.T, paths ...string) *Findings {
	t.Helper()
	f, err := Check(load(t, paths...), WithBudget(testBudget))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// fixed_window is reported for its boundary burst: twice the limit within a microsecond,
// shrunk to the two requests that show it.
func TestFixedWindowBoundaryBurst(t *testing.T) {
	t.Parallel()
	f := check(t, "testdata/fixed_window.hcl")
	r := find(t, f, "api", "per_user", PropLimit)
	if r.Status != Warn || !strings.Contains(r.Detail, "10 allowed within 1µs") {
		t.Fatalf("%s: %s", r.Status, r.Detail)
	}
	ce := r.Counterexample
	if ce == nil || len(ce.Steps) != 2 {
		t.Fatalf("counterexample %+v", ce)
	}
	a, b := ce.Steps[0], ce.Steps[1]
	if b.At-a.At != time.Microsecond || b.At%time.Minute != 0 || a.Request != "cost 5" || b.Request != "cost 5" ||
		!strings.HasPrefix(a.Result, "allowed") || !strings.HasPrefix(b.Result, "allowed") {
		t.Fatalf("counterexample %+v", ce.Steps)
	}
	// Every other property holds.
	for _, r := range f.Results {
		if r.Property != PropLimit && r.Status != Pass && r.Status != Note {
			t.Errorf("%s %s: %s %s", r.Rule, r.Property, r.Status, r.Detail)
		}
	}
}

// Every built-in algorithm meets every property; only the estimates are warned about, and
// only for the limit.
func TestBuiltinsHold(t *testing.T) {
	t.Parallel()
	f := check(t, "testdata/builtins.hcl")
	for _, r := range f.Results {
		t.Logf("%s/%s %s: %s %s", r.Policy, r.Rule, r.Property, r.Status, r.Detail)
		switch {
		case r.Property == PropRaceCommand:
			if r.Status != Note {
				t.Errorf("%s: the race without the script was not found: %s", r.Policy, r.Detail)
			}
		case r.Property == PropLimit && (r.Policy == "fixed" || r.Policy == "window"):
			if r.Status != Warn {
				t.Errorf("%s: limit %s, want a warning: %s", r.Policy, r.Status, r.Detail)
			}
		case r.Status != Pass:
			t.Errorf("%s/%s %s: %s %s", r.Policy, r.Rule, r.Property, r.Status, r.Detail)
		}
	}
	if f.Count(Fail) != 0 {
		t.Fatal("failures")
	}
}

// A sliding window whose retry-after is "the end of the current window" ignores the
// previous window's weight: the client retrying as told is denied again.
func TestRetryAfterIgnoringPreviousWindow(t *testing.T) {
	t.Parallel()
	f := check(t, "testdata/naive_window.hcl")
	r := find(t, f, "naive", "per_user", PropRetryAfter)
	if r.Status != Fail || !strings.HasPrefix(r.Detail, "insufficient") || r.Counterexample == nil {
		t.Fatalf("%s: %s", r.Status, r.Detail)
	}
	steps := r.Counterexample.Steps
	last := steps[len(steps)-1]
	if !last.Mark || !strings.HasPrefix(last.Result, "denied") || len(steps) > 4 {
		t.Fatalf("counterexample %+v", steps)
	}
}

// The sliding log run as separate commands (ZCOUNT, then ZADD) lets concurrent clients
// past the limit; in one script call it holds.
func TestSplitLogRace(t *testing.T) {
	t.Parallel()
	f := check(t, "testdata/split_log.hcl")
	r := find(t, f, "split", "per_user", PropRaceCommand)
	if r.Status != Note || !strings.Contains(r.Detail, "4 allowed at one instant against a limit of 3") {
		t.Fatalf("%s: %s", r.Status, r.Detail)
	}
	var reads, allowed int
	for _, s := range r.Counterexample.Steps {
		if s.Request == "ZCOUNT" {
			reads++
		}
		if s.Mark {
			allowed++
		}
	}
	if reads < 2 || allowed < 2 {
		t.Fatalf("counterexample %+v", r.Counterexample.Steps)
	}
	for _, prop := range []string{PropLimit, PropRetryAfter, PropAtomicity, PropExpiry} {
		if r := find(t, f, "split", "per_user", prop); r.Status != Pass {
			t.Errorf("%s: %s %s", prop, r.Status, r.Detail)
		}
	}
	if r := find(t, f, "split", "", PropRace); r.Status != Pass {
		t.Errorf("race at script granularity: %s %s", r.Status, r.Detail)
	}
}

// brokenPlugins are algorithms with one flaw each, and the property that must catch it.
var brokenPlugins = []struct {
	name, prop, detail string
	lua                string
	commands           string
}{
	{
		name: "never_denies", prop: PropLimit, detail: "allowed within",
		commands: `["HMGET"]`,
		lua: `params = {'pos', 'pos'}
function check(key, now, cost, p)
  return 1, p[1], 0, 0, p[1], false
end
function commit(key, w) end`,
	},
	{
		name: "writes_on_deny", prop: PropAtomicity, detail: "a denied request changed the key: ",
		commands: `["HMGET", "HSET", "PEXPIRE"]`,
		lua: `params = {'pos', 'pos'}
function check(key, now, cost, p)
  local n = tonumber(call('HMGET', key, 'n')[1]) or 0
  if n + cost <= p[1] then
    return 1, p[1] - n - cost, 0, p[2], p[1], {n + cost}
  end
  call('HSET', key, 'n', n + 1)
  return 0, 0, p[2], p[2], p[1]
end
function commit(key, w)
  call('HSET', key, 'n', w[1])
  expire_us(key, 1)
end`,
	},
	{
		name: "no_ttl", prop: PropExpiry, detail: "left",
		commands: `["HMGET", "HSET"]`,
		lua: `params = {'pos', 'pos'}
function check(key, now, cost, p)
  local st = call('HMGET', key, 'w', 'n')
  local win = idiv(now, p[2])
  local n = 0
  if tonumber(st[1]) == win then n = tonumber(st[2]) end
  local to_end = (win + 1) * p[2] - now
  if cost > p[1] then return 0, 0, -1, 0, p[1] end
  if n + cost <= p[1] then
    return 1, p[1] - n - cost, 0, to_end, p[1], {win, n + cost}
  end
  return 0, p[1] - n, to_end, to_end, p[1]
end
function commit(key, w)
  call('HSET', key, 'w', w[1], 'n', w[2])
end`,
	},
	{
		name: "addresses", prop: PropDeterminism, detail: "differs between two runs",
		commands: `["HSET", "PEXPIRE"]`,
		lua: `params = {'pos', 'pos'}
function check(key, now, cost, p)
  return 1, p[1], 0, 1, p[1], {tostring({})}
end
function commit(key, w)
  call('HSET', key, 'seen', w[1])
  expire_us(key, 1)
end`,
	},
}

func TestCheckersCatchBrokenPlugins(t *testing.T) {
	t.Parallel()
	for _, bp := range brokenPlugins {
		t.Run(bp.name, func(t *testing.T) {
			cfg := parse(t, map[string]string{
				"p.hcl": `algorithm "` + bp.name + `" {
  source   = "p.lua"
  params   = { limit = "count", window = "duration" }
  commands = ` + bp.commands + `
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
}
policy "p" {
  rule "r" {
    algorithm = "` + bp.name + `"
    key       = "k"
    limit     = 3
    window    = "10s"
  }
}`,
				"p.lua": bp.lua,
			})
			f, err := Check(cfg, WithBudget(testBudget))
			if err != nil {
				t.Fatal(err)
			}
			r := find(t, f, "p", "r", bp.prop)
			if r.Status != Fail || !strings.Contains(r.Detail, bp.detail) || r.Counterexample == nil {
				var b bytes.Buffer
				f.WriteText(&b, false)
				t.Fatalf("%s: %s %s\n%s", bp.prop, r.Status, r.Detail, b.String())
			}
		})
	}
}

// TestAtomicityUnobservedWrite: a denied request that writes a field the algorithm never
// reads changes no later answer: atomicity reports it as a note, naming the field.
func TestAtomicityUnobservedWrite(t *testing.T) {
	cfg := parse(t, map[string]string{
		"p.hcl": `algorithm "stamp_on_deny" {
  source   = "p.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["HMGET", "HSET", "PEXPIRE", "EXISTS"]
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
}
policy "p" {
  rule "r" {
    algorithm = "stamp_on_deny"
    key       = "k"
    limit     = 3
    window    = "10s"
  }
}`,
		"p.lua": `params = {'pos', 'pos'}
function check(key, now, cost, p)
  local n = tonumber(call('HMGET', key, 'n')[1]) or 0
  if n + cost <= p[1] then
    return 1, p[1] - n - cost, 0, p[2], p[1], {n + cost}
  end
  if call('EXISTS', key) == 1 then
    call('HSET', key, 'denied', now)
  end
  return 0, 0, p[2], p[2], p[1]
end
function commit(key, w)
  call('HSET', key, 'n', w[1])
  expire_us(key, 1)
end`,
	})
	f, err := Check(cfg, WithBudget(testBudget))
	if err != nil {
		t.Fatal(err)
	}
	r := find(t, f, "p", "r", PropAtomicity)
	if r.Status != Note || !strings.Contains(r.Detail, "added denied=") || !strings.Contains(r.Detail, "changed no later answer") {
		var b bytes.Buffer
		f.WriteText(&b, false)
		t.Fatalf("atomicity: %s %s\n%s", r.Status, r.Detail, b.String())
	}
}

// A refund that gives back more than the request took (here: the whole key) lets the
// cluster path's compensation break the limit; in one call per request it cannot.
func TestClusterCompensationRace(t *testing.T) {
	t.Parallel()
	cfg := parse(t, map[string]string{
		"p.hcl": `algorithm "greedy_refund" {
  source   = "p.lua"
  params   = { capacity = "count", rate = "rate" }
  commands = ["HMGET", "HSET", "PEXPIRE", "DEL"]
  guarantee "rate" {
    burst = param.capacity
    rate = param.rate
  }
}
policy "p" {
  rule "first" {
    algorithm = "greedy_refund"
    key       = "k"
    capacity  = 2
    rate      = "1/h"
  }
  rule "second" {
    algorithm = "sliding_log"
    key       = request.user
    limit     = 1
    window    = "1m"
  }
}`,
		// lua/token_bucket.lua, except that its refund deletes the key: it gives back
		// every client's charge, not the one request's.
		"p.lua": `params = {'pos', 'pos', 'pos'}
local function level(key, now, full, rate)
  local st = call('HMGET', key, 'l', 't')
  local l, t = tonumber(st[1]), tonumber(st[2])
  if l == nil or t == nil then
    return full, now
  end
  if now > t then
    if now - t >= cdiv(full - l, rate) then
      return full, now
    end
    return l + (now - t) * rate, now
  end
  return l, t
end
function check(key, now, cost, p)
  local capacity, rate, period = p[1], p[2], p[3]
  local full = capacity * period
  local l, t = level(key, now, full, rate)
  local skew = t - now
  if cost > capacity then
    return 0, idiv(l, period), -1, skew + cdiv(full - l, rate), capacity
  end
  local c = cost * period
  if l >= c then
    local l2 = l - c
    local reset = skew + cdiv(full - l2, rate)
    return 1, idiv(l2, period), 0, reset, capacity, {l2, t, reset}
  end
  return 0, idiv(l, period), skew + cdiv(c - l, rate), skew + cdiv(full - l, rate), capacity
end
function commit(key, w)
  call('HSET', key, 'l', w[1], 't', w[2])
  expire_us(key, w[3])
end
function refund(key, now, cost, p)
  call('DEL', key)
end`,
	})
	f, err := Check(cfg, WithBudget(testBudget))
	if err != nil {
		t.Fatal(err)
	}
	if r := find(t, f, "p", "", PropRace); r.Status != Pass {
		t.Errorf("race (one call per request): %s %s", r.Status, r.Detail)
	}
	r := find(t, f, "p", "", PropRaceCluster)
	if r.Status != Fail || !strings.Contains(r.Detail, `rule "first"`) || !strings.Contains(r.Detail, "against a burst of 2") || r.Counterexample == nil {
		t.Fatalf("race (cluster): %s %s", r.Status, r.Detail)
	}
	// Shrunk request by request: one allowed before the greedy refund, two after it, and
	// the request whose denial refunds.
	requests := map[string]bool{}
	for _, s := range r.Counterexample.Steps {
		requests[fmt.Sprint(s.At, s.Client)] = true
	}
	if len(requests) > 4 || r.Counterexample.Unit != "requests" {
		t.Fatalf("counterexample of %d requests, from %d %s: %+v", len(requests), r.Counterexample.Original, r.Counterexample.Unit, r.Counterexample.Steps)
	}
	for _, r := range f.Results {
		if r.Property != PropRaceCluster && (r.Status == Fail || r.Status == Warn) {
			t.Errorf("%s %s: %s %s", r.Rule, r.Property, r.Status, r.Detail)
		}
	}
}

// The same configuration, seed and budget give identical findings; the text names the
// seed so a run can be repeated.
func TestCheckDeterministic(t *testing.T) {
	t.Parallel()
	cfg := load(t, "testdata/fixed_window.hcl", "testdata/naive_window.hcl")
	run := func() []byte {
		f, err := Check(cfg, WithBudget(300), WithSeed(7))
		if err != nil {
			t.Fatal(err)
		}
		js, err := f.JSON()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := f.WriteText(&b, true); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "seed 7") {
			t.Fatalf("text:\n%s", b.String())
		}
		return append(js, b.Bytes()...)
	}
	if !bytes.Equal(run(), run()) {
		t.Fatal("two runs differ")
	}
}

// A counterexample replays: its steps, run again on a fresh host, break the property.
func TestCounterexampleReplays(t *testing.T) {
	t.Parallel()
	cfg := load(t, "testdata/fixed_window.hcl")
	f, err := Check(cfg, WithBudget(300))
	if err != nil {
		t.Fatal(err)
	}
	r := find(t, f, "api", "per_user", PropLimit)
	c, err := newChecker(cfg, options{seed: 1, budget: 1, clients: 2})
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Policies[0]
	w, _ := p.Rules[0].Wire(nil)
	sub := newSubject(p.Rules[0].Algorithm, w, "replay")
	var steps []step
	for _, s := range r.Counterexample.Steps {
		var cost int64
		if _, err := fmt.Sscanf(s.Request, "cost %d", &cost); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, step{at: s.At.Microseconds(), cost: cost})
	}
	g, err := newRig(c.script)
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := sub.run(g, steps)
	if err != nil {
		t.Fatal(err)
	}
	if v := checkLimit(sub, steps, res); v == nil || v.status != Warn {
		t.Fatalf("replay: %+v", v)
	}
}

// Parameters that depend on the request are checked for the values scenarios give.
func TestParamSets(t *testing.T) {
	t.Parallel()
	cfg := load(t, "../policies/public_api.hcl")
	f, err := Check(cfg, WithBudget(100))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range f.Results {
		if r.Rule == "per_user" && r.Property == PropLimit {
			seen[r.Params] = true
		}
	}
	if !seen["rate=10/s burst=20"] || !seen["rate=10/s burst=100"] {
		t.Fatalf("per_user checked with %v", seen)
	}
}

// A race failure quotes the limit, and the documented bound apart from it; its
// counterexample is shrunk request by request, merging requests into larger costs, to a
// handful: here the two requests, at two instants, that take 2×limit+1.
func TestRaceShrunkToAHandful(t *testing.T) {
	t.Parallel()
	cfg := parse(t, map[string]string{
		"p.hcl": `algorithm "never_denies" {
  source   = "p.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["HMGET"]
  guarantee "window" {
    amount = param.limit
    window = param.window
    bound  = 2
    why    = "it claims a fixed window's boundary burst"
  }
}
policy "p" {
  rule "r" {
    algorithm = "never_denies"
    key       = "k"
    limit     = 5
    window    = "10s"
  }
}`,
		"p.lua": brokenPlugins[0].lua,
	})
	f, err := Check(cfg, WithBudget(testBudget))
	if err != nil {
		t.Fatal(err)
	}
	r := find(t, f, "p", "", PropRace)
	if r.Status != Fail || !strings.Contains(r.Detail, "against a limit of 5") || !strings.Contains(r.Detail, "beyond even the declared bound of 2× (10)") {
		t.Fatalf("race: %s %s", r.Status, r.Detail)
	}
	if ce := r.Counterexample; ce == nil || len(ce.Steps) > 3 {
		t.Fatalf("counterexample %+v", ce)
	}
}

// TestChecksRunTheEnginesCalls: verify runs the plan's script, and names each rule by its
// compiled form in it, with the values the engine sends: what it proves is what runs.
func TestChecksRunTheEnginesCalls(t *testing.T) {
	cfg, diags := dsl.Parse(map[string][]byte{"p.hcl": []byte(`policy "p" {
  rule "r" {
    algorithm = "gcra"
    key       = request.user
    rate      = "10/s"
    burst     = 5
  }
  rule "s" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 3
    window    = "1m"
    shadow    = true
  }
}`)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	c, err := newChecker(cfg, options{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.script.SHA1 != plan.Script().SHA1 || c.script.Function != plan.Script().Function {
		t.Fatalf("verify runs script %s, the engine %s", c.script.SHA1, plan.Script().SHA1)
	}
	p := cfg.Policies[0]
	r, _ := p.Rules[0].Wire(nil)
	call := algorithms.Call{Op: algorithms.OpCheck, Now: 1, Rules: []algorithms.Rule{c.subject(p, p.Rules[0], r, 0).rule(step{cost: 1})}}
	argv, err := call.Argv()
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("@%d", plan.Compiled(p.Rules[0]).Index); argv[6] != want || len(argv) != 8 {
		t.Errorf("verify's call %v, want rule %s with its cost only", argv, want)
	}
	if sub := c.subject(p, p.Rules[1], []int64{3, 60_000_000}, 0); sub.compiled != nil {
		t.Errorf("a shadow rule's own checks name its compiled (shadow) form")
	}
}
