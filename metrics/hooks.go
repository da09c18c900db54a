package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlctl/rlctl/engine"
)

// engineNode is the node label of the engine's own breaker (the Breaker hook's node "").
const engineNode = "engine"

// sourceNames are rlctl_requests_total's source label values, indexed by engine.Source.
var sourceNames = [...]string{
	engine.FromBackend:  "backend",
	engine.FromLocal:    "local",
	engine.FromFailOpen: "fail_open",
	engine.FromFailDeny: "fail_deny",
	engine.FromCache:    "cache",
	engine.FromNoRules:  "no_rules",
	engine.FromLease:    "lease",
}

// ruleKey names a rule's rlctl_decisions_total children. shadow is part of it because it
// says which deny outcome the rule can have; a reload may flip it.
type ruleKey struct {
	policy, rule string
	shadow       bool
}

// ruleCounters are one rule's children: allowed, and denied or shadow_denied.
type ruleCounters struct{ allowed, denied prometheus.Counter }

func (m *Metrics) newRuleCounters(k ruleKey) ruleCounters {
	outcome := "denied"
	if k.shadow {
		outcome = "shadow_denied"
	}
	return ruleCounters{
		allowed: m.decisions.WithLabelValues(k.policy, k.rule, "allowed"),
		denied:  m.decisions.WithLabelValues(k.policy, k.rule, outcome),
	}
}

type degradedKey struct{ policy, mode, cause string }

// Hooks returns the engine hooks that update m; pass them to engine.WithHooks. Each runs
// on the engine's calling goroutine; the Decided hook, which runs on every decision, takes
// no lock and does not allocate once each rule has been seen.
func (m *Metrics) Hooks() engine.Hooks {
	return engine.Hooks{
		Decided:  m.decided,
		Degraded: m.degradedHook,
		Breaker:  m.breaker,
		Called:   m.called,
		Evicted:  m.evictedHook,
	}
}

// Chain returns hooks that call m's hooks and then h's, for a program with hooks of its
// own; h's nil fields are skipped.
func (m *Metrics) Chain(h engine.Hooks) engine.Hooks {
	out := m.Hooks()
	if f := h.Decided; f != nil {
		out.Decided = func(d *engine.Decision) { m.decided(d); f(d) }
	}
	if f := h.Degraded; f != nil {
		out.Degraded = func(policy, mode string, err error) { m.degradedHook(policy, mode, err); f(policy, mode, err) }
	}
	if f := h.Breaker; f != nil {
		out.Breaker = func(node string, from, to engine.BreakerState) { m.breaker(node, from, to); f(node, from, to) }
	}
	if f := h.Called; f != nil {
		out.Called = func(c engine.CallStats) { m.called(c); f(c) }
	}
	if f := h.Evicted; f != nil {
		out.Evicted = func(keys uint64) { m.evictedHook(keys); f(keys) }
	}
	return out
}

func (m *Metrics) decided(d *engine.Decision) {
	for i := range d.Rules {
		r := &d.Rules[i]
		c := m.rules.get(ruleKey{r.Policy, r.Rule, r.Shadow})
		if r.Allowed {
			c.allowed.Inc()
		} else {
			c.denied.Inc()
		}
	}
	allowed := 0
	if d.Allowed {
		allowed = 1
	}
	if int(d.Source) < len(sourceNames) {
		m.byOutcome[allowed][d.Source].Inc()
	} else {
		m.requests.WithLabelValues([2]string{"denied", "allowed"}[allowed], "unknown").Inc()
	}
	if d.Source == engine.FromCache {
		m.cacheHits.Inc()
	}
}

func (m *Metrics) degradedHook(policy, mode string, err error) {
	m.degradedBy.get(degradedKey{policy, mode, cause(err)}).Inc()
}

// cause is rlctl_degraded_total's cause label: the class of err. The engine hands the
// hook a script error wrapped in engine.ErrScript, whose message Classify's reply table
// no longer recognises, so the wrapper is looked for first.
func cause(err error) string {
	if errors.Is(err, engine.ErrScript) {
		return engine.ClassScript.String()
	}
	return engine.Classify(err).String()
}

// stateValue is rlctl_breaker_state's value for s: ordered by severity, so that max()
// over nodes is the worst and > 0 is "not closed". (engine.BreakerState's own order is
// closed, open, half-open.)
func stateValue(s engine.BreakerState) float64 {
	switch s {
	case engine.HalfOpen:
		return 1
	case engine.Open:
		return 2
	}
	return 0
}

func (m *Metrics) breaker(node string, _, to engine.BreakerState) {
	if node == "" {
		node = engineNode
	}
	m.breakerState.WithLabelValues(node).Set(stateValue(to))
	m.breakerTransitions.WithLabelValues(node, to.String()).Inc()
}

// callOps are the CallStats.Op values whose children New resolves.
var callOps = [2]string{"check", "refund"}

func (m *Metrics) called(c engine.CallStats) {
	failed := 0
	if c.Err != nil {
		failed = 1
	}
	var o prometheus.Observer
	switch c.Op {
	case callOps[0]:
		o = m.byCall[0][failed]
	case callOps[1]:
		o = m.byCall[1][failed]
	default:
		o = m.calls.WithLabelValues(c.Op, [2]string{"ok", "error"}[failed])
	}
	o.Observe(c.Duration.Seconds())
}

func (m *Metrics) evictedHook(keys uint64) { m.evicted.Add(float64(keys)) }
