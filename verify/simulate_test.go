package verify

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
)

func parse(t testing.TB, files map[string]string) *dsl.Config {
	t.Helper()
	src := map[string][]byte{}
	for k, v := range files {
		src[k] = []byte(v)
	}
	cfg, diags := dsl.Parse(src)
	if diags.HasErrors() {
		t.Fatalf("parse: %v", diags)
	}
	return cfg
}

func load(t testing.TB, paths ...string) *dsl.Config {
	t.Helper()
	cfg, diags := dsl.Load(paths...)
	if diags.HasErrors() {
		t.Fatalf("load: %v", diags)
	}
	return cfg
}

// report renders r as every output of rlctl simulate does: JSON, text and SVG.
func report(t *testing.T, r *Report) []byte {
	t.Helper()
	var b bytes.Buffer
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	b.Write(js)
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// longUnderRace are the example scenarios that simulate a month or a long day of traffic:
// together about three quarters of the example scenarios' time, twenty times that under the
// race detector. The race stage leaves them to make test's proofs stage, which runs these
// tests without it; the race stage still runs every other scenario, probes beside included.
var longUnderRace = map[string]bool{
	"settle.hcl/tokens_month_end": true,
	"overrides.hcl/upgrade":       true,
	"calendar.hcl/month_end":      true,
}

// skipLongUnderRace skips the test under the race detector when the scenario name of the
// example file path is one of longUnderRace.
func skipLongUnderRace(t *testing.T, path, name string) bool {
	t.Helper()
	return raceEnabled && longUnderRace[filepath.Base(path)+"/"+name]
}

// Every example policy's scenarios hold their expectations.
func TestSimulateExamples(t *testing.T) {
	t.Parallel()
	paths, _ := filepath.Glob("../policies/*.hcl")
	if len(paths) == 0 {
		t.Fatal("no example policies")
	}
	for _, path := range paths {
		cfg := load(t, path)
		for _, s := range cfg.Scenarios {
			t.Run(filepath.Base(path)+"/"+s.Name, func(t *testing.T) {
				if skipLongUnderRace(t, path, s.Name) {
					t.Skip("a long scenario: run by make test's proofs stage, without the race detector")
				}
				r, err := Simulate(cfg, s)
				if err != nil {
					t.Fatal(err)
				}
				if r.Requests == 0 {
					t.Fatal("no requests")
				}
				for _, x := range r.Expect {
					if !x.Pass {
						t.Errorf("expectation %s (%s) failed %s", x.Name, x.Expr, x.Error)
					}
				}
				var text bytes.Buffer
				if err := r.WriteText(&text); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(text.String(), "expectations hold") {
					t.Errorf("report:\n%s", text.String())
				}
			})
		}
	}
}

// The same seed gives byte-identical reports; another seed changes random arrivals.
func TestSimulateDeterministic(t *testing.T) {
	t.Parallel()
	cfg := load(t, "../policies/login.hcl")
	run := func(opts ...Option) []byte {
		r, err := Simulate(cfg, cfg.Scenarios[0], opts...)
		if err != nil {
			t.Fatal(err)
		}
		return report(t, r)
	}
	a, b := run(), run()
	if !bytes.Equal(a, b) {
		t.Fatal("two runs with the same seed differ")
	}
	if c := run(WithSeed(2)); bytes.Equal(a, c) {
		t.Fatal("seed 2 gives the same report as seed 1 for Poisson traffic")
	}
}

const patternPolicy = `
policy "p" {
  rule "r" {
    algorithm = "sliding_log"
    key       = request.user
    limit     = 1000
    window    = "1s"
  }
}
`

// arrivals collects the arrival offsets of one traffic block by running a scenario.
func arrivals(t *testing.T, traffic string) []time.Duration {
	t.Helper()
	cfg := parse(t, map[string]string{"p.hcl": patternPolicy + `
scenario "s" {
  policy   = "p"
  duration = "10s"
  traffic "t" {
` + traffic + `
  }
  expect {
    any = requests("t") >= 0
  }
}`})
	var out []time.Duration
	_, err := Simulate(cfg, cfg.Scenarios[0], WithObserver(func(at time.Time, _ string, _ map[string]string, _ *engine.Decision) {
		out = append(out, at.Sub(Epoch))
	}))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPatterns(t *testing.T) {
	t.Run("constant", func(t *testing.T) {
		got := arrivals(t, `request = { user = "u" }
    rate = "3/s"`)
		if len(got) != 30 || got[0] != 0 || got[1] != 333333*time.Microsecond || got[3] != time.Second {
			t.Fatalf("%d arrivals %v", len(got), got[:4])
		}
	})
	t.Run("clients spread", func(t *testing.T) {
		got := arrivals(t, `request = { user = "u${client}" }
    clients = 4
    rate    = "1/s"`)
		if len(got) != 40 || got[1] != 250*time.Millisecond || got[2] != 500*time.Millisecond {
			t.Fatalf("%d arrivals %v", len(got), got[:4])
		}
	})
	t.Run("burst", func(t *testing.T) {
		got := arrivals(t, `request = { user = "u" }
    rate    = "2/s"
    pattern = "burst"
    burst   = 5`)
		// 5 at once every 2.5s: 0, 2.5, 5, 7.5.
		if len(got) != 20 || got[4] != 0 || got[5] != 2500*time.Millisecond {
			t.Fatalf("%d arrivals %v", len(got), got)
		}
	})
	t.Run("edge", func(t *testing.T) {
		// "4/s" is stored as 1 per 250ms; the edge straddles the rule's 1s window: per
		// boundary, 2 at 1ms before it and 2 at it. The first boundary with room is 1s.
		got := arrivals(t, `request = { user = "u" }
    rate    = "4/s"
    pattern = "edge"`)
		want := []time.Duration{999 * time.Millisecond, 999 * time.Millisecond, time.Second, time.Second, 1999 * time.Millisecond}
		if len(got) != 9*4+2 || !equalDurations(got[:5], want) {
			t.Fatalf("%d arrivals %v", len(got), got)
		}
	})
	t.Run("ramp", func(t *testing.T) {
		got := arrivals(t, `request = { user = "u" }
    rate    = "10/s"
    pattern = "ramp"`)
		// The expected count is 10/s × 10s / 2 = 50, denser at the end.
		first, second := 0, 0
		for _, d := range got {
			if d < 5*time.Second {
				first++
			} else {
				second++
			}
		}
		if len(got) != 50 || first*3 > second+2 {
			t.Fatalf("%d arrivals, %d in the first half, %d in the second", len(got), first, second)
		}
	})
	t.Run("poisson", func(t *testing.T) {
		got := arrivals(t, `request = { user = "u${client}" }
    clients = 50
    rate    = "10/s"
    pattern = "poisson"`)
		// Mean 5000; the standard deviation is about 71.
		if math.Abs(float64(len(got))-5000) > 300 {
			t.Fatalf("%d arrivals, want about 5000", len(got))
		}
	})
	t.Run("start and stop", func(t *testing.T) {
		got := arrivals(t, `request = { user = "u" }
    rate  = "1/s"
    start = "2s"
    stop  = "5s"`)
		if len(got) != 3 || got[0] != 2*time.Second || got[2] != 4*time.Second {
			t.Fatalf("%v", got)
		}
	})
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A hand-checked replay: a fixed window of 2 per 10s.
func TestSimulateTrace(t *testing.T) {
	cfg := parse(t, map[string]string{"p.hcl": `
policy "p" {
  rule "fixed" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 2
    window    = "10s"
  }
}`})
	tr, err := ReadTrace(strings.NewReader(`t,user,source
0s,alice,a
1s,alice,a
2s,alice,a
9.999s,bob,b
10s,alice,a
10.5s,bob,b
11s,bob,b
`), "trace.csv")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Simulate(cfg, nil, WithTrace(tr))
	if err != nil {
		t.Fatal(err)
	}
	o := r.Outcome()
	if o.Requests("a") != 4 || o.Allowed("a") != 3 || o.Requests("b") != 3 || o.Allowed("b") != 3 {
		t.Fatalf("a %d/%d b %d/%d", o.Allowed("a"), o.Requests("a"), o.Allowed("b"), o.Requests("b"))
	}
	if got := o.DeniedBy("a", "fixed"); got != 1 {
		t.Fatalf("denied by fixed: %d", got)
	}
	// bob got 3 through within 1.001s: the boundary burst, seen by the worst-window column.
	if got := o.MaxAllowedIn("b", 2*time.Second); got != 3 {
		t.Fatalf("max allowed in 2s: %d", got)
	}
	w := r.Rules[0].Worst
	if w == nil || w.Allowed != 3 || w.Limit != 2 || w.Bound != 4 || !strings.HasSuffix(w.Key, "bob") {
		t.Fatalf("worst %+v", w)
	}
	// alice's denial at 2s was told to come back at 10s, when the window turned.
	if ta := r.traffic("a"); ta.Retry.Advised != 1 || ta.Retry.Honoured != 1 {
		t.Fatalf("retry %+v", ta.Retry)
	}
}

func TestReadTrace(t *testing.T) {
	tr, err := ReadTrace(strings.NewReader(`
{"t": "2026-03-01T12:00:01Z", "source": "bot", "attrs": {"ip": "203.0.113.7", "n": 5}}
{"t": "2026-03-01T12:00:00.5Z", "ip": "198.51.100.1", "n": 2, "hold": "10s"}
`), "x.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Start.Equal(time.Date(2026, 3, 1, 12, 0, 0, 500e6, time.UTC)) || len(tr.Arrivals) != 2 {
		t.Fatalf("%+v", tr)
	}
	a0, a1 := tr.Arrivals[0], tr.Arrivals[1]
	if a0.At != 0 || a0.Source != DefaultSource || a0.N != 2 || a0.Hold != 10*time.Second || a0.Attrs["ip"] != "198.51.100.1" || len(a0.Attrs) != 1 {
		t.Fatalf("first %+v", a0)
	}
	if a1.At != 500*time.Millisecond || a1.Source != "bot" || a1.N != 1 || a1.Attrs["n"] != "5" {
		t.Fatalf("second %+v", a1)
	}
	for name, tc := range map[string]struct{ src, file, err string }{
		"mixed times": {`{"t":"1s"}` + "\n" + `{"t":"2026-03-01T12:00:00Z"}`, "x.jsonl", "x.jsonl:2: time"},
		"no t":        {`{"ip":"x"}`, "x.jsonl", `x.jsonl:1: no "t"`},
		"bad time":    {`{"t":"soon"}`, "x.jsonl", "neither an RFC 3339"},
		"negative":    {`{"t":"-1s"}`, "x.jsonl", "negative offset"},
		"not json":    {`{"t":`, "x.jsonl", "not a JSON object"},
		"csv no time": {"ip,user\n1,2\n", "x.csv", "no time column"},
		"csv fields":  {"t,ip\n1s,a,b\n", "x.csv", "x.csv:2: 3 fields"},
		"empty":       {"", "x.jsonl", "no requests"},
		"bad n":       {`{"t":"1s","n":-1}`, "x.jsonl", "n \"-1\""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(tc.src), tc.file)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
		})
	}
	// Sniffed without an extension: CSV, offsets in seconds.
	tr, err = ReadTrace(strings.NewReader("time,ip\n1.5,a\n0.25,b\n"), "-")
	if err != nil || tr.Arrivals[0].At != 250*time.Millisecond || tr.Arrivals[0].Attrs["ip"] != "b" || !tr.Start.IsZero() {
		t.Fatalf("%+v %v", tr, err)
	}
}

// Holds keep leases: the in-flight peak counts requests that have not finished.
func TestSimulateHold(t *testing.T) {
	cfg := parse(t, map[string]string{"p.hcl": `
policy "p" {
  rule "slots" {
    algorithm = "concurrency"
    key       = "all"
    max       = 2
    ttl       = "1m"
  }
}
scenario "s" {
  policy   = "p"
  duration = "10s"
  traffic "t" {
    request = { user = "u" }
    rate    = "1/s"
    hold    = "2500ms"
  }
  expect {
    capped = allowed("t") == 7 && denied_by("t", "slots") == 3
  }
}`})
	r, err := Simulate(cfg, cfg.Scenarios[0])
	if err != nil {
		t.Fatal(err)
	}
	// 0s and 1s pass; 2s is denied (2 in flight); 3s passes (0s finished at 2.5s), and so on:
	// 0, 1, 3, 4, 6, 7 and 9 pass.
	if len(r.Failed()) > 0 || r.Rules[0].Worst.Allowed != 2 || r.Rules[0].Worst.Kind != PeakInFlight {
		t.Fatalf("%+v %+v", r.Expect, r.Rules[0].Worst)
	}
}

func TestMaxAllowedIn(t *testing.T) {
	r := &Report{allowedAt: map[string][]int64{"t": {0, 10, 10, 20, 1000}}}
	for span, want := range map[time.Duration]int64{0: 0, time.Microsecond: 2, 11 * time.Microsecond: 3, 20 * time.Microsecond: 3, 21 * time.Microsecond: 4, time.Hour: 5} {
		if got := r.MaxAllowedIn("t", span); got != want {
			t.Errorf("span %v: %d, want %d", span, got, want)
		}
	}
	if r.MaxAllowedIn("none", time.Hour) != 0 {
		t.Error("unknown traffic")
	}
}

// A request the policy cannot evaluate stops the simulation with an error that says when.
func TestSimulateBadRequest(t *testing.T) {
	cfg := parse(t, map[string]string{"p.hcl": `
policy "p" {
  rule "r" {
    algorithm = "token_bucket"
    key       = "k"
    capacity  = 10
    rate      = "1/s"
    cost      = tonumber(request.size)
  }
}`})
	tr := &Trace{Arrivals: []Arrival{{At: time.Second, Source: "t", N: 1, Attrs: map[string]string{"size": "x"}}}}
	_, err := Simulate(cfg, nil, WithTrace(tr))
	if err == nil || !strings.Contains(err.Error(), "at 1s") {
		t.Fatalf("err %v", err)
	}
}

// A traffic of partial admissions: each request asks for up to units and is granted what
// fits; granted() counts the units, the report says how many of those asked, and a
// traffic of whole requests of the same size gets fewer through.
func TestSimulateAtMost(t *testing.T) {
	cfg := parse(t, map[string]string{"mail.hcl": `
policy "mail" {
  rule "per_tenant" {
    algorithm = "token_bucket"
    key       = request.tenant
    when      = request.tenant != ""
    capacity  = 10
    rate      = "10/m"
  }
}

scenario "batches" {
  policy   = "mail"
  duration = "10m"

  traffic "partial" {
    request = { tenant = "a" }
    rate    = "1/10s"
    units   = 8
    at_most = true
  }
  traffic "whole" {
    request = { tenant = "b" }
    rate    = "1/10s"
    units   = 8
  }

  expect {
    partial_uses_the_rate = granted("partial") >= 100 && granted("partial") <= 110
    whole_loses_the_rest  = granted("whole") == 8 * allowed("whole") && granted("whole") < granted("partial")
  }
}
`})
	r, err := Simulate(cfg, cfg.Scenarios[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Expect) != 2 {
		t.Fatalf("%d expectations checked, want 2", len(r.Expect))
	}
	for _, x := range r.Expect {
		if !x.Pass {
			t.Errorf("expectation %q does not hold (%s): partial %+v, whole %+v", x.Name, x.Error, *r.Traffic[0], *r.Traffic[1])
		}
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "partial granted ") || !strings.Contains(text.String(), "of the 480 units asked (up to 8 a request)") {
		t.Errorf("the report does not say what was granted:\n%s", text.String())
	}
	if strings.Contains(text.String(), "whole granted") {
		t.Errorf("the report gives a grant for whole requests:\n%s", text.String())
	}
}
