package verify

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
)

// The fault backend on its own: each kind fails calls as a client sees it, a stall's calls
// run when it ends at that instant, a flush empties the server, and outside faults a
// call runs whatever its context says.
func TestFaultBackend(t *testing.T) {
	clock := luahost.NewManualClock(Epoch)
	host := luahost.New(luahost.WithTimeout(0), luahost.WithInstructionLimit(1e9), luahost.WithClock(clock))
	origin := Epoch.UnixMicro()
	faults := []*dsl.Fault{
		{Kind: dsl.FaultStall, At: 1 * time.Second, For: time.Second},
		{Kind: dsl.FaultRefuse, At: 3 * time.Second, For: time.Second},
		{Kind: dsl.FaultError, At: 5 * time.Second, For: time.Second, Reply: "READONLY You can't write against a read only replica."},
		{Kind: dsl.FaultFlush, At: 7 * time.Second},
		{Kind: dsl.FaultRestart, At: 8 * time.Second, For: time.Second},
	}
	b := newFaultBackend(engine.NewLocal(host), host, clock, origin, faults)
	// The script records the server's clock, in seconds, under its key.
	src := `return redis.call('SET', KEYS[1], redis.call('TIME')[1])`
	script := &algorithms.Script{Source: src}
	sha, err := host.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	script.SHA1 = sha
	at := func(d time.Duration) { clock.Set(Epoch.Add(d)) }
	eval := func(key string) error {
		_, err := b.Eval(context.Background(), script, []string{key}, nil)
		return err
	}
	get := func(key string) string {
		v, _ := host.Do(context.Background(), "GET", key)
		s, _ := v.(string)
		return s
	}
	secs := func(d time.Duration) string { return itoa(Epoch.Add(d).Unix()) }

	// A cancelled context does not stop a call outside a fault: the engine's deadline is
	// a wall-clock timer, which a simulation must not depend on.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	at(500 * time.Millisecond)
	if _, err := b.Eval(cancelled, script, []string{"before"}, nil); err != nil || get("before") != secs(0) {
		t.Fatalf("outside a fault: %v, %q", err, get("before"))
	}

	at(1500 * time.Millisecond)
	if err := eval("held"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stall: %v, want a deadline error", err)
	}
	if get("held") != "" {
		t.Fatal("a stalled server ran the call at once")
	}
	at(2500 * time.Millisecond)
	b.settle(clock.Now())
	if get("held") != secs(2*time.Second) || !clock.Now().Equal(Epoch.Add(2500*time.Millisecond)) {
		t.Fatalf("held call: ran at %q, want the stall's end %q; clock %v", get("held"), secs(2*time.Second), clock.Now())
	}
	if l := b.faults[0].rep.Late; l.Ran != 1 || l.Refused != 0 || l.Charged != 0 {
		t.Fatalf("late calls %+v", l)
	}

	at(3 * time.Second)
	err = eval("refused")
	var sysErr syscall.Errno
	if !errors.As(err, &sysErr) || sysErr != syscall.ECONNREFUSED || !strings.Contains(err.Error(), "dial tcp") {
		t.Fatalf("refuse: %v", err)
	}

	at(5*time.Second + 999*time.Millisecond)
	err = eval("error")
	var re redis.Error
	if !errors.As(err, &re) || err.Error() != faults[2].Reply {
		t.Fatalf("error: %v", err)
	}

	at(6 * time.Second)
	if err := eval("after"); err != nil {
		t.Fatalf("a fault's end is outside it: %v", err)
	}
	at(7 * time.Second)
	if err := eval("flushed"); err != nil {
		t.Fatal(err)
	}
	if n := host.Len(); n != 1 || get("flushed") == "" || b.faults[3].rep.KeysLost != 3 {
		t.Fatalf("after the flush: %d keys %v, %d lost", n, host.Keys(), b.faults[3].rep.KeysLost)
	}
	at(8 * time.Second)
	if err := eval("down"); !errors.Is(err, syscall.ECONNREFUSED) || host.Len() != 0 || b.faults[4].rep.KeysLost != 1 {
		t.Fatalf("restart: %v, %d keys", err, host.Len())
	}
}

