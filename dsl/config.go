package dsl

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/calendar"
	"github.com/zclconf/go-cty/cty"
)

// Config is a set of loaded, validated policy files.
type Config struct {
	Policies  []*Policy               // in file order, then declaration order
	Plugins   []*algorithms.Algorithm // algorithm blocks, in file order then declaration order
	Scenarios []*Scenario             // in file order, then declaration order
	// Files holds every file read, by the name diagnostics use: policy files and plugin Lua
	// sources (a Lua file's Body is empty). It exists to render diagnostics.
	Files map[string]*hcl.File
}

// Source returns the text at rng in the file it names, spacing collapsed to single spaces
// (an expression as written, on one line); "?" when the file is not in Files or rng is not
// in it.
func (c *Config) Source(rng hcl.Range) string {
	f := c.Files[rng.Filename]
	if f == nil || rng.End.Byte > len(f.Bytes) || rng.Start.Byte > rng.End.Byte {
		return "?"
	}
	return strings.Join(strings.Fields(string(f.Bytes[rng.Start.Byte:rng.End.Byte])), " ")
}

// Policy returns the policy with the given name.
func (c *Config) Policy(name string) (*Policy, bool) {
	for _, p := range c.Policies {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// Failure modes of a policy when its backend (Redis) cannot answer; see Policy.OnError.
const (
	OnErrorAllow = "allow" // fail open: allow the request and count it
	OnErrorDeny  = "deny"  // fail closed: deny the request
	OnErrorLocal = "local" // decide in process, as the backend would, until it is back
)

// Clocks a policy can read; see Policy.Clock.
const (
	ClockServer = "server" // Redis TIME, read once per call
	ClockClient = "client" // the caller's clock, passed in ARGV
)

// DefaultClockSkew is a client-clock policy's ClockSkew unless it sets clock_skew: 250ms,
// what servers whose clocks NTP keeps in step stay well within.
const DefaultClockSkew = 250_000

// Policy is a policy block: the rules applied together, all or nothing, to the requests
// it matches.
type Policy struct {
	Name string
	// Match selects the requests the policy applies to; nil means every request.
	Match *Expr
	// Shard, when set, is the Redis Cluster hash tag: every key of a request is
	// rl:{<shard>}:..., so all of them share one slot and the call stays atomic. Nil means
	// no hash tag: in cluster mode the engine groups rules by slot and compensates.
	Shard *Expr
	// OnError is OnErrorAllow (the default), OnErrorDeny or OnErrorLocal.
	OnError string
	// LocalShare (local_share) is, for OnErrorLocal, the number of instances of the
	// service that may decide in-process at once while the backend is unavailable: each
	// instance's fallback runs every rule of the policy at 1/LocalShare of its limit
	// (algorithms.Algorithm.Share), so together they keep at most the rule's limit. 1, the
	// default, runs the whole limit on every instance.
	LocalShare int64
	shareRange hcl.Range // of local_share, for diagnostics
	// Clock is ClockServer (the default) or ClockClient.
	Clock string
	// ClockSkew is, for ClockClient, how far apart (µs) the callers' clocks may be, each
	// also stepping back and forth within it: what verify attacks the policy with and
	// states its limits for (DefaultClockSkew unless clock_skew says otherwise); 0 for
	// ClockServer.
	ClockSkew int64
	Rules     []*Rule // in declaration order, the order the script checks them
	// Unlimited are the policy's unlimited blocks: requests it leaves unlimited on
	// purpose (envoyproxy/ratelimit's unlimited: true). They limit nothing and charge
	// nothing; a request one of them matches, and no rule of the policy applies to, is
	// reported as unlimited (engine.Decision.Unlimited) rather than as matched by nothing.
	Unlimited []*Unlimited
	// Budget is what each of its rules may cost Redis before validate warns: its budget
	// block, over the files' top-level one, over DefaultBudget.
	Budget    Budget
	DeclRange hcl.Range
}

// Unlimited is an unlimited block of a policy: unlimited "name" { when = ... }.
type Unlimited struct {
	Name string
	// When selects the requests it names; nil means every request the policy matches.
	When *Expr
	// Replaces (replaces = ["rule", ...]) are rules of the policy that do not apply to a
	// decision the block names a request of, as Rule.Replaces: envoyproxy/ratelimit's
	// replaces on an unlimited descriptor.
	Replaces  []*Rule
	DeclRange hcl.Range
}

// Rule is one limit of a policy.
type Rule struct {
	Name      string
	Algorithm *algorithms.Algorithm // a built-in or one of Config.Plugins
	// Key renders the request's counter key within the rule (the engine adds the prefix
	// and hash tag).
	Key *Expr
	// When selects the requests the rule applies to; nil means every request the policy
	// matches.
	When *Expr
	// Cost is what a request takes from the limit; nil means 1. Callers must reject a
	// negative value.
	Cost *Expr
	// Shadow rules are evaluated and charged, never enforced.
	Shadow bool
	// Box is the rule's penalty box (block_for, block_max): once the rule denies a key,
	// the key's requests are denied until the block ends (see algorithms.Box). The zero
	// Box is none.
	Box algorithms.Box
	// Overridable (overridable = true) rules take per-key overrides at runtime
	// (algorithms.Override): the engine reads a key's override in the same script call
	// that decides it. Built-in algorithms only.
	Overridable bool
	// Lists are the rule's runtime lists (exempt = list("..."), deny = list("..."),
	// deny_retry): a key on the exempt list is not limited by the rule, a key on the deny
	// list is refused by it (see algorithms.Lists). The zero Lists is none.
	Lists algorithms.Lists
	// Calendar (window = "calendar_month" and the like, with time_zone) is a
	// fixed_window rule's calendar period: its window is the period that holds each
	// request's instant (a day of 23 or 25 hours on a daylight-saving change, a month of
	// 28 to 31 days), and its window parameter the shortest such period
	// (calendar.Period.Shortest), which stands for it where one duration must (its
	// guarantee over any interval that long, RateLimit-Policy's w). A calendar rule
	// accepts its bound (AcceptBound) unless accept_bound = false. nil: none.
	Calendar *calendar.Period
	// AcceptBound (accept_bound = true) accepts the bound above its limit that the rule's
	// algorithm declares by design, such as fixed_window's 2× across a window boundary:
	// rlctl verify reports traffic within that bound as a note, not a warning, so -strict
	// fails only on what is unexpected. Beyond the bound is a failure either way. It
	// changes no decision.
	AcceptBound bool
	// StatsKey (stats_key) names the rule's statistics in envoyproxy/ratelimit's form
	// (rlctl serve's ratelimit_service_rate_limit_* families), per request: a template
	// may read request values, so each value it reads is a series of its own; nil for
	// none. It changes no decision.
	StatsKey *Expr
	// Replaces (replaces = ["other_rule", ...]) are rules of the same policy that do not
	// apply to a decision this rule applies to: not to the request it applies to, nor to
	// any other request decided with it (engine.AllowAll), as envoyproxy/ratelimit's
	// replaces. A replaced rule may replace others; every rule that applies counts.
	Replaces []*Rule
	// LeaseSize (lease_size = N) lets each instance serve the rule's keys from a quota lease: it
	// takes up to N units of a key from the backend in one call, charged as they are
	// taken, spends them in process, and returns what is left when the lease ends (see
	// engine's doc). 0: none. fixed_window rules of constant parameters only, not shadow,
	// without a penalty box; N is at most the limit.
	LeaseSize int64
	// LeaseFor (lease_for) is the longest an instance holds a lease's units, in
	// microseconds; 0: until the window (or calendar period) it was taken in ends, when
	// its units stop counting.
	LeaseFor int64
	// Params has one entry per parameter of Algorithm, in its wire order. A Lease
	// parameter is Const {0}: the engine supplies the lease.
	Params []*Param
	// Work is the rule's worst case on Redis, for every value its parameters can take and
	// requests of its smallest cost (see algorithms.Costs), its penalty box's commands
	// included; nil when a parameter's values
	// are not known at load time or the algorithm declares none (a plugin without a work
	// block).
	Work      *algorithms.Work
	DeclRange hcl.Range

	wire     []int64        // every parameter's wire values, validated, when all are constant
	replaces *hcl.Attribute // replaces, resolved once every rule of the policy is read
}

// HasFurtherKeys reports whether the rule keeps keys of its own beside its key (a
// plugin's keys, a penalty box's block, an override, list members), which must share its
// key's cluster slot: the engine renders such a rule's key with its identity in braces.
func (r *Rule) HasFurtherKeys() bool {
	return len(r.Algorithm.Keys) > 0 || r.Box.For > 0 || r.Overridable || r.Lists.Any()
}

// Wire returns the rule's parameter values on the wire for request r, validated with
// Algorithm.Validate. When every parameter is constant it returns the same validated
// slice each time without evaluating anything; callers must not modify it.
func (ru *Rule) Wire(r Request) ([]int64, error) {
	if ru.wire != nil {
		return ru.wire, nil
	}
	w := make([]int64, 0, ru.Algorithm.WireLen())
	for _, p := range ru.Params {
		v, err := p.Wire(r)
		if err != nil {
			return nil, fmt.Errorf("rule %q: %w", ru.Name, err)
		}
		w = append(w, v...)
	}
	if err := ru.Algorithm.Validate(w); err != nil {
		return nil, fmt.Errorf("rule %q: %w", ru.Name, err)
	}
	return w, nil
}

// Param is one algorithm parameter of a rule: a constant, whose wire values were computed
// and validated at load time, or an expression evaluated per request (such as
// lookup(local.tiers, request.plan, 30)).
type Param struct {
	Name string
	Kind algorithms.Kind
	// Const holds the wire values (one, or two for a Rate: amount and period in µs) when
	// the parameter is constant; nil otherwise.
	Const []int64
	// Expr is the expression when the parameter is not constant; nil otherwise.
	Expr  *Expr
	Range hcl.Range // the attribute, or the rule's DeclRange for a Lease

	// table and def are a lookup(<constant map>, key, <constant default>) parameter's
	// wire values per key, precomputed and checked at load time.
	table map[string][]int64
	def   []int64
	// zero: the parameter is a count that may be 0 (algorithms.Param.Min).
	zero bool
	// written: a rate reaches the algorithm as written, not reduced (a plugin's).
	written bool
	// flag: a Count written as a bool (algorithms.Param.Flag).
	flag bool
}

// Wire returns the parameter's wire values for request r: Const, or the expression's value
// read as the parameter's kind (a whole number for a Count, a duration string such as
// "1m" for a Duration, a rate string such as "10/s" for a Rate). It checks the form of
// each value, not bounds across parameters; Rule.Wire does both.
func (p *Param) Wire(r Request) ([]int64, error) {
	if p.Const != nil {
		return p.Const, nil
	}
	if p.table != nil {
		k, err := p.Expr.lookupKey(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		if w, ok := p.table[k]; ok {
			return w, nil
		}
		return p.def, nil
	}
	var w []int64
	var err error
	switch p.Kind {
	case algorithms.Count:
		if p.flag {
			var b bool
			if b, err = p.Expr.Bool(r); err == nil {
				w = []int64{0}
				if b {
					w = []int64{1}
				}
			}
			break
		}
		var n int64
		if n, err = p.Expr.Int(r); err == nil {
			least := int64(1)
			if p.zero {
				least = 0
			}
			w, err = countWire(n, least)
		}
	case algorithms.Duration, algorithms.Rate:
		var s string
		if s, err = p.Expr.String(r); err == nil {
			w, err = stringWire(p.Kind, s, p.written)
		}
	default:
		return []int64{0}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Name, err)
	}
	return w, nil
}

// Scenario is executable documentation of a policy: traffic the simulator generates
// against it on a virtual clock, and what must hold afterwards.
type Scenario struct {
	Name     string
	Policy   string        // names one of Config.Policies
	Duration time.Duration // virtual time the scenario runs for
	Seed     int64         // seeds every random choice (Poisson arrivals); default 1
	// StartTime (start_time, RFC 3339) is the instant virtual time 0 stands for, so a
	// scenario can cross a calendar period's end or a daylight-saving change; the zero
	// time means the simulator's default (verify.Epoch).
	StartTime time.Time
	Traffic   []*Traffic // at least one
	Expect    []*Expect  // in source order
	// Faults are the Redis failures the scenario injects, in time order; they never
	// overlap. None means Redis never fails.
	Faults []*Fault
	// Changes are the scenario's override and list blocks, in time order: overrides set
	// or cleared, and keys put on lists or taken off, at virtual instants.
	Changes []*Change
	// Engine is how the engine deciding the scenario's requests is configured; Load fills
	// in the engine's defaults for what the scenario's engine block leaves out.
	Engine    EngineSettings
	DeclRange hcl.Range
}

// Fault kinds: what Redis does wrong during a Fault.
const (
	// FaultStall: Redis stops answering. Every call sent during the fault times out at the
	// engine's deadline, and the server runs the calls it received, in order, when the stall
	// ends, as a blocked server (a long script, a slow fork, a paused VM) does.
	FaultStall = "stall"
	// FaultRefuse: nothing listens; every connection is refused at once.
	FaultRefuse = "refuse"
	// FaultError: every call gets the error reply Fault.Reply, as an out-of-memory,
	// read-only replica or loading server answers.
	FaultError = "error"
	// FaultFlush: the server loses every key at one instant, as FLUSHALL does.
	FaultFlush = "flush"
	// FaultRestart: the server is down (connections refused) for the fault's duration and
	// comes back empty, as one restarted without persistence, or a failover to a replica
	// that had not synchronised, does.
	FaultRestart = "restart"
)

// DefaultFaultReply is the reply of a FaultError fault that names none: Redis's own
// answer to a write once used memory reaches maxmemory.
const DefaultFaultReply = "OOM command not allowed when used memory > 'maxmemory'."

// Fault is a failure of Redis during a scenario, on its virtual clock.
type Fault struct {
	Kind      string        // one of the Fault constants
	At        time.Duration // when it starts, from the scenario's start
	For       time.Duration // how long it lasts; 0 for FaultFlush, which is an instant
	Reply     string        // FaultError's error reply; "" for other kinds
	DeclRange hcl.Range
}

// End returns when the fault stops: At + For.
func (f *Fault) End() time.Duration { return f.At + f.For }

// EngineSettings are the engine options a scenario's engine block sets, and the simulated
// Redis's memory. Each matters only while Redis fails (or, for the deny cache, once a
// request was denied; for the memory, once the keys fill it).
type EngineSettings struct {
	// Deadline bounds each Redis call: a call unanswered by then is a failure. Default
	// 50ms, the engine's.
	Deadline time.Duration
	// BreakerFailures consecutive failures open the circuit breaker; for BreakerCooldown no
	// request goes to Redis and policies decide by on_error, then one request probes.
	// Defaults 5 and 1s, the engine's.
	BreakerFailures int
	BreakerCooldown time.Duration
	// DenyCache is the number of denials the engine remembers, to answer a repeat within its
	// retry-after without Redis; 0, the default, disables the cache.
	DenyCache int
	// MaxMemory is the simulated Redis's maxmemory in bytes (the embedded backend's cap,
	// luahost.WithMaxMemory); 0, the default, is none. Past it Eviction decides, as Redis's
	// maxmemory-policy does: noeviction (the default) refuses writes, so calls fail and
	// policies decide by on_error; the allkeys-* and volatile-* policies evict keys, each a
	// client whose history the limiter forgets.
	MaxMemory int64
	Eviction  string
	// Instances is the number of instances of the service that share the simulated
	// Redis, each an engine of its own (its breaker, deny cache and on_error = "local"
	// fallback); requests go to them in turn, as from a round-robin load balancer.
	// Default 1.
	Instances int
}

// DefaultEngine is the engine's configuration when a scenario sets nothing: the defaults
// of engine.New.
var DefaultEngine = EngineSettings{Deadline: 50 * time.Millisecond, BreakerFailures: 5, BreakerCooldown: time.Second, Eviction: "noeviction", Instances: 1}

// Arrival patterns of a Traffic.
const (
	// PatternConstant sends one request every Per/N, per client.
	PatternConstant = "constant"
	// PatternPoisson sends requests as a Poisson process of mean rate N per Per, per client.
	PatternPoisson = "poisson"
	// PatternBurst sends Burst requests at the same instant, the bursts spaced so the mean
	// is the rate.
	PatternBurst = "burst"
	// PatternRamp raises the rate linearly from 0 at Start to the full rate at Stop.
	PatternRamp = "ramp"
	// PatternEdge attacks window boundaries: each period's N requests arrive in two clumps
	// straddling the period boundary (periods aligned to multiples of Per since the epoch,
	// as fixed windows are): the first ceil(N/2) 1ms before it, the rest at it.
	PatternEdge = "edge"
)

// Rate is an amount per period, reduced (600/m is 1 per 100ms).
type Rate struct {
	N   int64
	Per time.Duration
}

// Traffic is one traffic source of a scenario.
type Traffic struct {
	Name string
	// Request maps request attribute names to templates over the client number (see
	// Render).
	Request map[string]*Expr
	Clients int    // independent clients sending this traffic; default 1
	Rate    Rate   // per client
	Pattern string // one of the Pattern constants; default PatternConstant
	Burst   int    // requests per burst for PatternBurst; 0 otherwise
	// Start and Stop bound the traffic in scenario time; the defaults are 0 and the
	// scenario's duration.
	Start, Stop time.Duration
	// Hold is how long an allowed request lasts before it finishes and releases what it
	// holds (a concurrency lease); 0, the default, finishes at once.
	Hold time.Duration
	// Units is how many units each request asks for (engine.AllowN's n); default 1.
	Units int64
	// AtMost makes each request a partial admission of up to Units units
	// (engine.AllowAtMost): it is granted the most of them that fit.
	AtMost bool
	// MaxDelay (max_delay) makes each request wait up to that long for its turn rather
	// than be denied (engine.Wait); 0: none.
	MaxDelay time.Duration
	// Actual (actual) makes each request reserve Units as an estimate (engine.Reserve)
	// and settle, when it finishes (after Hold), with the next of these true costs, in
	// turn; nil: none.
	Actual    []int64
	DeclRange hcl.Range
}

// Render returns the request attributes client (0 ≤ client < Clients) sends:
// "u${client}" is "u0", "u1", ….
func (t *Traffic) Render(client int) (map[string]string, error) {
	r := clientRequest(client)
	m := make(map[string]string, len(t.Request))
	for name, e := range t.Request {
		s, err := e.String(r)
		if err != nil {
			return nil, fmt.Errorf("traffic %q: request.%s: %w", t.Name, name, err)
		}
		m[name] = s
	}
	return m, nil
}

// Expect is one named expectation of a scenario: a condition over what the run measured.
// The functions it may call are:
//
//	requests(traffic)              the number of requests traffic sent
//	allowed(traffic)               how many were allowed
//	denied(traffic)                how many were denied
//	allowed_fraction(traffic)      allowed / requests (0 when none were sent)
//	denied_fraction(traffic)       denied / requests (0 when none were sent)
//	denied_by(traffic, rule)       how many were denied with rule as the deciding rule
//	max_allowed_in(traffic, span)  the most allowed within any interval of length span
//	                               (a duration such as "1m")
//	granted(traffic)               the units its allowed requests were granted: units
//	                               each, or with at_most what each was granted
//	waited(traffic)                how many of its allowed requests waited for their
//	                               turn first (max_delay)
//	max_wait(traffic)              the longest of those waits, in seconds (0: none)
//	settled(traffic)               the true cost its settled requests came to (actual)
//	owed(traffic)                  how much of that was over their estimates: owed
//
// and, to say what a Redis outage does (see Fault):
//
//	allowed_during_fault(traffic)  how many sent while a fault was in force were allowed
//	denied_during_fault(traffic)   how many sent while a fault was in force were denied
//	degraded(traffic)              how many were decided without Redis, by on_error:
//	                               the local fallback, fail-open or fail-deny
//	decided_by(traffic, how)       how many were decided by how: "redis", "local",
//	                               "fail_open", "fail_deny" or "cache" (the deny cache)
//	timed_out(traffic)             how many waited for Redis until the engine's deadline
//	breaker_open(traffic)          how many the open circuit breaker kept from Redis
//	recovered_within(traffic, span)  true when, after each fault ended, none of
//	                               traffic's requests later than span (a duration) was
//	                               decided without Redis before the next fault
//	phantom_charges()              calls Redis ran after their caller stopped waiting (a
//	                               stall's queue) that charged a limit all the same
//
// plus every policy function; traffic, rule and how names are checked at load time, and
// the functions about faults are refused in a scenario that declares none.
type Expect struct {
	Name  string
	Expr  hcl.Expression
	Range hcl.Range // the attribute

	scenario *Scenario
	rules    []string             // the policy's rule names
	vars     map[string]cty.Value // local
}
