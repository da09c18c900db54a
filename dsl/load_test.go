package dsl

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const quotaPolicy = `algorithm "quota" {
  source   = "lua/quota.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["GET", "SET", "PEXPIRE"]
  doc      = "A fixed counter for tests."
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
  work "string" {
    commands = 3
    elements = 2
    entries  = 1
  }
}

policy "p" {
  rule "r" {
    algorithm = "quota"
    key       = "all"
    limit     = 10
    window    = "1s"
  }
}
`

func TestLoadPaths(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("policies/a.hcl", quotaPolicy)
	write("policies/lua/quota.lua", fuzzPlugin)
	write("policies/b.hcl.json", `{"locals": {"x": 1}}`)
	write("policies/notes.txt", `not a policy`)
	write("policies/sub/c.hcl", `this is not read: directories are not recursive`)
	write("empty/.keep", "")
	write("other.conf", `policy "q" {
  rule "r" {
    algorithm = "gcra"
    key       = "all"
    rate      = "1/s"
    burst     = 1
  }
}
`)

	cfg, diags := Load(filepath.Join(dir, "policies"), filepath.Join(dir, "other.conf"))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if len(cfg.Policies) != 2 || len(cfg.Plugins) != 1 {
		t.Fatalf("%d policies, %d plugins", len(cfg.Policies), len(cfg.Plugins))
	}
	plugin := cfg.Plugins[0]
	if plugin.Name != "quota" || plugin.Source != fuzzPlugin || plugin.Doc == "" || plugin.WireLen() != 2 {
		t.Errorf("plugin %+v", plugin)
	}
	if cfg.Policies[0].Rules[0].Algorithm != plugin {
		t.Error("the rule does not use the plugin")
	}
	for _, name := range []string{"a.hcl", "b.hcl.json", filepath.Join("lua", "quota.lua")} {
		if cfg.Files[filepath.Join(dir, "policies", name)] == nil {
			t.Errorf("Files lacks %s", name)
		}
	}

	_, diags = Load(filepath.Join(dir, "missing.hcl"), filepath.Join(dir, "empty"))
	got := diagLines(diags)
	if !strings.Contains(got, "missing.hcl:1:1: error: Cannot read policy file") || !strings.Contains(got, "empty:1:1: error: No policy files") {
		t.Errorf("diagnostics:\n%s", got)
	}
	if _, diags := Load(); !diags.HasErrors() {
		t.Error("Load() without paths succeeds")
	}
}

func TestScenario(t *testing.T) {
	cfg, diags := Load("../policies/login.hcl")
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	s := cfg.Scenarios[0]
	if s.Name != "credential_stuffing" || s.Policy != "login" || s.Duration != 10*time.Minute || s.Seed != 1 {
		t.Errorf("scenario %+v", s)
	}
	botnet := s.Traffic[1]
	if botnet.Clients != 300 || botnet.Pattern != PatternPoisson || botnet.Rate != (Rate{N: 1, Per: time.Minute}) || botnet.Stop != s.Duration {
		t.Errorf("traffic %+v", botnet)
	}
	req, err := botnet.Render(259)
	if err != nil || req["ip"] != "192.0.2.3" || req["username"] != "Alice" {
		t.Errorf("Render(259) = %v, %v", req, err)
	}
	users, err := s.Traffic[2].Render(7)
	if err != nil || users["username"] != "user7" || users["ip"] != "198.51.100.7" {
		t.Errorf("Render(7) = %v, %v", users, err)
	}
	outcome := mapOutcome{
		requests: map[string]int64{"sprayer": 1200, "botnet": 3000, "users": 200},
		allowed:  map[string]int64{"sprayer": 20, "botnet": 10, "users": 200},
		deniedBy: map[string]int64{"botnet/per_account": 2990},
	}
	for _, x := range s.Expect {
		ok, err := x.Check(outcome)
		if err != nil || !ok {
			t.Errorf("expectation %s: %v, %v", x.Name, ok, err)
		}
	}
	outcome.allowed["users"] = 199
	if ok, err := s.Expect[3].Check(outcome); err != nil || ok {
		t.Errorf("users_unaffected with a denied user: %v, %v", ok, err)
	}
	outcome.requests["sprayer"] = 0
	if ok, err := s.Expect[0].Check(outcome); err != nil || ok {
		t.Errorf("denied_fraction of no requests must be 0: %v, %v", ok, err)
	}
}

