// Package verify proves rate-limit policies offline. It runs the engine's real Lua script
// — the one production sends to Redis — on luahost under a virtual clock (TIME answers
// it, TTLs expire by it), so minutes of traffic take a second and every run repeats
// exactly.
//
// # Simulate
//
// [Simulate] runs a scenario (a policy file's scenario block) through the engine: each
// client of each traffic block generates arrivals by its pattern (constant, poisson,
// burst, ramp, edge; see dsl.Traffic), merged in time order; Poisson draws come from the
// scenario's seed. The [Report] counts, per traffic source, the requests sent, allowed and
// denied and the rule that denied them; per rule, its keys, its worst key (the most cost
// allowed in one window, or leases in flight, against the limit and the algorithm's
// documented bound), and how often a retry at the advised retry-after would have passed;
// a timeline; and each expectation's verdict (a Report is the dsl.Outcome expectations
// are checked against). [ReadTrace] reads recorded traffic (JSON Lines or CSV) for
// [WithTrace] to replay instead.
//
// # Faults
//
// A scenario's fault blocks (dsl.Fault) make the simulated Redis fail on the virtual
// clock: a stall fails each call at once with an error wrapping context.DeadlineExceeded,
// as a client past its deadline sees it, and the server runs the calls it held when the
// stall ends; refuse and restart fail calls with a refused connection (a restart also
// deletes every key), error with the fault's error reply, and a flush deletes every key.
// Outside faults the calls run without the caller's deadline, so no result depends on how
// fast the simulation runs. The engine runs with the scenario's deadline, breaker and deny
// cache, and each policy's on_error decides while Redis fails. The Report's [FaultReport]s
// count, per fault and traffic source, how requests were decided ([Decisions]), how long
// after the fault requests were still decided without Redis, and what the held calls did
// when they ran late ([LateCalls]): the engine puts its deadline in the call, so the script
// refuses them and a late call charges nothing.
//
// An engine block's instances (dsl.EngineSettings.Instances) runs that many engines, each
// with its own breaker, deny cache and on_error = "local" fallback, on the one simulated
// Redis, requests going to them in turn: what a fleet behind a load balancer does in an
// outage, where each instance's fallback starts from empty counters and keeps its policy's
// local_share of every limit (dsl.Policy.LocalShare). Check states no property of outages:
// it holds rules to their limits with Redis up; expectations such as allowed_during_fault
// and max_allowed_in hold a scenario's outage to the bound local_share declares.
//
// # Check
//
// [Check] proves properties of every rule of a configuration, built-in algorithms and
// plugins alike, on generated adversarial traffic: bursts at one instant and straddling
// window boundaries, retries exactly at and 1µs before the advised retry-after, costs of
// 0, 1, the capacity and above it, idle gaps past every TTL, lease releases, and
// concurrent clients. Per rule:
//
//   - errors: no request makes the script raise an error, such as a plugin's Lua runtime
//     error. A request that does ends its trace; the finding is [Fail] with the error at
//     the plugin's own file and line ([Result].Error, mapped by algorithms.Script.Locate)
//     and a counterexample shrunk to the requests that lead to it, the last one marked.
//     The other properties are checked on the requests before each error.
//   - limit: the algorithm's guarantee (algorithms.Guarantee; a plugin's guarantee
//     block), never inferred from parameter names. Shapes: window (in every interval
//     shorter than the window, at most amount: sliding_log), rate (in every interval of
//     length T, at most burst + T·rate: token_bucket, leaky_bucket, gcra), in_flight (at
//     most amount held at once: concurrency), none (skipped, saying so). Exact unless the
//     guarantee declares a bound: between the exact statement and bound × it is [Warn],
//     by design (fixed_window's and sliding_window's 2×, exactly 2× included), beyond it
//     [Fail]. Messages quote the limit, and the bound apart from it.
//   - retry-after: sound (the same request is denied at every earlier instant, less the
//     guarantee's declared retry-after precision) and sufficient (it passes at the
//     advised instant), with nothing in between; -1 exactly when the cost exceeds the
//     limit.
//   - denials, for an exact guarantee: a request is denied only when admitting it would
//     break the statement over what was admitted before; an algorithm stricter than it
//     declares (a refill slower than its rate, a release that frees nothing) fails it.
//   - remaining: never negative nor above the limit; a request of that cost at the same
//     instant passes and one of a unit more does not; the reply's limit is the
//     guarantee's amount. Checked with probes: each run on a copy of the state
//     (luahost.Snapshot) and then forgotten, so the trace goes on as if nobody asked.
//   - partial: a partial admission (algorithms.OpMost, engine.AllowAtMost) of a unit more
//     than remaining at the same instant is granted exactly remaining. The probe of
//     remaining is that admission: it grants the unit more, or remaining, or less (and
//     remaining is then asked of a request of its own).
//   - reset-after: a peek at that instant answers as for an empty key, and one before it
//     (less the declared precision) does not; a key that expires while its state still
//     counts is named as a TTL too short.
//   - atomicity: a denied request and a peek change nothing a later request can tell
//     (the trace run again without one gives the same later answers); a rewrite no
//     answer shows is a note.
//   - expiry: no key outlives the last reset-after (plus the declared TTL precision and,
//     for client clocks, the policy's clock skew).
//   - determinism: a trace run twice on fresh hosts gives identical replies and state.
//   - client clocks, for policies with clock = "client": requests come from clients
//     whose clocks are up to the policy's clock_skew apart and step back and forth
//     within it; the limit is judged on the true clock, its intervals widened by the
//     skew, and retry-after, remaining and reset-after per client on its own clock. A
//     key whose state a clock running behind moves back fails it, and so does advice
//     that leaves the skew out.
//   - race (redis.call): the algorithm run without the script's atomicity — each
//     client's check and commit a coroutine yielding before every Redis command, clients
//     interleaved command by command — is shown breaking the limit ([Note]): the reason
//     every request is one script call. An interleaving in which a client's call raises
//     an error that no single request raises (it read state another client had written
//     only part of) is a note too.
//   - lease, for a rule served from quota leases (lease_size): 2 to 8 instances of the
//     engine on one simulated Redis, the rule stacked on an unleased rule that denies
//     some clients, take, spend, give back and return slices on the virtual clock; after
//     every request Redis's count of the window is exactly what the instances admitted in
//     it plus what they hold unspent, so the limit is never exceeded, and no instance
//     holds more than lease_size (the most capacity one instance holds while another is
//     denied).
//
// Per policy: atomicity of the stack (allowed exactly when every enforcing rule allows;
// a denial changes no rule's key), race (concurrent requests, each one call, in seeded
// random and adversarial orders) and race (cluster) (one call per rule with refunds on a
// later denial, as the engine runs a policy without a shard on Redis Cluster).
//
// A script error met by a policy's checks fails the property that met it, with the same
// error and a shrunk counterexample. Check goes on with the other rules and policies
// whatever a rule does; a rule or policy it cannot check at all is a [Fail] of property
// "*".
//
// A failure comes with a [Counterexample] shrunk to the few requests that show it, with
// exact times: single requests are removed (and, in races, single scheduling steps, and
// requests merged into one of their summed cost) until none can go. The same
// configuration, seed and budget give the same findings.
//
// The checks are independent: a rule's traces, its client clocks and its race of
// commands, and a policy's atomicity, race and race (cluster), each with a random stream
// of its own and hosts emptied before every trace. Check runs them on [WithWorkers]
// workers (GOMAXPROCS by default) and reports them in one fixed order, so the findings
// are the same bytes for any number of workers. Hosts carry math.random's state from one
// script to the next; when the script names math.random, every check starts on fresh
// hosts, so a plugin that draws from it finds the same whatever ran before.
//
// # JSON
//
// [Findings.JSON] writes one object whose "schema" is [Schema], 1; a later schema adds
// fields, and changes the number when it removes one or changes its meaning:
//
//	{
//	  "schema": 1,
//	  "seed": 1, "budget": 3000,  // the run's parameters
//	  "calls": 15985,             // engine-script calls made
//	  "results": [{
//	    "policy": "careless",
//	    "rule": "per_user",       // absent for a whole-policy property
//	    "algorithm": "careless_window", "params": "limit=4 window=10s",
//	    "limit": "4 per 10s",     // the rule's limit in words, as verify's text shows it
//	    "property": "errors",     // errors, limit, retry-after, denials, remaining, partial, reset-after,
//	                              // atomicity, expiry, determinism, client clocks,
//	                              // race, race (cluster), race (redis.call), *
//	    "status": "fail",         // pass, skip, note, warn, fail
//	    "statement": "…", "detail": "…",
//	    "calls": 3000,
//	    "error": "plugins/careless_window.lua:6: cannot perform sub operation between number and nil",
//	    "counterexample": {       // absent when there is none
//	      "original": 3, "unit": "requests",  // or "clients"
//	      "steps": [{"at_ns": 26585487000, "request": "cost 0",  // "client": N in races
//	                 "result": "ERROR plugins/careless_window.lua:6: …", "mark": true}]
//	    }
//	  }],
//	  "error": "…"                // only when verify could not run at all; results is then []
//	}
//
// "error", "rule", "algorithm", "params", "limit", "client" and "mark" are left out when empty; a
// result's "error" is the script error a request raised, at its file and line.
package verify
