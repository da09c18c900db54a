package metrics

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlctl/rlctl/engine"
)

const namespace = "rlctl"

// Metrics holds the rlctl metric families (listed in the package comment) and updates
// them from an engine's hooks (Hooks), a Redis backend's counters (WatchRedis) and the
// program's reloads (ConfigReload, Plan). It is a prometheus.Collector: register it once.
// It is safe for concurrent use, and one Metrics may observe several engines (each
// engine made with its Hooks); their counts add up.
type Metrics struct {
	decisions          *prometheus.CounterVec
	requests           *prometheus.CounterVec
	cacheHits          prometheus.Counter
	degraded           *prometheus.CounterVec
	calls              *prometheus.HistogramVec
	breakerState       *prometheus.GaugeVec
	breakerTransitions *prometheus.CounterVec
	evicted            prometheus.Counter
	scriptLoads        *prometheus.Desc
	batchedCalls       *prometheus.Desc
	batches            *prometheus.Desc
	reloads            *prometheus.CounterVec
	lastReload         prometheus.Gauge
	planPolicies       prometheus.Gauge
	planRules          prometheus.Gauge

	// The hot path's children, resolved once (see hooks.go).
	rules      children[ruleKey, ruleCounters]
	degradedBy children[degradedKey, prometheus.Counter]
	byOutcome  [2][]prometheus.Counter // [allowed][engine.Source]
	reloadOK   prometheus.Counter
	reloadFail prometheus.Counter
	byCall     [2][2]prometheus.Observer // [callOps][ok, error]

	now func() time.Time // the clock of the last reload's timestamp

	mu       sync.Mutex
	redis    *engine.Redis // the watched backend, or nil
	replaced uint64        // the script loads of the backends watched before it
	// replacedCalls and replacedBatches: the Batches of the backends watched before it.
	replacedCalls, replacedBatches uint64
}

// callBuckets are rlctl_backend_call_duration_seconds' upper bounds: 100µs (a call to a
// Redis on the same host) to 1s (far past the default 50ms decision deadline).
var callBuckets = []float64{
	0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005,
	0.01, 0.025, 0.05,
	0.1, 0.25, 0.5,
	1,
}

// New returns a Metrics with every count at zero.
func New() *Metrics {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "decisions_total",
			Help: "Rule verdicts: one per rule result of each decision. outcome is denied for an " +
				"enforcing rule that denied, shadow_denied for a shadow rule that would have denied, " +
				"allowed otherwise.",
		}, []string{"policy", "rule", "outcome"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "requests_total",
			Help: "Decisions, by outcome (allowed, denied) and by how they were reached: backend, " +
				"local (the on_error = \"local\" fallback), fail_open, fail_deny (on_error after a " +
				"backend failure), cache (the deny cache), no_rules (no rule applied).",
		}, []string{"outcome", "source"}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "deny_cache_hits_total",
			Help: "Decisions the deny cache answered (denied without a backend call).",
		}),
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "degraded_total",
			Help: "Policy decisions made by on_error because the backend failed, by the policy's " +
				"mode (allow, deny, local) and the failure's class (backend, or script for an " +
				"error of the engine script itself). A decision while the breaker is open is a " +
				"backend failure.",
		}, []string{"policy", "mode", "cause"}),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "backend_call_duration_seconds",
			Help: "Duration of the engine's backend calls, by op (check, refund) and result " +
				"(ok, error), on the engine's clock. It bounds the script's run time on the server.",
			Buckets: callBuckets,
		}, []string{"op", "result"}),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "breaker_state",
			Help: "Circuit breaker state: 0 closed, 1 half-open, 2 open. node is \"engine\" for " +
				"the engine's breaker, or a Redis Cluster primary's address.",
		}, []string{"node"}),
		breakerTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "breaker_transitions_total",
			Help: "Circuit breaker state changes, by node (as in rlctl_breaker_state) and the " +
				"state entered (closed, half-open, open).",
		}, []string{"node", "to"}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "evicted_keys_total",
			Help: "Keys an in-process backend freed to stay under its memory cap: each is a " +
				"client whose limiter state was forgotten.",
		}),
		scriptLoads: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "script_loads_total"),
			"Times a Redis server did not hold the engine script and was sent it (a new or "+
				"restarted server, a flush, a failover). A steady rise is a server losing its scripts.",
			nil, nil),
		batchedCalls: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "batched_calls_total"),
			"Script calls of decisions that reached Redis in batches of two or more (engine.Batched); "+
				"divided by rlctl_batches_total, the mean batch.",
			nil, nil),
		batches: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "batches_total"),
			"Script calls that carried a batch of two or more decisions' calls.",
			nil, nil),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "config_reloads_total",
			Help: "Attempted reloads of the policy files, by result: ok, or failed (refused; the " +
				"running plan was kept).",
		}, []string{"result"}),
		lastReload: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful reload of the policy files; 0 before the first.",
		}),
		planPolicies: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "plan_policies",
			Help: "Policies in the running plan.",
		}),
		planRules: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "plan_rules",
			Help: "Rules in the running plan, over all its policies.",
		}),
		now: time.Now,
	}
	m.rules.make = m.newRuleCounters
	m.degradedBy.make = func(k degradedKey) prometheus.Counter {
		return m.degraded.WithLabelValues(k.policy, k.mode, k.cause)
	}
	for allowed, outcome := range [2]string{"denied", "allowed"} {
		for s := range sourceNames {
			m.byOutcome[allowed] = append(m.byOutcome[allowed], m.requests.WithLabelValues(outcome, sourceNames[s]))
		}
	}
	m.reloadOK = m.reloads.WithLabelValues("ok")
	m.reloadFail = m.reloads.WithLabelValues("failed")
	for op, name := range callOps {
		m.byCall[op] = [2]prometheus.Observer{m.calls.WithLabelValues(name, "ok"), m.calls.WithLabelValues(name, "error")}
	}
	m.breakerState.WithLabelValues(engineNode).Set(0)
	return m
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	ch <- m.scriptLoads
	ch <- m.batchedCalls
	ch <- m.batches
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
	ch <- prometheus.MustNewConstMetric(m.scriptLoads, prometheus.CounterValue, float64(m.loads()))
	calls, batches := m.batchCounts()
	ch <- prometheus.MustNewConstMetric(m.batchedCalls, prometheus.CounterValue, float64(calls))
	ch <- prometheus.MustNewConstMetric(m.batches, prometheus.CounterValue, float64(batches))
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.decisions, m.requests, m.cacheHits, m.degraded, m.calls, m.breakerState,
		m.breakerTransitions, m.evicted, m.reloads, m.lastReload, m.planPolicies, m.planRules,
	}
}

// children caches a vector's children by a comparable key, so that the hot path finds
// one with a map lookup instead of WithLabelValues' hashing and validation of label values.
// The map is copied on write, so a lookup takes no lock: its keys are the rules and
// policies of the plans seen, few and added once. (With a sync.Map the Decided hook took
// 50% longer.)
type children[K comparable, V any] struct {
	m    atomic.Pointer[map[K]V]
	mu   sync.Mutex
	make func(K) V
}

// get returns k's child. (Its lookup is written out here: through a helper returning
// (V, bool) the benchmark took 55% longer.)
func (c *children[K, V]) get(k K) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	return c.add(k)
}

// add makes k's child, unless another goroutine just did.
func (c *children[K, V]) add(k K) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[K]V)
	if old := c.m.Load(); old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
		maps.Copy(m, *old)
	}
	v := c.make(k)
	m[k] = v
	c.m.Store(&m)
	return v
}