type mapOutcome struct {
	requests, allowed, deniedBy map[string]int64
	// Fault measures: by traffic, or traffic/how for decided.
	faultRequests, faultAllowed, decided, timedOut, breakerOpen map[string]int64
	recovery                                                    map[string]time.Duration
	phantom                                                     int64
}

func (o mapOutcome) DuringFault(t string) (int64, int64) {
	return o.faultRequests[t], o.faultAllowed[t]
}
func (o mapOutcome) DecidedBy(t, how string) int64   { return o.decided[t+"/"+how] }
func (o mapOutcome) TimedOut(t string) int64         { return o.timedOut[t] }
func (o mapOutcome) BreakerOpen(t string) int64      { return o.breakerOpen[t] }
func (o mapOutcome) Recovery(t string) time.Duration { return o.recovery[t] }
func (o mapOutcome) PhantomCharges() int64           { return o.phantom }

func (o mapOutcome) Requests(t string) int64                      { return o.requests[t] }
func (o mapOutcome) Allowed(t string) int64                       { return o.allowed[t] }
func (o mapOutcome) Granted(t string) int64                       { return o.allowed[t] }
func (o mapOutcome) Waited(string) int64                          { return 0 }
func (o mapOutcome) MaxWait(string) time.Duration                 { return 0 }
func (o mapOutcome) Settled(string) int64                         { return 0 }
func (o mapOutcome) Owed(string) int64                            { return 0 }
func (o mapOutcome) DeniedBy(t, r string) int64                   { return o.deniedBy[t+"/"+r] }
func (o mapOutcome) MaxAllowedIn(t string, _ time.Duration) int64 { return o.allowed[t] }

// Fault and engine blocks decode in time order with the engine's defaults filled in, and
// the outage expectation functions read the Outcome.
func TestScenarioFaults(t *testing.T) {
	cfg, diags := Parse(map[string][]byte{"p.hcl": []byte(`
policy "p" {
  on_error = "local"
  rule "r" {
    algorithm = "gcra"
    key       = "all"
    rate      = "1/s"
    burst     = 5
  }
}

scenario "s" {
  policy   = "p"
  duration = "10m"
  traffic "t" {
    request = {}
    rate    = "1/s"
  }
  fault {
    kind = "error"
    at   = "5m"
    for  = "1m"
  }
  fault {
    kind = "stall"
    at   = "0s"
    for  = "30s"
  }
  fault {
    kind = "flush"
    at   = "30s"
  }
  fault {
    kind  = "error"
    at    = "8m"
    for   = "10s"
    reply = "READONLY You can't write against a read only replica."
  }
  engine {
    deadline   = "20ms"
    deny_cache = 1000
  }
  expect {
    during    = allowed_during_fault("t") == 3 && denied_during_fault("t") == 7
    degraded  = degraded("t") == 6
    local     = decided_by("t", "local") == 1 && decided_by("t", "redis") == 40
    failures  = timed_out("t") == 2 && breaker_open("t") == 8
    recovered = recovered_within("t", "1s") && !recovered_within("t", "999ms")
    phantom   = phantom_charges() == 0
  }
}
`)})
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	s := cfg.Scenarios[0]
	var got []string
	for _, f := range s.Faults {
		got = append(got, f.Kind+"@"+f.At.String()+"+"+f.For.String())
	}
	if want := "stall@0s+30s flush@30s+0s error@5m0s+1m0s error@8m0s+10s"; strings.Join(got, " ") != want {
		t.Errorf("faults %s, want %s", strings.Join(got, " "), want)
	}
	if s.Faults[2].Reply != DefaultFaultReply || !strings.HasPrefix(s.Faults[3].Reply, "READONLY") || s.Faults[0].Reply != "" {
		t.Errorf("replies %q %q %q", s.Faults[0].Reply, s.Faults[2].Reply, s.Faults[3].Reply)
	}
	want := EngineSettings{Deadline: 20 * time.Millisecond, BreakerFailures: 5, BreakerCooldown: time.Second, DenyCache: 1000, Eviction: "noeviction", Instances: 1}
	if s.Engine != want {
		t.Errorf("engine %+v, want %+v", s.Engine, want)
	}
	o := mapOutcome{
		faultRequests: map[string]int64{"t": 10},
		faultAllowed:  map[string]int64{"t": 3},
		decided:       map[string]int64{"t/redis": 40, "t/local": 1, "t/fail_open": 2, "t/fail_deny": 3},
		timedOut:      map[string]int64{"t": 2},
		breakerOpen:   map[string]int64{"t": 8},
		recovery:      map[string]time.Duration{"t": time.Second},
	}
	for _, x := range s.Expect {
		if ok, err := x.Check(o); err != nil || !ok {
			t.Errorf("%s: %v, %v", x.Name, ok, err)
		}
	}
	o.phantom = 1
	if ok, err := s.Expect[5].Check(o); err != nil || ok {
		t.Errorf("phantom with one phantom charge: %v, %v", ok, err)
	}

	// Without a block, a scenario runs on the engine's defaults.
	cfg, diags = Load("../policies/login.hcl")
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if e := cfg.Scenarios[0].Engine; e != DefaultEngine || e.Deadline != 50*time.Millisecond || e.BreakerFailures != 5 || e.BreakerCooldown != time.Second || e.DenyCache != 0 {
		t.Errorf("default engine %+v", e)
	}
}