// faultPolicy is one client at 10 requests a second, limited far above that, whose Redis
// stalls from 10s to 12s; the breaker opens after 3 failures for 1s.
const faultPolicy = `
policy "p" {
  on_error = "deny"
  rule "r" {
    algorithm = "sliding_log"
    key       = request.user
    limit     = 1000
    window    = "1s"
  }
}

scenario "s" {
  policy   = "p"
  duration = "20s"
  traffic "t" {
    request = { user = "u" }
    rate    = "10/s"
  }
  fault {
    kind = "stall"
    at   = "10s"
    for  = "2s"
  }
  engine {
    breaker_failures = 3
    breaker_cooldown = "1s"
  }
  expect {
    timeouts = timed_out("t") == 4
    breaker  = breaker_open("t") == 18
    denied   = denied_during_fault("t") == 20 && denied("t") == 22
    back     = recovered_within("t", "100ms") && !recovered_within("t", "99ms")
    phantoms = phantom_charges() == 0
  }
}
`

// The deadline and the breaker at work, counted exactly: requests at 10.0, 10.1 and 10.2s
// time out and open the breaker until 11.2s; the probe at 11.2s times out and opens it
// until 12.2s; 12.0 and 12.1s still find it open; 12.2s closes it. The 4 calls the server
// held run at 12s, past their deadline: they charge nothing.
func TestSimulateStallBreaker(t *testing.T) {
	cfg := parse(t, map[string]string{"p.hcl": faultPolicy})
	r, err := Simulate(cfg, cfg.Scenarios[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range r.Expect {
		if !x.Pass {
			t.Errorf("%s (%s) failed %s", x.Name, x.Expr, x.Error)
		}
	}
	f := r.Faults[0]
	ft := f.Traffic[0]
	want := Decisions{FailDeny: 20, TimedOut: 4, BreakerOpen: 16}
	if ft.Requests != 20 || ft.Allowed != 0 || ft.Decided != want || ft.Recovery != 100*time.Millisecond {
		t.Errorf("during the stall %+v", ft)
	}
	if got := r.Traffic[0].Decided; got.Redis != 178 || got.FailDeny != 22 || got.BreakerOpen != 18 {
		t.Errorf("whole run %+v", got)
	}
	if *f.Late != (LateCalls{Ran: 4, Refused: 4}) {
		t.Errorf("late calls %+v: the script must refuse a call past its deadline", *f.Late)
	}
	if r.Engine == nil || *r.Engine != (EngineReport{Deadline: 50 * time.Millisecond, BreakerFailures: 3, BreakerCooldown: time.Second}) {
		t.Errorf("engine %+v", r.Engine)
	}
	// Rules count what a script decided; the breaker's denials name no rule.
	if ru := r.Rules[0]; ru.Checked != 178 || ru.Denied != 0 {
		t.Errorf("rule %+v", ru)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"engine: deadline 50ms, breaker opens after 3 failures for 1s, no deny cache\n",
		"stall 10s for 2s  t            20        0      20  fail-deny 20: 4 timed out, 16 breaker open  after 100ms\n",
		"whole run         t           200      178      22  redis 178, fail-deny 22: 4 timed out, 18 breaker open\n",
		"    4 requests waited for the 50ms deadline, then the open breaker answered 16 without Redis\n",
		"    the server ran the 4 calls it held at 12s: 4 refused past their deadline, 0 denied, 0 charged: no phantom charges\n",
		"  t denied by: on_error = \"deny\" 22\n",
		"[stall]\n",
	} {
		if !strings.Contains(squeeze(text.String()), squeeze(line)) {
			t.Errorf("the report lacks %q:\n%s", line, text.String())
		}
	}
}

// squeeze collapses runs of spaces, so that a test reads table rows whatever the widths.
func squeeze(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' }), " ")
}

// fiveAMinute is a rule allowing each user 5 requests in any minute.
const fiveAMinute = `  rule "r" {
    algorithm = "sliding_log"
    key       = request.user
    limit     = 5
    window    = "1m"
  }`

// How each on_error mode decides during each kind of fault. The attacker sends 10 a second,
// a user one every 2s from the fault's start; each may have 5 a minute. The breaker (5
// failures, 1s) sees the user's call and the attacker's at 30s, the attacker's at 30.1,
// 30.2 and 30.3s fail too and open it; the attacker's probes at 31.3, 32.3, … 39.3s fail
// again.
func TestSimulateFaultKinds(t *testing.T) {
	for _, tc := range []struct {
		name, onError, kind string
		attacker, user      Decisions // during the fault
		attackerAllowed     int64
		userAllowed         int64
	}{
		{"local stall", "local", "stall",
			Decisions{Local: 100, TimedOut: 13, BreakerOpen: 87}, Decisions{Local: 5, TimedOut: 1, BreakerOpen: 4}, 5, 5},
		{"allow refuse", "allow", "refuse",
			Decisions{FailOpen: 100, Failed: 13, BreakerOpen: 87}, Decisions{FailOpen: 5, Failed: 1, BreakerOpen: 4}, 100, 5},
		{"deny error", "deny", "error",
			Decisions{FailDeny: 100, Failed: 13, BreakerOpen: 87}, Decisions{FailDeny: 5, Failed: 1, BreakerOpen: 4}, 0, 0},
		{"local restart", "local", "restart",
			Decisions{Local: 100, Failed: 13, BreakerOpen: 87}, Decisions{Local: 5, Failed: 1, BreakerOpen: 4}, 5, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parse(t, map[string]string{"p.hcl": `
policy "p" {
  on_error = "` + tc.onError + `"
` + fiveAMinute + `
}
scenario "s" {
  policy   = "p"
  duration = "1m"
  traffic "user" {
    request = { user = "alice" }
    rate    = "1/2s"
    start   = "30s"
  }
  traffic "attacker" {
    request = { user = "mallory" }
    rate    = "10/s"
  }
  fault {
    kind = "` + tc.kind + `"
    at   = "30s"
    for  = "10s"
  }
  expect {
    any = allowed_during_fault("attacker") >= 0
  }
}`})
			r, err := Simulate(cfg, cfg.Scenarios[0])
			if err != nil {
				t.Fatal(err)
			}
			f := r.Faults[0]
			u, a := f.Traffic[0], f.Traffic[1]
			if a.Decided != tc.attacker || a.Allowed != tc.attackerAllowed {
				t.Errorf("attacker: %d allowed, %+v; want %d, %+v", a.Allowed, a.Decided, tc.attackerAllowed, tc.attacker)
			}
			if u.Decided != tc.user || u.Allowed != tc.userAllowed {
				t.Errorf("user: %d allowed, %+v; want %d, %+v", u.Allowed, u.Decided, tc.userAllowed, tc.user)
			}
			// At 40s the breaker is open until 40.3s.
			if a.Recovery != 200*time.Millisecond {
				t.Errorf("attacker recovery %v", a.Recovery)
			}
		})
	}
}

// A flush forgets every limit: an attacker held to 5 a minute gets 5 more at once, 10
// within 30s.
func TestSimulateFlush(t *testing.T) {
	cfg := parse(t, map[string]string{"p.hcl": `
policy "p" {
` + fiveAMinute + `
}
scenario "s" {
  policy   = "p"
  duration = "50s"
  traffic "attacker" {
    request = { user = "mallory" }
    rate    = "1/s"
  }
  fault {
    kind = "flush"
    at   = "20s"
  }
  expect {
    fresh_burst = allowed("attacker") == 10 && allowed_during_fault("attacker") == 0
  }
}`})
	r, err := Simulate(cfg, cfg.Scenarios[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Failed()) > 0 || r.Faults[0].KeysLost != 1 || len(r.Faults[0].Traffic) != 0 || r.MaxAllowedIn("attacker", 30*time.Second) != 10 {
		t.Fatalf("%+v %+v", r.Expect, r.Faults[0])
	}
}

// denyCachePolicy lets an attacker sending one request a second pass once every 10s, with
// a deny cache, the given fault blocks and expectations.
func denyCachePolicy(faults, expect string) string {
	return `
policy "p" {
  on_error = "allow"
  rule "r" {
    algorithm = "gcra"
    key       = request.user
    rate      = "1/10s"
    burst     = 1
  }
}
scenario "s" {
  policy   = "p"
  duration = "1m"
  traffic "attacker" {
    request = { user = "mallory" }
    rate    = "1/s"
  }
` + faults + `
  engine {
    deny_cache = 100
  }
  expect {
    cached = decided_by("attacker", "cache") == 48 && decided_by("attacker", "redis") == 12
` + expect + `
  }
}`
}

// The deny cache answers repeats of a denial without Redis, also while Redis is down. Per
// 10s, Redis allows one request and denies the next with a retry-after of 9s, and the
// cache answers the other 8, among them the 5 sent during the fault (32s to 37s), which
// never reach the failing Redis.
func TestSimulateDenyCache(t *testing.T) {
	cfg := parse(t, map[string]string{"p.hcl": denyCachePolicy(`
  fault {
    kind = "refuse"
    at   = "32s"
    for  = "5s"
  }`, `
    held     = allowed("attacker") == 6 && denied_during_fault("attacker") == 5
    no_calls = degraded("attacker") == 0`)})
	r, err := Simulate(cfg, cfg.Scenarios[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range r.Expect {
		if !x.Pass {
			t.Errorf("%s (%s) failed %s", x.Name, x.Expr, x.Error)
		}
	}
	if r.Engine == nil || r.Engine.DenyCache != 100 {
		t.Fatalf("engine %+v", r.Engine)
	}
	// Cached denials count for their rule, and their retry-after is probed like Redis's.
	if ru := r.Rules[0]; ru.Denied != 54 || ru.Retry.Advised != 54 || ru.Retry.Honoured != 54 {
		t.Fatalf("rule %+v", ru)
	}

	// Without the fault, the cache answers the same requests.
	cfg = parse(t, map[string]string{"p.hcl": denyCachePolicy("", "")})
	r, err = Simulate(cfg, cfg.Scenarios[0])
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Traffic[0].Decided; d != (Decisions{Redis: 12, Cache: 48}) || r.Faults != nil || r.Engine == nil || r.Engine.DenyCache != 100 || len(r.Failed()) > 0 {
		t.Fatalf("without faults: %+v, faults %v, engine %+v, %+v", d, r.Faults, r.Engine, r.Expect)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(squeeze(text.String()), "engine: a deny cache of 100\nduring traffic requests allowed denied decided by\nwhole run attacker 60 6 54 redis 12, cache 48\n") {
		t.Fatalf("report:\n%s", text.String())
	}
}

// A fault scenario is deterministic too, and its JSON carries the fault report.
func TestSimulateFaultsDeterministic(t *testing.T) {
	cfg := parse(t, map[string]string{"p.hcl": faultPolicy})
	run := func() []byte {
		r, err := Simulate(cfg, cfg.Scenarios[0])
		if err != nil {
			t.Fatal(err)
		}
		return report(t, r)
	}
	a := run()
	if !bytes.Equal(a, run()) {
		t.Fatal("two runs differ")
	}
	for _, s := range []string{`"faults":[{"kind":"stall","at_ns":10000000000,"for_ns":2000000000,`, `"late_calls":{"ran":4,"charged":0,"refused":4,"denied":0,"released":0}`, `"engine":{"deadline_ns":50000000,`, `"decided":{"redis":178,`} {
		if !bytes.Contains(a, []byte(s)) {
			t.Errorf("the JSON lacks %s", s)
		}
	}
}

// The README's fault example is the outage policy's, and its report excerpt is what
// simulating that policy prints.
func TestReadmeFaultExample(t *testing.T) {
	checkReadmeExample(t, "policies/outage.hcl", "search_stall", "fault {")
}

// checkReadmeExample checks a README example of the policy file: the hcl block holding
// marker is lines of the file ("..." for those left out), and the report excerpt after
// "$ rlctl simulate -scenario NAME FILE" is lines of what simulating that scenario prints.
func checkReadmeExample(t *testing.T, file, scenario, marker string) {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	policy, err := os.ReadFile("../" + file)
	if err != nil {
		t.Fatal(err)
	}
	command := "$ rlctl simulate -scenario " + scenario + " " + file + "\n"
	var example, excerpt string
	for _, b := range strings.Split(string(readme), "```")[1:] {
		switch {
		case strings.HasPrefix(b, "hcl\n") && strings.Contains(b, marker):
			example = b
		case strings.HasPrefix(b, "\n"+command):
			excerpt = b
		}
	}
	if example == "" || excerpt == "" {
		t.Fatalf("README lacks the example of %s (an hcl block with %q) or its report excerpt", file, marker)
	}
	for _, line := range strings.Split(strings.TrimPrefix(example, "hcl\n"), "\n") {
		if strings.TrimSpace(line) != "..." && !bytes.Contains(policy, []byte(line+"\n")) {
			t.Errorf("README line %q is not in %s", line, file)
		}
	}
	cfg := load(t, "../"+file)
	var sc *dsl.Scenario
	for _, c := range cfg.Scenarios {
		if c.Name == scenario {
			sc = c
		}
	}
	if sc == nil {
		t.Fatalf("%s has no scenario %q", file, scenario)
	}
	r, err := Simulate(cfg, sc)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(text.String(), "\n")
	for _, line := range strings.Split(strings.TrimPrefix(excerpt, "\n"+command), "\n") {
		if line != "..." && line != "" && !slices.Contains(lines, line) {
			t.Errorf("README line %q is not in the report:\n%s", line, text.String())
		}
	}
}

// Concurrency leases through faults. One request a second holds a lease for 1.5s, 2 at
// most. The lease taken at 9s is released at 10.5s, during the fault. A stalled server
// holds the release and runs it at 15s: nothing is denied. A release refused while Redis
// is down waits in the engine and goes out after the first call Redis answers again: that
// one request (at 16s, when the lease taken at 15s and the unreleased one fill both slots)
// is denied, and none after it; without the retry the lease would stay taken until its
// TTL (29s) and every other request until then would be denied.
func TestSimulateFaultLeases(t *testing.T) {
	for _, tc := range []struct {
		kind             string
		released, denied int64
	}{
		{"stall", 1, 0},
		{"refuse", 0, 1},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			cfg := parse(t, map[string]string{"p.hcl": `
policy "p" {
  on_error = "allow"
  rule "slots" {
    algorithm = "concurrency"
    key       = "all"
    max       = 2
    ttl       = "20s"
  }
}
scenario "s" {
  policy   = "p"
  duration = "40s"
  traffic "t" {
    request = { user = "u" }
    rate    = "1/s"
    hold    = "1500ms"
  }
  fault {
    kind = "` + tc.kind + `"
    at   = "10s"
    for  = "5s"
  }
  expect {
    any = allowed_during_fault("t") == 5
  }
}`})
			r, err := Simulate(cfg, cfg.Scenarios[0])
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Failed()) > 0 {
				t.Errorf("%+v", r.Expect)
			}
			if l := r.Faults[0].Late; l != nil && l.Released != tc.released {
				t.Errorf("late calls %+v", l)
			}
			if d := r.Traffic[0].Denied; d != tc.denied {
				t.Errorf("%d denied, want %d", d, tc.denied)
			}
		})
	}
}
