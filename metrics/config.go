package metrics

import "github.com/rlctl/rlctl/engine"

// WatchRedis makes rlctl_script_loads_total report r's ScriptLoads, and
// rlctl_batched_calls_total and rlctl_batches_total its Batches, read at each scrape.
// Called again with another backend (a reload that made a new one), it keeps the count of
// the backend it replaces and adds r's, so the counter never goes backwards; the
// replaced backend's later loads are not counted. Watching the backend already watched
// changes nothing; nil stops watching (the count so far is kept). Each backend should be
// watched once: one watched again after being replaced counts its loads twice.
func (m *Metrics) WatchRedis(r *engine.Redis) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r == m.redis {
		return
	}
	if m.redis != nil {
		m.replaced += m.redis.ScriptLoads()
		calls, batches := m.redis.Batches()
		m.replacedCalls += calls
		m.replacedBatches += batches
	}
	m.redis = r
}

// batchCounts is rlctl_batched_calls_total's and rlctl_batches_total's values.
func (m *Metrics) batchCounts() (calls, batches uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	calls, batches = m.replacedCalls, m.replacedBatches
	if m.redis != nil {
		c, b := m.redis.Batches()
		calls, batches = calls+c, batches+b
	}
	return calls, batches
}

// loads is rlctl_script_loads_total's value.
func (m *Metrics) loads() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.replaced
	if m.redis != nil {
		n += m.redis.ScriptLoads()
	}
	return n
}

// ConfigReload records one attempted reload of the policy files: ok when the new plan was
// put in place (the reload's time becomes
// rlctl_config_last_reload_success_timestamp_seconds), false when it was refused and the
// running plan kept.
func (m *Metrics) ConfigReload(ok bool) {
	if !ok {
		m.reloadFail.Inc()
		return
	}
	m.reloadOK.Inc()
	m.lastReload.Set(float64(m.now().UnixNano()) / 1e9)
}

// Plan sets the size of the running plan: its policies and its rules over all policies.
func (m *Metrics) Plan(policies, rules int) {
	m.planPolicies.Set(float64(policies))
	m.planRules.Set(float64(rules))
}