// TestConcurrentEval evaluates one Config from many goroutines (run with -race).
func TestConcurrentEval(t *testing.T) {
	cfg, diags := Load("../policies")
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := attrs{"ip": "10.0.0.1", "user": "u", "plan": []string{"free", "pro", "gold"}[g%3], "tenant": "t", "path": "/v1/x", "method": "POST", "content_length": "12345678"}
			for range 100 {
				for _, p := range cfg.Policies {
					if p.Match != nil {
						if _, err := p.Match.Bool(r); err != nil {
							t.Error(err)
						}
					}
					for _, ru := range p.Rules {
						if _, err := ru.Key.String(r); err != nil {
							t.Error(err)
						}
						if _, err := ru.Wire(r); err != nil {
							t.Error(err)
						}
						if ru.Cost != nil {
							if _, err := ru.Cost.Int(r); err != nil {
								t.Error(err)
							}
						}
					}
				}
			}
		})
	}
	wg.Wait()
}

func TestWriteDiagnostics(t *testing.T) {
	cfg, diags := Parse(map[string][]byte{"p.hcl": []byte(`policy "p" {
  rule "r" {
    algorithm = "sliding_windw"
    key       = request.ip
  }
}
`)})
	var b bytes.Buffer
	if err := WriteDiagnostics(&b, cfg.Files, diags, 0, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Error: Unknown algorithm", `3:     algorithm = "sliding_windw"`, `Did you mean "sliding_window"?`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

func TestEngineScope(t *testing.T) {
	sc := engine()
	if got := strings.Join(sc.slots, ","); got != "params,validate,check,commit,refund,retune" {
		t.Errorf("slots %s", got)
	}
	if got := strings.Join(sc.required, ","); got != "params,check,commit" {
		t.Errorf("required %s", got)
	}
	for _, name := range []string{"call", "idiv", "MAX_INT", "expire_us"} {
		if !sc.prelude[name] {
			t.Errorf("prelude lacks %s", name)
		}
	}
	// A plugin gets its key as check's argument: KEYS and ARGV are not globals of the
	// script's library form (FCALL), so a plugin that read them would fail there.
	for _, name := range []string{"KEYS", "ARGV"} {
		if sc.prelude[name] {
			t.Errorf("the prelude offers plugins %s", name)
		}
	}
	if got := strings.Join(sc.helpers["expire_us"], ","); got != "PEXPIRE" {
		t.Errorf("expire_us calls %s", got)
	}
}

// TestJSONSyntax loads a policy written in HCL's JSON syntax: the same checks apply, and
// template strings get the same fast paths as native expressions.
func TestJSONSyntax(t *testing.T) {
	cfg, diags := Parse(map[string][]byte{"api.hcl.json": []byte(`{
  "locals": {"burst": {"free": 20, "pro": 100}},
  "policy": {
    "api": {
      "match": "${startswith(request.path, \"/v1/\")}",
      "rule": {
        "per_user": {
          "algorithm": "gcra",
          "when": "${request.user != \"\" && request.tenant != \"\"}",
          "key": "${request.tenant}:${request.user}",
          "rate": "10/s",
          "burst": "${lookup(local.burst, request.plan, 20)}"
        },
        "per_ip": {
          "algorithm": "sliding_window",
          "when": "${request.ip != \"\" && request.tenant != \"\"}",
          "key": "${request.ip}",
          "limit": 100,
          "window": "1m"
        }
      }
    }
  },
  "scenario": {
    "s": {
      "policy": "api",
      "duration": "1m",
      "traffic": {
        "users": {
          "clients": 10,
          "request": {"path": "/v1/x", "user": "u${client}", "tenant": "t", "ip": "192.0.2.${client}", "plan": "pro"},
          "rate": "1/s"
        }
      },
      "expect": {"served": "${denied_fraction(\"users\") < 0.01}"}
    }
  }
}`)})
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	rules := cfg.Policies[0].Rules
	if rules[0].Key.kind != kindTemplate || rules[1].Key.kind != kindAttr || rules[0].Params[1].table == nil {
		t.Errorf("JSON expressions are not on the fast paths: key kinds %d, %d", rules[0].Key.kind, rules[1].Key.kind)
	}
	w, err := rules[0].Wire(attrs{"plan": "pro"})
	if err != nil || fmtWire(w) != "[1 100000 100]" {
		t.Errorf("Wire = %v, %v", w, err)
	}
	req, err := cfg.Scenarios[0].Traffic[0].Render(3)
	if err != nil || req["user"] != "u3" || req["ip"] != "192.0.2.3" {
		t.Errorf("Render = %v, %v", req, err)
	}
}

// clock_skew sets a client-clock policy's ClockSkew (250ms unless given); on a
// server-clock policy it is a warning, and a malformed duration an error at its value.
func TestClockSkew(t *testing.T) {
	for _, c := range []struct {
		attrs   string
		skew    int64
		summary string
	}{
		{`clock = "client"`, DefaultClockSkew, ""},
		{"clock = \"client\"\n  clock_skew = \"2s\"", 2_000_000, ""},
		{`clock_skew = "2s"`, 0, "clock_skew without client clocks"},
		{"clock = \"client\"\n  clock_skew = \"2 s\"", DefaultClockSkew, "Invalid clock_skew"},
		{"", 0, ""},
	} {
		src := "policy \"p\" {\n  " + c.attrs + "\n  rule \"r\" {\n    algorithm = \"gcra\"\n    key = \"k\"\n    rate = \"1/s\"\n    burst = 2\n  }\n}\n"
		cfg, diags := Parse(map[string][]byte{"p.hcl": []byte(src)})
		var got string
		for _, d := range diags {
			got = d.Summary
			if d.Subject == nil || d.Subject.Start.Line < 2 {
				t.Errorf("%q: diagnostic %q without its line", c.attrs, d.Summary)
			}
		}
		if got != c.summary {
			t.Errorf("%q: diagnostics %v, want %q", c.attrs, diags, c.summary)
		}
		if cfg != nil && len(cfg.Policies) == 1 && cfg.Policies[0].ClockSkew != c.skew {
			t.Errorf("%q: ClockSkew %d, want %d", c.attrs, cfg.Policies[0].ClockSkew, c.skew)
		}
	}
}

// TestScenarioMemory: an engine block's max_memory and eviction, and the mistakes in them.
func TestScenarioMemory(t *testing.T) {
	scenario := func(engine string) string {
		return `policy "p" {
  rule "r" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "5/h"
    burst     = 5
  }
}
scenario "s" {
  policy   = "p"
  duration = "1m"
  traffic "t" {
    request = { ip = "a" }
    rate    = "1/s"
  }
  engine {
` + engine + `
  }
  expect {
    ok = allowed_fraction("t") > 0
  }
}
`
	}
	cfg, diags := Parse(map[string][]byte{"p.hcl": []byte(scenario(`max_memory = "64MiB"` + "\n" + `eviction = "AllKeys-LRU"`))})
	if diags.HasErrors() || len(diags) > 1 { // the warning that request.ip can be empty
		t.Fatal(diags)
	}
	if e := cfg.Scenarios[0].Engine; e.MaxMemory != 64<<20 || e.Eviction != "allkeys-lru" {
		t.Errorf("engine %+v", e)
	}
	for src, want := range map[string]string{
		`max_memory = "64 furlongs"`:                        "p.hcl:17:14: Invalid max_memory",
		`max_memory = request.ip`:                           "p.hcl:17:14: Unknown variable",
		"max_memory = \"1MiB\"\neviction = \"allkeys-lfu\"": "p.hcl:18:12: Invalid eviction",
		`eviction = "allkeys-lru"`:                          "p.hcl:17:1: Eviction without max_memory",
	} {
		_, diags := Parse(map[string][]byte{"p.hcl": []byte(scenario(src))})
		found := false
		for _, d := range diags {
			if fmt.Sprintf("%s:%d:%d: %s", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, d.Summary) == want {
				found = true
			}
		}
		if !found {
			var got []string
			for _, d := range diags {
				got = append(got, fmt.Sprintf("%s:%d:%d: %s", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, d.Summary))
			}
			t.Errorf("%s: %q, want %s", src, got, want)
		}
	}
}
