// Package metrics exports Prometheus metrics for the rlctl engine.
//
// The engine does not depend on Prometheus: it reports through engine.Hooks, and this
// package turns the hooks into metric families. A program that does not import metrics
// does not link client_golang.
//
//	m := metrics.New()
//	prometheus.MustRegister(m)
//	e := engine.New(backend, plan, engine.WithHooks(m.Hooks()))
//	m.WatchRedis(backend) // when backend is an *engine.Redis
//
// The families, all in namespace rlctl:
//
//	rlctl_decisions_total{policy,rule,outcome}               counter
//	    One per rule result of each decision. outcome: allowed; denied (an enforcing rule
//	    denied); shadow_denied (a shadow rule would have denied). A rule's series are
//	    allowed and the one deny outcome its shadow setting allows. A deny-cache answer
//	    carries only the rule that denied; a denial on a Redis Cluster, only the rules of
//	    the slot groups that ran.
//	rlctl_requests_total{outcome,source}                      counter
//	    One per decision. outcome: allowed, denied. source (engine.Source): backend,
//	    local, fail_open, fail_deny, cache, no_rules; a source this package does not know
//	    yet counts as unknown.
//	rlctl_deny_cache_hits_total                               counter
//	    Decisions the deny cache answered (source cache).
//	rlctl_degraded_total{policy,mode,cause}                   counter
//	    Policies decided by on_error because the backend failed. mode: allow, deny, local.
//	    cause: the failure's engine.Class, backend or script (caller errors reach the
//	    caller instead; a decision while the breaker is open is a backend failure).
//	rlctl_backend_call_duration_seconds{op,result}            histogram
//	    Every backend call (engine.CallStats). op: check, refund. result: ok, error.
//	    Buckets from 100µs to 1s.
//	rlctl_breaker_state{node}                                 gauge
//	    0 closed, 1 half-open, 2 open (ordered by severity, unlike engine.BreakerState's
//	    values). node: "engine" for the engine's own breaker (the hook's node ""), or a
//	    Redis Cluster primary's address. node="engine" is 0 from the start.
//	rlctl_breaker_transitions_total{node,to}                  counter
//	    Breaker state changes. to: closed, half-open, open.
//	rlctl_evicted_keys_total                                  counter
//	    Keys an in-process backend freed to stay under its memory cap.
//	rlctl_script_loads_total                                  counter
//	    engine.Redis.ScriptLoads of the watched backends (WatchRedis), summed over the
//	    backends it replaced.
//	rlctl_batched_calls_total, rlctl_batches_total            counters
//	    engine.Redis.Batches of the watched backends, summed as script loads are: the
//	    calls that reached Redis in batches of two or more, and those batches.
//	rlctl_config_reloads_total{result}                        counter
//	    Attempted policy reloads (ConfigReload). result: ok, failed.
//	rlctl_config_last_reload_success_timestamp_seconds        gauge
//	    Unix time of the last successful reload.
//	rlctl_plan_policies, rlctl_plan_rules                     gauges
//	    The running plan's size (Plan).
//
// Series of a policy or rule that a reload removed keep their last values until the
// process restarts, as counters should. The hooks cannot tell an engine.Engine.Peek from
// an Allow: a peek counts as a decision. The breaker gauge holds the last transition
// reported: an engine replaced while its breaker was open leaves it at 2 until the new
// engine's breaker changes state.
//
// The deny ratio by policy over five minutes: the share of each policy's rule verdicts
// that denied (for a policy of one enforcing rule, the share of its requests denied;
// outcome="shadow_denied" in the numerator gives what its shadow rules would deny):
//
//	sum by (policy) (rate(rlctl_decisions_total{outcome="denied"}[5m]))
//	  / sum by (policy) (rate(rlctl_decisions_total[5m]))
package metrics
