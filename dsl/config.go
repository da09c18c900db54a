package dsl

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
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
	OnErrorLocal = "local" // decide in-process with the same script until the backend is back
)

// Clocks a policy can read; see Policy.Clock.
const (
	ClockServer = "server" // Redis TIME, read once per call
	ClockClient = "client" // the caller's clock, passed in ARGV
)

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
	// Clock is ClockServer (the default) or ClockClient.
	Clock     string
	Rules     []*Rule // in declaration order, the order the script checks them
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
	// Params has one entry per parameter of Algorithm, in its wire order. A Lease
	// parameter is Const {0}: the engine supplies the lease.
	Params    []*Param
	DeclRange hcl.Range

	wire []int64 // every parameter's wire values, validated, when all are constant
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
		var n int64
		if n, err = p.Expr.Int(r); err == nil {
			w, err = countWire(n)
		}
	case algorithms.Duration, algorithms.Rate:
		var s string
		if s, err = p.Expr.String(r); err == nil {
			w, err = stringWire(p.Kind, s)
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
	Name      string
	Policy    string        // names one of Config.Policies
	Duration  time.Duration // virtual time the scenario runs for
	Seed      int64         // seeds every random choice (Poisson arrivals); default 1
	Traffic   []*Traffic    // at least one
	Expect    []*Expect     // in source order
	DeclRange hcl.Range
}

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
	Hold      time.Duration
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
//
// plus every policy function; traffic and rule names are checked at load time.
type Expect struct {
	Name  string
	Expr  hcl.Expression
	Range hcl.Range // the attribute

	scenario *Scenario
	rules    []string             // the policy's rule names
	vars     map[string]cty.Value // local
}
