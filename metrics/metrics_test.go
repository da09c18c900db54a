package metrics

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
)

func compile(t testing.TB, src string) *engine.Plan {
	t.Helper()
	cfg, diags := dsl.Parse(map[string][]byte{"p.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatalf("policy does not load: %v", diags)
	}
	p, err := engine.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// frozen is a virtual clock: it moves only when told to.
type frozen struct{ us atomic.Int64 }

func newFrozen() *frozen {
	f := &frozen{}
	f.us.Store(1_900_000_000_000_000)
	return f
}

func (f *frozen) now() time.Time          { return time.UnixMicro(f.us.Load()) }
func (f *frozen) Now() time.Time          { return f.now() } // luahost.Clock
func (f *frozen) advance(d time.Duration) { f.us.Add(d.Microseconds()) }

// registered returns m registered on a pedantic registry, which checks at each gather
// that what m collects is what it describes.
func registered(t *testing.T, m *Metrics) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	return reg
}

// series gathers reg and renders the non-zero series of the families named, one line
// each, sorted: `name{label="value",...} value`. A histogram is rendered as its _count,
// its _sum and the buckets where the cumulative count rises.
func series(t *testing.T, reg prometheus.Gatherer, names ...string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var lines []string
	for _, mf := range mfs {
		if !slices.Contains(names, mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			line := func(suffix string, extra []string, v float64) {
				ls := append(slices.Clone(labels), extra...)
				s := mf.GetName() + suffix
				if len(ls) > 0 {
					s += "{" + strings.Join(ls, ",") + "}"
				}
				lines = append(lines, sortLabels(s+" "+fmt.Sprint(v)))
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				if v := m.GetCounter().GetValue(); v != 0 {
					line("", nil, v)
				}
			case dto.MetricType_GAUGE:
				if v := m.GetGauge().GetValue(); v != 0 {
					line("", nil, v)
				}
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				if h.GetSampleCount() == 0 {
					continue
				}
				line("_count", nil, float64(h.GetSampleCount()))
				line("_sum", nil, math.Round(h.GetSampleSum()*1e6)/1e6)
				var prev uint64
				for _, b := range h.GetBucket() {
					if b.GetCumulativeCount() > prev {
						line("_bucket", []string{fmt.Sprintf("le=%q", fmt.Sprint(b.GetUpperBound()))}, float64(b.GetCumulativeCount()))
						prev = b.GetCumulativeCount()
					}
				}
			}
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// value returns the value of the one series of the counter or gauge family name.
func value(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no single series named %s", name)
	return 0
}

// sortLabels sorts the labels of a series line as Gather does, by name (for label values
// without commas).
func sortLabels(line string) string {
	name, rest, ok := strings.Cut(line, "{")
	if !ok {
		return line
	}
	labels, value, _ := strings.Cut(rest, "}")
	ls := strings.Split(labels, ",")
	slices.Sort(ls)
	return name + "{" + strings.Join(ls, ",") + "}" + value
}

// wantSeries checks that the non-zero series of the families named are exactly want's
// lines (in any order, labels in any order).
func wantSeries(t *testing.T, reg prometheus.Gatherer, want string, names ...string) {
	t.Helper()
	want = strings.TrimSpace(want)
	lines := strings.Split(want, "\n")
	for i := range lines {
		lines[i] = sortLabels(strings.TrimSpace(lines[i]))
	}
	slices.Sort(lines)
	if got := series(t, reg, names...); got != strings.Join(lines, "\n") {
		t.Errorf("series of %v:\n%s\nwant:\n%s", names, got, strings.Join(lines, "\n"))
	}
}

func allow(t *testing.T, e *engine.Engine, user string) *engine.Decision {
	t.Helper()
	d, err := e.Allow(context.Background(), engine.Attrs{"user": user})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// stacked is a policy of an enforcing rule of 2 per hour and a shadow rule of 1 per hour,
// for users only.
const stacked = `
policy "api" {
  match = request.user != ""
  clock = "client"
  rule "burst" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 2
    window    = "1h"
  }
  rule "trial" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 1
    window    = "1h"
    shadow    = true
  }
}`

// TestDecisions: on a real engine and the embedded backend, each decision counts one
// request by outcome and source, and each of its rule results one verdict; a shadow rule
// over its limit counts shadow_denied, not denied; the deny cache's answers count as
// cache hits with the one rule they carry; a request no policy matches counts no_rules.
func TestDecisions(t *testing.T) {
	clock := newFrozen()
	m := New()
	reg := registered(t, m)
	e := engine.New(engine.NewLocal(luahost.New(luahost.WithClock(clock))), compile(t, stacked),
		engine.WithHooks(m.Hooks()), engine.WithClock(clock.now), engine.WithDenyCache(16))
	want := []struct {
		allowed bool
		source  engine.Source
	}{
		{true, engine.FromBackend},  // burst 1/2, trial 1/1
		{true, engine.FromBackend},  // burst 2/2, trial would deny
		{false, engine.FromBackend}, // burst denies, and the cache keeps it
		{false, engine.FromCache},   // the cache answers: burst denies
	}
	for i, w := range want {
		if d := allow(t, e, "alice"); d.Allowed != w.allowed || d.Source != w.source {
			t.Fatalf("request %d: allowed %v source %d, want %v %d", i+1, d.Allowed, d.Source, w.allowed, w.source)
		}
	}
	if d := allow(t, e, ""); !d.Allowed || d.Source != engine.FromNoRules {
		t.Fatalf("a request no policy matches: %+v", d)
	}
	wantSeries(t, reg, `
		rlctl_decisions_total{policy="api",rule="burst",outcome="allowed"} 2
		rlctl_decisions_total{policy="api",rule="burst",outcome="denied"} 2
		rlctl_decisions_total{policy="api",rule="trial",outcome="allowed"} 1
		rlctl_decisions_total{policy="api",rule="trial",outcome="shadow_denied"} 2
		rlctl_requests_total{outcome="allowed",source="backend"} 2
		rlctl_requests_total{outcome="allowed",source="no_rules"} 1
		rlctl_requests_total{outcome="denied",source="backend"} 1
		rlctl_requests_total{outcome="denied",source="cache"} 1
		rlctl_deny_cache_hits_total 1
	`, "rlctl_decisions_total", "rlctl_requests_total", "rlctl_deny_cache_hits_total")

	// A rule has series for allowed and its one deny outcome only (the four above: none
	// for burst's shadow_denied or trial's denied); every outcome and source of
	// rlctl_requests_total is there from the start.
	if n := testutil.CollectAndCount(m.decisions); n != 4 {
		t.Errorf("rlctl_decisions_total has %d series, want 4", n)
	}
	if n := testutil.CollectAndCount(m.requests); n != 2*len(sourceNames) {
		t.Errorf("rlctl_requests_total has %d series, want %d", n, 2*len(sourceNames))
	}
}

// TestConcurrentDecisions: decisions from many goroutines at once, each on rules no one
// has seen yet, are all counted.
func TestConcurrentDecisions(t *testing.T) {
	m := New()
	reg := registered(t, m)
	plans := []*engine.Plan{compile(t, stacked), compile(t, strings.ReplaceAll(stacked, `"api"`, `"web"`))}
	var wg sync.WaitGroup
	for g := range 8 {
		e := engine.New(engine.NewLocal(luahost.New()), plans[g%2], engine.WithHooks(m.Hooks()))
		wg.Go(func() {
			for i := range 50 {
				if _, err := e.Allow(context.Background(), engine.Attrs{"user": fmt.Sprint(g, "-", i)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	wantSeries(t, reg, `
		rlctl_decisions_total{policy="api",rule="burst",outcome="allowed"} 200
		rlctl_decisions_total{policy="api",rule="trial",outcome="allowed"} 200
		rlctl_decisions_total{policy="web",rule="burst",outcome="allowed"} 200
		rlctl_decisions_total{policy="web",rule="trial",outcome="allowed"} 200
		rlctl_requests_total{outcome="allowed",source="backend"} 400
	`, "rlctl_decisions_total", "rlctl_requests_total")
}

// flaky is a network backend (the engine's deadline and breaker apply to it) that runs
// calls on an in-process host unless failing, and takes took on the virtual clock for
// every call.
type flaky struct {
	inner *engine.Local
	clock *frozen
	took  time.Duration
	mu    sync.Mutex
	err   error
}

func newFlaky(clock *frozen) *flaky {
	return &flaky{inner: engine.NewLocal(luahost.New(luahost.WithClock(clock))), clock: clock, took: 3 * time.Millisecond}
}

func (f *flaky) fail(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *flaky) Eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error) {
	f.clock.advance(f.took)
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return f.inner.Eval(ctx, s, keys, argv)
}

func (f *flaky) Del(ctx context.Context, keys ...string) error { return f.inner.Del(ctx, keys...) }

var refused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

const denyOnError = `
policy "p" {
  on_error = "deny"
  rule "r" {
    algorithm = "gcra"
    key       = request.user
    rate      = "1/h"
    burst     = 100
  }
}`

// TestOutage: a backend that refuses connections degrades each decision (counted by
// policy, mode and cause) and opens the breaker after two failures; after the cooldown
// on the virtual clock, a probe that succeeds closes it. The breaker gauge follows each
// transition (read by a chained hook as it happens), the transitions are counted, and
// every call the engine made is in the duration histogram by result.
func TestOutage(t *testing.T) {
	clock := newFrozen()
	b := newFlaky(clock)
	m := New()
	reg := registered(t, m)
	var seen []float64
	hooks := m.Chain(engine.Hooks{Breaker: func(node string, _, to engine.BreakerState) {
		if node != "" {
			t.Errorf("Breaker hook node %q, want the engine's", node)
		}
		seen = append(seen, testutil.ToFloat64(m.breakerState.WithLabelValues("engine")))
	}})
	e := engine.New(b, compile(t, denyOnError), engine.WithHooks(hooks), engine.WithClock(clock.now),
		engine.WithBreaker(2, time.Second), engine.WithTimeout(0))

	b.fail(refused)
	for i, want := range []engine.Source{engine.FromFailDeny, engine.FromFailDeny, engine.FromFailDeny} {
		if d := allow(t, e, "u"); d.Allowed || d.Source != want {
			t.Fatalf("request %d during the outage: %+v", i+1, d)
		}
	}
	if !slices.Equal(seen, []float64{2}) {
		t.Fatalf("breaker gauge at each transition %v, want [2] (open)", seen)
	}
	b.fail(nil)
	clock.advance(time.Second)
	if d := allow(t, e, "u"); !d.Allowed || d.Source != engine.FromBackend {
		t.Fatalf("the probe after the cooldown: %+v", d)
	}
	if !slices.Equal(seen, []float64{2, 1, 0}) {
		t.Fatalf("breaker gauge at each transition %v, want [2 1 0] (open, half-open, closed)", seen)
	}
	// The third request found the breaker open: degraded, with no backend call.
	wantSeries(t, reg, `
		rlctl_degraded_total{policy="p",mode="deny",cause="backend"} 3
		rlctl_breaker_transitions_total{node="engine",to="open"} 1
		rlctl_breaker_transitions_total{node="engine",to="half-open"} 1
		rlctl_breaker_transitions_total{node="engine",to="closed"} 1
		rlctl_requests_total{outcome="denied",source="fail_deny"} 3
		rlctl_requests_total{outcome="allowed",source="backend"} 1
		rlctl_decisions_total{policy="p",rule="r",outcome="denied"} 3
		rlctl_decisions_total{policy="p",rule="r",outcome="allowed"} 1
		rlctl_backend_call_duration_seconds_count{op="check",result="error"} 2
		rlctl_backend_call_duration_seconds_sum{op="check",result="error"} 0.006
		rlctl_backend_call_duration_seconds_bucket{op="check",result="error",le="0.005"} 2
		rlctl_backend_call_duration_seconds_count{op="check",result="ok"} 1
		rlctl_backend_call_duration_seconds_sum{op="check",result="ok"} 0.003
		rlctl_backend_call_duration_seconds_bucket{op="check",result="ok",le="0.005"} 1
	`, "rlctl_degraded_total", "rlctl_breaker_state", "rlctl_breaker_transitions_total",
		"rlctl_requests_total", "rlctl_decisions_total", "rlctl_backend_call_duration_seconds")
}

// TestRelease: releasing a concurrency lease is a backend call of op refund.
func TestRelease(t *testing.T) {
	clock := newFrozen()
	b := newFlaky(clock)
	m := New()
	reg := registered(t, m)
	e := engine.New(b, compile(t, `
policy "uploads" {
  rule "in_flight" {
    algorithm = "concurrency"
    key       = request.user
    max       = 2
    ttl       = "1m"
  }
}`), engine.WithHooks(m.Hooks()), engine.WithClock(clock.now), engine.WithTimeout(0))
	d := allow(t, e, "u")
	if err := e.Release(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	wantSeries(t, reg, `
		rlctl_backend_call_duration_seconds_count{op="check",result="ok"} 1
		rlctl_backend_call_duration_seconds_sum{op="check",result="ok"} 0.003
		rlctl_backend_call_duration_seconds_bucket{op="check",result="ok",le="0.005"} 1
		rlctl_backend_call_duration_seconds_count{op="refund",result="ok"} 1
		rlctl_backend_call_duration_seconds_sum{op="refund",result="ok"} 0.003
		rlctl_backend_call_duration_seconds_bucket{op="refund",result="ok",le="0.005"} 1
	`, "rlctl_backend_call_duration_seconds")
}

// TestBreakerNodes: a Redis Cluster primary's breaker is labelled with its address, the
// engine's own with "engine", which reads 0 (closed) before any transition.
func TestBreakerNodes(t *testing.T) {
	m := New()
	reg := registered(t, m)
	if v := testutil.ToFloat64(m.breakerState.WithLabelValues("engine")); v != 0 {
		t.Errorf("a fresh engine breaker reads %v, want 0", v)
	}
	h := m.Hooks()
	h.Breaker("10.0.0.1:7000", engine.Closed, engine.Open)
	h.Breaker("10.0.0.2:7000", engine.Closed, engine.Open)
	h.Breaker("10.0.0.2:7000", engine.Open, engine.HalfOpen)
	h.Breaker("", engine.Closed, engine.Open)
	wantSeries(t, reg, `
		rlctl_breaker_state{node="10.0.0.1:7000"} 2
		rlctl_breaker_state{node="10.0.0.2:7000"} 1
		rlctl_breaker_state{node="engine"} 2
		rlctl_breaker_transitions_total{node="10.0.0.1:7000",to="open"} 1
		rlctl_breaker_transitions_total{node="10.0.0.2:7000",to="open"} 1
		rlctl_breaker_transitions_total{node="10.0.0.2:7000",to="half-open"} 1
		rlctl_breaker_transitions_total{node="engine",to="open"} 1
	`, "rlctl_breaker_state", "rlctl_breaker_transitions_total")
}

// TestDegradedCause: the cause label is the failure's class, backend or script, for
// each on_error mode.
func TestDegradedCause(t *testing.T) {
	failures := []struct {
		name, cause string
		err         error
	}{
		{"refused", "backend", refused},
		{"timeout", "backend", context.DeadlineExceeded},
		{"OOM reply", "backend", &luahost.ErrorReply{Msg: "OOM command not allowed when used memory > 'maxmemory'."}},
		{"script runtime error", "script", &luahost.ErrorReply{Msg: "ERR user_script:3: attempt to index a nil value"}},
		{"WRONGTYPE", "script", &luahost.ErrorReply{Msg: "WRONGTYPE Operation against a key holding the wrong kind of value"}},
	}
	for _, mode := range []string{"allow", "deny", "local"} {
		for _, f := range failures {
			t.Run(mode+"/"+f.name, func(t *testing.T) {
				clock := newFrozen()
				b := newFlaky(clock)
				b.fail(f.err)
				m := New()
				reg := registered(t, m)
				src := strings.Replace(denyOnError, `"deny"`, fmt.Sprintf("%q", mode), 1)
				e := engine.New(b, compile(t, src), engine.WithHooks(m.Hooks()), engine.WithClock(clock.now),
					engine.WithTimeout(0))
				allow(t, e, "u")
				wantSeries(t, reg, fmt.Sprintf(`rlctl_degraded_total{policy="p",mode=%q,cause=%q} 1`, mode, f.cause),
					"rlctl_degraded_total")
			})
		}
	}
}

// TestEvicted: the keys an in-process backend evicts under its memory cap are counted,
// as many as the host says it freed.
func TestEvicted(t *testing.T) {
	clock := newFrozen()
	host := luahost.New(luahost.WithClock(clock), luahost.WithMaxMemory(8<<10, luahost.AllKeysLRU))
	m := New()
	reg := registered(t, m)
	e := engine.New(engine.NewLocal(host), compile(t, denyOnError), engine.WithHooks(m.Hooks()),
		engine.WithClock(clock.now))
	for i := range 200 {
		allow(t, e, fmt.Sprint("client-", i))
	}
	n := host.Evicted()
	if n == 0 {
		t.Fatal("the host evicted nothing; the test needs a smaller cap")
	}
	wantSeries(t, reg, fmt.Sprint("rlctl_evicted_keys_total ", n), "rlctl_evicted_keys_total")
}

// TestConfig: reloads count by result, only a good one sets the timestamp (on m's clock),
// and Plan sets the plan's size.
func TestConfig(t *testing.T) {
	clock := newFrozen()
	m := New()
	m.now = clock.now
	reg := registered(t, m)
	m.ConfigReload(true)
	clock.advance(90 * time.Second)
	m.ConfigReload(false)
	m.Plan(3, 7)
	names := []string{"rlctl_config_reloads_total", "rlctl_config_last_reload_success_timestamp_seconds",
		"rlctl_plan_policies", "rlctl_plan_rules"}
	wantSeries(t, reg, `
		rlctl_config_reloads_total{result="ok"} 1
		rlctl_config_reloads_total{result="failed"} 1
		rlctl_config_last_reload_success_timestamp_seconds 1.9e+09
		rlctl_plan_policies 3
		rlctl_plan_rules 7
	`, names...)
	clock.advance(500 * time.Millisecond)
	m.ConfigReload(true)
	m.Plan(0, 0)
	wantSeries(t, reg, `
		rlctl_config_reloads_total{result="ok"} 2
		rlctl_config_reloads_total{result="failed"} 1
		rlctl_config_last_reload_success_timestamp_seconds 1.9000000905e+09
	`, names...)
}

// TestChain: chained hooks call m's and then the program's; a nil field of the program's
// is m's alone.
func TestChain(t *testing.T) {
	m := New()
	reg := registered(t, m)
	var calls []string
	h := m.Chain(engine.Hooks{
		Decided: func(d *engine.Decision) {
			calls = append(calls, fmt.Sprint("decided ", testutil.ToFloat64(m.byOutcome[1][engine.FromNoRules])))
		},
		Evicted: func(keys uint64) { calls = append(calls, fmt.Sprint("evicted ", keys)) },
	})
	if h.Called == nil || h.Degraded == nil || h.Breaker == nil {
		t.Fatal("a hook the program left nil is not m's")
	}
	e := engine.New(engine.NewLocal(luahost.New()), compile(t, stacked), engine.WithHooks(h))
	allow(t, e, "")
	h.Evicted(5)
	if want := []string{"decided 1", "evicted 5"}; !slices.Equal(calls, want) {
		t.Errorf("program's hooks saw %q, want %q", calls, want)
	}
	wantSeries(t, reg, `
		rlctl_requests_total{outcome="allowed",source="no_rules"} 1
		rlctl_evicted_keys_total 5
	`, "rlctl_requests_total", "rlctl_evicted_keys_total")
}

// TestLint: the families pass Prometheus's naming lint (units, _total on counters), and
// a fresh Metrics exposes the series that exist before any event.
func TestLint(t *testing.T) {
	reg := registered(t, New())
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	// 14 requests (7 sources × 2 outcomes), 4 call histograms, the engine's breaker, 2 reload results, the
	// single-series families (cache hits, evictions, script loads, batched calls, batches,
	// last reload, plan ×2).
	if want := 14 + 4 + 1 + 2 + 8; n != want {
		t.Errorf("a fresh Metrics exposes %d series, want %d", n, want)
	}
}
