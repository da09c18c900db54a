package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/calendar"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/luahost"
	"github.com/rlctl/rlctl/native"
)

// Engine decides requests against a Plan. It is safe for concurrent use.
type Engine struct {
	plan    *Plan
	backend Backend
	local   Backend // the on_error = "local" fallback
	// localOpts configure the fallback's host when the engine creates it (local.go).
	localOpts []luahost.Option
	// nativeOpts configure the fallback's store (local.go).
	nativeOpts []native.Option
	cluster    bool
	// clusterClient is the backend's client on a Redis Cluster; nodes holds a breaker per
	// primary's address.
	clusterClient *redis.ClusterClient
	nodes         sync.Map
	timeout       time.Duration
	// shared is the deadline context calls without one of their own share (see bound).
	shared  atomic.Pointer[sharedDeadline]
	clock   func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error
	log     *slog.Logger
	logSet  bool // WithLogger was given
	hooks   Hooks
	br      breaker
	cache   *denyCache
	server  serverClock
	logs    logLimiter
	orphans orphans

	leases      leases // quota leases (lease.go)
	leasePrefix string
	leaseSeq    atomic.Uint64
	loadLocal   sync.Once
}

// Hooks observe the engine; nil fields are skipped. They run on the deciding goroutine and
// must be quick.
type Hooks struct {
	// Decided is called with every decision.
	Decided func(*Decision)
	// Degraded is called when a backend failure made a policy decide by its on_error mode
	// ("allow", "deny" or "local"); err is the failure (Classify tells its class).
	Degraded func(policy, mode string, err error)
	// Breaker is called when a circuit breaker changes state: the engine's, with node "",
	// or on a Redis Cluster the breaker of the primary at address node.
	Breaker func(node string, from, to BreakerState)
	// Called is called after every backend call the engine makes (a decision's check, a
	// refund, a lease release), on the caller's goroutine. A call's duration bounds its
	// script's run time on the server from above, so an alert on it fires before the
	// server's SLOWLOG does (one slow script stalls every client of that Redis).
	Called func(CallStats)
	// Evicted is called after a call to an in-process backend (a Local, or the on_error =
	// "local" fallback) during which its host evicted keys to stay under its memory cap
	// (luahost.WithMaxMemory, WithLocalMaxMemory), with how many: each is a client whose
	// state the limiter forgot. Every eviction is reported once.
	Evicted func(keys uint64)
}

// CallStats describes one backend call.
type CallStats struct {
	Op       string        // "check" or "refund"
	Rules    int           // the rules the call carried
	Duration time.Duration // from sending to the answer, on the engine's clock (WithClock)
	Err      error         // nil, or how the call failed (Classify tells its class)
}

// Option configures an Engine.
type Option func(*Engine)

// WithTimeout sets the decision deadline for a backend call (default 50ms): a hung Redis
// never holds a caller longer, whatever the client's configuration (see Redis); a call past
// it is a backend failure. The deadline also travels to the server in the call, so a call
// the server runs after the engine stopped waiting (it sat in a stalled server's queue)
// charges nothing. A caller's own context deadline, when sooner, takes its place. 0
// disables it. It does not apply to the in-process Local backend, which cannot hang on a
// network and whose runaway scripts luahost's own script timeout stops.
func WithTimeout(d time.Duration) Option { return func(e *Engine) { e.timeout = d } }

// WithClock sets the clock of client-clock policies, the deny cache and the breaker
// (default time.Now). Server-clock policies read Redis TIME (or the local host's clock).
func WithClock(now func() time.Time) Option { return func(e *Engine) { e.clock = now } }

// WithSleep sets how Wait waits for a reserved slot: sleep returns after d, or with ctx's
// error when ctx ends first (default: a timer on the wall clock). A virtual clock's sleep
// advances it.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(e *Engine) { e.sleep = sleep }
}

// WithLogger sets where the engine logs backend failures, breaker changes and script
// errors (default: discarded). Failures are logged at most once a second per policy and
// kind, with the count of those not logged. New's warnings about a Redis client that is
// not configured as the engine needs go to l, or without WithLogger to slog.Default(): a
// misconfiguration is said even to a program that set no logger.
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.log, e.logSet = l, true } }

// WithHooks sets metric hooks.
func WithHooks(h Hooks) Option { return func(e *Engine) { e.hooks = h } }

// WithBreaker opens the circuit after failures consecutive backend failures: for cooldown
// no request reaches the backend, and policies decide by their on_error mode; then one
// request probes, and its outcome closes or reopens the circuit. Only backend failures
// count: a caller that cancels its context, or a script error (the server answered), never
// does. On a Redis Cluster each primary has a breaker of its own. Default: 5 failures, 1s.
func WithBreaker(failures int, cooldown time.Duration) Option {
	return func(e *Engine) { e.br.threshold, e.br.cooldown = int64(max(failures, 1)), cooldown }
}

// WithDenyCache lets the engine answer, without a backend call, a request that an
// enforcing rule denied within its retry-after: same rule and key, cost at least the
// denied one. It is sound because retry-after is (nothing for that key passes earlier), but
// it ignores refunds, Reset, parameter changes, overrides and list changes during that
// time (those this engine makes forget the key; another instance's are seen when the
// cached denial's retry-after ends). size bounds the entries; 0 disables it (the default).
func WithDenyCache(size int) Option {
	return func(e *Engine) {
		if size > 0 {
			e.cache = newDenyCache(size)
		}
	}
}

// WithLocalFallback sets the backend used by policies with on_error = "local" (default: an
// in-process luahost on the engine's clock, created on first use).
func WithLocalFallback(b Backend) Option { return func(e *Engine) { e.local = b } }

// New returns an Engine deciding plan's requests on backend. A *Redis backend on a
// *redis.ClusterClient runs in cluster mode: rules are grouped by hash slot.
func New(backend Backend, plan *Plan, opts ...Option) *Engine {
	e := &Engine{
		plan:    plan,
		backend: backend,
		timeout: 50 * time.Millisecond,
		clock:   time.Now,
		sleep:   sleepFor,
		log:     slog.New(slog.DiscardHandler),
		br:      breaker{threshold: 5, cooldown: time.Second},
	}
	if r, ok := backend.(*Redis); ok {
		e.clusterClient, e.cluster = r.c.(*redis.ClusterClient)
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	e.leasePrefix = hex.EncodeToString(id[:]) + "-"
	for _, o := range opts {
		o(e)
	}
	e.br.changed = func(from, to BreakerState) { e.breakerChanged("", from, to) }
	if l, ok := backend.(loader); ok && plan != nil {
		l.load(plan.Script())
	}
	warn := e.log
	if !e.logSet {
		warn = slog.Default()
	}
	if r, ok := backend.(*Redis); ok && r.detach && e.timeout > 0 {
		warn.Warn("rlctl: the Redis client does not end calls at their context's deadline; " +
			"the engine returns at its deadline anyway, but each abandoned call keeps a connection " +
			"until the client's ReadTimeout: set ContextTimeoutEnabled: true in the client's options")
	}
	if r, ok := backend.(*Redis); ok && r.retries && (r.ap != nil || r.proc == nil) {
		// Calls sent one by one are marked not to be resent (see Redis); batched calls, and
		// those of a client that cannot send a prepared command, are the client's to resend.
		warn.Warn("rlctl: the Redis client retries failed commands, and batched calls are its to resend; " +
			"a call whose reply was lost (its connection killed after the server ran it) is charged twice: " +
			"set MaxRetries: -1 in the client's options (on_error decides failed calls)")
	}
	return e
}

// Source says how a decision was reached.
type Source uint8

const (
	FromBackend  Source = iota // the backend ran the script
	FromLocal                  // the in-process fallback ran it (on_error = "local")
	FromFailOpen               // the backend failed; on_error = "allow"
	FromFailDeny               // the backend failed; on_error = "deny"
	FromCache                  // the deny cache answered
	FromNoRules                // no rule applied to the request
	FromLease                  // quota leases held in process decided it, with no backend call (dsl.Rule.LeaseSize)
)

// String is the source's name in metrics and APIs: backend, local, fail_open, fail_deny,
// cache or no_rules.
func (s Source) String() string {
	switch s {
	case FromBackend:
		return "backend"
	case FromLocal:
		return "local"
	case FromFailOpen:
		return "fail_open"
	case FromFailDeny:
		return "fail_deny"
	case FromCache:
		return "cache"
	case FromNoRules:
		return "no_rules"
	case FromLease:
		return "lease"
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// Decision is the engine's answer for one request.
type Decision struct {
	Allowed bool
	// RetryAfter, when denied, is how long until the same request can pass: the longest
	// retry-after of the enforcing rules that denied, or Never. 0 when allowed.
	RetryAfter time.Duration
	// Rules are the rules that applied, in policy and declaration order.
	Rules []RuleResult
	// Decider indexes Rules: the first enforcing rule that denied; -1 when allowed.
	Decider int
	Source  Source
	// Err is the backend failure behind a degraded decision (Source FromLocal,
	// FromFailOpen or FromFailDeny).
	Err error
	// Granted is the units the request may go on with: Allow's 1 and AllowN's n when
	// allowed, AllowAtMost's grant; 0 when denied, for Peek and for AllowAll.
	Granted int64
	// Delay, for Wait, is how long the request waited for its slot: 0 when it went on at
	// once or was denied.
	Delay time.Duration

	held      []heldLease // concurrency leases taken, for Release
	reserved  *charged    // Wait's reservation, given back when its wait ends early
	charges   []charged   // every group's charge, for Reserve (run's keep)
	unlimited []int       // the requests an unlimited block names, in order
}

// unlimitedFirst is Decision.unlimited for a request of Allow, AllowN or Peek that an
// unlimited block names (shared: never modified).
var unlimitedFirst = []int{0}

// Unlimited reports whether an unlimited block of a policy that matched request i (0 for
// Allow, AllowN and Peek) names it: a request its policy leaves unlimited on purpose
// (dsl.Policy.Unlimited), which a caller may report as such when no rule applies to it.
func (d *Decision) Unlimited(i int) bool { return slices.Contains(d.unlimited, i) }

// Holds reports whether d holds concurrency leases for Release to give back.
func (d *Decision) Holds() bool { return len(d.held) > 0 }

// Never is Decision.RetryAfter and RuleResult.RetryAfter for a request whose cost exceeds a
// rule's capacity: no wait will let it pass.
const Never time.Duration = -1

// RuleResult is one rule's verdict.
type RuleResult struct {
	Policy, Rule, Algorithm string
	Shadow                  bool
	Allowed                 bool // this rule alone would let the request pass
	Limit                   int64
	Remaining               int64         // the largest cost the rule would allow now
	RetryAfter              time.Duration // 0 when allowed; Never
	ResetAfter              time.Duration // until the rule's key is back to empty
	// Window is the time over which Limit applies, for quota headers: the window of a
	// windowed algorithm (of a calendar rule, the period the request counts in: a day of
	// 23 to 25 hours, a month of 28 to 31 days), the time a bucket takes to refill from
	// empty (capacity × period / rate), 0 for concurrency.
	Window time.Duration
	// Calendar is a calendar rule's period unit (calendar.Day, Week, Month or Year); 0
	// for any other rule.
	Calendar calendar.Unit
	Key      string // the Redis key
	// Request indexes AllowAll's requests: the one this rule applied to (0 for Allow,
	// AllowN and Peek).
	Request int
	// Cost is what the request asked of the rule: its units times the rule's cost (0 for
	// a peek). Requests of AllowAll that share the rule's key are charged their costs
	// together; an answer of the deny cache has the cost it checked.
	Cost int64

	evaluated bool
	cost      int64 // Cost, with those of the requests that share its key: what the key is charged
}

type heldLease struct {
	rule  algorithms.Rule
	now   int64
	local bool
}

// Attrs is a request given as a map of attribute names to values; any type with an
// Attr(name string) string method serves as well (and costs no map).
type Attrs map[string]string

// Attr implements dsl.Request: a missing attribute is "".
func (a Attrs) Attr(name string) string { return a[name] }

// Allow decides a request of cost 1 (times each rule's cost expression).
func (e *Engine) Allow(ctx context.Context, r dsl.Request) (*Decision, error) {
	return e.decide(ctx, r, 1)
}

// AllowN decides a request of n units: each rule is charged n times its cost.
func (e *Engine) AllowN(ctx context.Context, r dsl.Request, n int64) (*Decision, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: negative cost %d", ErrRequest, n)
	}
	return e.decide(ctx, r, n)
}

// AllowAtMost decides a partial admission of up to n units (n >= 1), as a sender with a
// batch of n messages asks for room: it grants and charges, all or nothing across the
// rules, the largest number of units g <= n that every enforcing rule allows now
// (Decision.Granted; each rule is charged g times its cost). It is denied (Granted 0) when
// not even one unit fits, and RetryAfter is then the wait for one unit. The grant is
// decided in the same atomic call as the checks: no other decision sees a partial charge.
//
// On a Redis Cluster whose rules lie in several hash slots, each slot's call grants at
// most what the slots before it granted, and those are refunded the difference (a plugin
// without a refund function keeps it until its key expires). A request that a
// concurrency rule applies to is refused with ErrRequest: a lease is released whole, never
// in part. A rule whose algorithm takes at most max_cost a request caps n at what fits in
// it. Granted is the units asked when no rule applies, and when the policies' on_error lets
// a failed backend allow.
func (e *Engine) AllowAtMost(ctx context.Context, r dsl.Request, n int64) (*Decision, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: AllowAtMost needs at least 1 unit, got %d", ErrRequest, n)
	}
	if n > algorithms.MaxInt {
		return nil, fmt.Errorf("%w: %d units is above 2^53", ErrRequest, n)
	}
	rules, unl, err := e.rulesOf(r, 1, "AllowAtMost cannot grant in part; use AllowN")
	if err != nil {
		return nil, err
	}
	for _, p := range rules {
		// An algorithm that takes at most max_cost a request is never asked for more.
		if m, k := p.call.Algorithm.MaxCost, p.call.Cost; m > 0 && k > 0 {
			n = min(n, m/k)
		}
	}
	d, err := e.run(ctx, rules, rules, nil, true, n, -1, false)
	if d != nil && unl {
		d.unlimited = unlimitedFirst
	}
	return d, err
}

// Wait decides a request of cost 1 that would rather wait for its turn than be denied,
// as golang.org/x/time/rate's Wait and NGINX's limit_req with burst do: when the rules
// allow it now, it returns at once; when enforcing rules deny it and every one of them
// allows it again within maxDelay (the longest of their retry-afters, d), it reserves that
// slot in the same atomic call (charged as at now + d: the requests that wait are spaced
// as the rules' rates space them), waits d, and returns allowed with Decision.Delay d.
// Otherwise (a cost that never fits, a wait beyond maxDelay, a denial that starts a
// penalty box's block) it returns the denial at once, as Allow would.
//
// A wait ends early when ctx does: the reservation is given back (refunded, as a
// cluster's compensation is) and Wait returns ctx's error. The wait is on the engine's
// sleep (WithSleep; the wall clock by default). The request's rules must make one call
// (one hash slot, one clock), and none may hold concurrency leases: both are refused with
// ErrRequest. Wait always asks the backend: the deny cache's denials are for requests
// that would not wait.
func (e *Engine) Wait(ctx context.Context, r dsl.Request, maxDelay time.Duration) (*Decision, error) {
	if maxDelay < 0 {
		return nil, fmt.Errorf("%w: negative max delay %v", ErrRequest, maxDelay)
	}
	rules, unl, err := e.rulesOf(r, 1, "a request cannot reserve ahead; use Allow")
	if err != nil {
		return nil, err
	}
	d, err := e.run(ctx, rules, rules, nil, true, 0, min(maxDelay.Microseconds(), algorithms.MaxInt), false)
	if err != nil {
		return nil, err
	}
	if unl {
		d.unlimited = unlimitedFirst
	}
	if d.Allowed {
		d.Granted = 1
	}
	if d.reserved != nil {
		if err := e.sleep(ctx, d.Delay); err != nil {
			e.refund(ctx, []charged{*d.reserved})
			return nil, err
		}
		d.reserved = nil
	}
	return d, nil
}

// sleepFor waits d, or until ctx ends: the wall clock's sleep, the default of WithSleep.
func sleepFor(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Peek reads, charging nothing, every rule that applies to r: each rule's Limit,
// Remaining, ResetAfter and Window as Allow would see them, and any refusal that does not
// depend on the cost (a deny list, a penalty box's block). It decides a request that costs
// nothing: a rule whose limit is spent still peeks allowed, with Remaining 0. A request of
// cost c would pass now if every enforcing rule allows it and has Remaining >= c.
func (e *Engine) Peek(ctx context.Context, r dsl.Request) (*Decision, error) {
	return e.decide(ctx, r, 0)
}

// AllowAll decides several requests as one, as a gateway asks about the several
// descriptors of one client request: every rule that applies to any of them is checked in
// the same atomic call (one per hash slot on a cluster, compensated as for Allow), and
// either all are charged or, when any enforcing rule denies, none is. ns[i] is request i's
// units, as AllowN's n (0 peeks at it); ns nil means 1 each. The Decision lists each
// request's rules in request order, RuleResult.Request saying whose. A rule and key that
// several requests share is one counter: it is checked once, charged their units together,
// and its result is listed under each of them.
//
// One call charges at most MaxRules rules, counted before shared keys are merged.
func (e *Engine) AllowAll(ctx context.Context, rs []dsl.Request, ns []int64) (*Decision, error) {
	if ns != nil && len(ns) != len(rs) {
		return nil, fmt.Errorf("%w: %d requests but %d costs", ErrRequest, len(rs), len(ns))
	}
	var all []pending
	var gone []*dsl.Rule
	var unlimited []int
	charging := false
	for i, r := range rs {
		n := int64(1)
		if ns != nil {
			n = ns[i]
		}
		if n < 0 {
			return nil, fmt.Errorf("%w: request %d: negative cost %d", ErrRequest, i, n)
		}
		charging = charging || n > 0
		var err error
		var unl bool
		if all, gone, unl, err = e.collect(r, n, i, all, gone); err != nil {
			if len(rs) > 1 {
				return nil, fmt.Errorf("request %d: %w", i, err)
			}
			return nil, err
		}
		if unl {
			unlimited = append(unlimited, i)
		}
		if len(all) > MaxRules {
			return nil, tooManyRules(len(all))
		}
	}
	all = e.dropReplaced(all, gone)
	uniq, fan, err := merge(all)
	if err != nil {
		return nil, err
	}
	d, err := e.run(ctx, all, uniq, fan, charging, 0, -1, false)
	if d != nil {
		d.unlimited = unlimited
	}
	return d, err
}

// dropReplaced removes from the rules of a decision those that a rule applying to it
// replaces (dsl.Rule.Replaces), and those in gone (replaced by the unlimited blocks that
// name its requests).
func (e *Engine) dropReplaced(all []pending, gone []*dsl.Rule) []pending {
	if !e.plan.replaces {
		return all
	}
	for i := range all {
		gone = append(gone, all[i].rule.Replaces...)
	}
	if len(gone) == 0 {
		return all
	}
	return slices.DeleteFunc(all, func(p pending) bool { return slices.Contains(gone, p.rule) })
}

// merge folds the rules of several requests that share a key into one, charged the sum of
// their costs. fan[i] indexes uniq with all[i]'s rule; fan is nil when no key repeats
// (uniq is then all).
func merge(all []pending) (uniq []pending, fan []int, err error) {
	if len(all) < 2 || all[len(all)-1].req == 0 {
		return all, nil, nil // one request's rules have keys of their own
	}
	// first(i) is the index of the first rule with all[i]'s key. A batch usually holds a
	// few rules (a gateway's descriptors): a scan costs less than a map then, and
	// allocates nothing; a large one (the HTTP API takes 256 requests) uses a map.
	first := func(i int) int {
		for j := range i {
			if all[j].call.Key == all[i].call.Key {
				return j
			}
		}
		return i
	}
	if len(all) > 32 {
		at := make(map[string]int, len(all))
		for i := range all {
			if _, ok := at[all[i].call.Key]; !ok {
				at[all[i].call.Key] = i
			}
		}
		first = func(i int) int { return at[all[i].call.Key] }
	}
	dup := false
	for i := 1; i < len(all) && !dup; i++ {
		dup = first(i) < i
	}
	if !dup {
		return all, nil, nil
	}
	uniq = make([]pending, 0, len(all))
	fan = make([]int, len(all))
	for i := range all {
		if j := first(i); j < i {
			u := fan[j]
			c := &uniq[u].call
			if all[i].call.Cost > algorithms.MaxInt-c.Cost {
				return nil, nil, fmt.Errorf("%w: policy %q rule %q: the requests' costs together are too large", ErrRequest, all[i].policy.Name, all[i].rule.Name)
			}
			c.Cost += all[i].call.Cost
			fan[i] = u
			continue
		}
		fan[i] = len(uniq)
		uniq = append(uniq, all[i])
	}
	return uniq, fan, nil
}

// Reset deletes the state of every rule that applies to r, as if it had never been seen:
// its counters, and a boxed rule's block and the record of its last one (it unblocks).
func (e *Engine) Reset(ctx context.Context, r dsl.Request) error {
	rules, _, _, err := e.collect(r, 0, 0, nil, nil)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(rules))
	for i := range rules {
		k := rules[i].call.Key
		e.cache.forget(k)
		keys = append(keys, k)
		for _, name := range rules[i].rule.Algorithm.Keys {
			keys = append(keys, k+":"+name) // the plugin's subkey(key, name)
		}
		if rules[i].rule.Box.For > 0 {
			keys = append(keys, algorithms.BoxKey(k))
		}
	}
	if e.timeout > 0 { // 0 disables the deadline (WithTimeout)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.timeout)
		defer cancel()
	}
	return e.backend.Del(ctx, keys...)
}

// pending is one rule of a request, ready for the wire.
type pending struct {
	policy *dsl.Policy
	rule   *dsl.Rule
	call   algorithms.Rule
	client bool // client clock
	req    int  // the request's index in AllowAll
}

// collect evaluates the plan for r, request number req of a batch: it appends to out every
// applicable rule with its key, cost and params, and to gone the rules that the unlimited
// blocks naming r replace (dsl.Unlimited.Replaces). unlimited reports whether an
// unlimited block of a policy that matches r names it.
func (e *Engine) collect(r dsl.Request, n int64, req int, out []pending, gone []*dsl.Rule) (_ []pending, _ []*dsl.Rule, unlimited bool, _ error) {
	if out == nil {
		out = make([]pending, 0, min(e.plan.rules, 16))
	}
	var stack [128]byte // most keys render in it
	buf := stack[:0]
	for _, p := range e.plan.policies {
		if p.Match != nil {
			ok, err := p.Match.Bool(r)
			if err != nil {
				return nil, nil, false, fmt.Errorf("%w: policy %q match: %v", ErrRequest, p.Name, err)
			}
			if !ok {
				continue
			}
		}
		shard, err := shardOf(p, r)
		if err != nil {
			return nil, nil, false, err
		}
		for _, ru := range p.Rules {
			if ru.When != nil {
				ok, err := ru.When.Bool(r)
				if err != nil {
					return nil, nil, false, fmt.Errorf("%w: policy %q rule %q when: %v", ErrRequest, p.Name, ru.Name, err)
				}
				if !ok {
					continue
				}
			}
			cost := int64(1)
			if ru.Cost != nil {
				var err error
				if cost, err = ru.Cost.Int(r); err != nil {
					return nil, nil, false, fmt.Errorf("%w: policy %q rule %q cost: %v", ErrRequest, p.Name, ru.Name, err)
				}
				if cost < 0 {
					return nil, nil, false, fmt.Errorf("%w: policy %q rule %q: negative cost %d", ErrRequest, p.Name, ru.Name, cost)
				}
			}
			if n != 0 && cost > algorithms.MaxInt/n {
				return nil, nil, false, fmt.Errorf("%w: policy %q rule %q: cost %d × %d is too large", ErrRequest, p.Name, ru.Name, cost, n)
			}
			if m := ru.Algorithm.MaxCost; m > 0 && cost*n > m {
				return nil, nil, false, fmt.Errorf("%w: policy %q rule %q: a cost of %d, where algorithm %q takes at most %d a request (max_cost)", ErrRequest, p.Name, ru.Name, cost*n, ru.Algorithm.Name, m)
			}
			// The rule is written in place: a call's rule is a large value to copy.
			out = append(out, pending{policy: p, rule: ru, client: p.Clock == dsl.ClockClient, req: req})
			c := &out[len(out)-1].call
			if buf, err = e.callRuleInto(c, buf, p, ru, shard, r, cost*n); err != nil {
				return nil, nil, false, err
			}
			if ru.Algorithm.HasLease() {
				c.Lease = e.leasePrefix + strconv.FormatUint(e.leaseSeq.Add(1), 36)
			}
		}
		for _, u := range p.Unlimited {
			if unlimited && len(u.Replaces) == 0 {
				continue
			}
			ok := true
			if u.When != nil {
				var err error
				if ok, err = u.When.Bool(r); err != nil {
					return nil, nil, false, fmt.Errorf("%w: policy %q unlimited %q when: %v", ErrRequest, p.Name, u.Name, err)
				}
			}
			if ok {
				unlimited = true
				gone = append(gone, u.Replaces...)
			}
		}
	}
	return out, gone, unlimited, nil
}

// group is the rules of one script call: one clock, and in cluster mode one slot.
type group struct {
	idx    []int // indexes into the request's rules
	client bool
	slot   int
	skew   int64 // the largest ClockSkew of its rules' policies (client clocks)
}

// groups returns the calls rules make, appended to gs (room the caller provides, so that
// the usual single call allocates nothing): rules of one clock, and in cluster mode of
// one slot, share a call.
func (e *Engine) groups(rules []pending, gs []group) []group {
	for i := range rules {
		slot := 0
		if e.cluster {
			slot = Slot(rules[i].call.Key)
		}
		j := 0
		for j < len(gs) && (gs[j].client != rules[i].client || gs[j].slot != slot) {
			j++
		}
		if j == len(gs) {
			gs = append(gs, group{client: rules[i].client, slot: slot})
		}
		if g := &gs[j]; j == 0 && len(g.idx) == i && i < len(identity) {
			// The first group holds every rule so far: its indexes are a prefix of
			// identity, whose capacity ends there, so an append copies it.
			g.idx = identity[: i+1 : i+1]
		} else {
			g.idx = append(g.idx, i)
		}
		if rules[i].client {
			gs[j].skew = max(gs[j].skew, rules[i].policy.ClockSkew)
		}
	}
	return gs
}

// identity holds 0, 1, ... MaxRules-1: the indexes of a call of the first rules, shared
// and never written.
var identity = func() []int {
	s := make([]int, MaxRules)
	for i := range s {
		s[i] = i
	}
	return s
}()

// loader is a backend that can load a script ahead of its first call (an in-process one,
// where compiling the script would otherwise be paid inside a decision's deadline).
type loader interface{ load(*algorithms.Script) }

// decisionWith is a Decision and room for a request of up to as many rules as R holds:
// their results, and its first call and that call's rules (C), allocated together.
type decisionWith[R ruleRoom, C callRoom] struct {
	d     Decision
	rules R
	call  algorithms.Call
	calls C
}

// ruleRoom and callRoom are the room decisionWith holds.
type ruleRoom interface {
	[1]RuleResult | [2]RuleResult | [4]RuleResult
}

type callRoom interface {
	[1]algorithms.Rule | [2]algorithms.Rule | [4]algorithms.Rule
}

// newDecision returns an allowing Decision with n rules and room for its first call,
// whose Rules has room for n (none when n is large), in one allocation of its size when n
// is small.
func newDecision(n int) (*Decision, *algorithms.Call) {
	var d *Decision
	var first *algorithms.Call
	switch {
	case n == 1:
		b := &decisionWith[[1]RuleResult, [1]algorithms.Rule]{}
		d, first = &b.d, &b.call
		d.Rules, first.Rules = b.rules[:], b.calls[:]
	case n == 2:
		b := &decisionWith[[2]RuleResult, [2]algorithms.Rule]{}
		d, first = &b.d, &b.call
		d.Rules, first.Rules = b.rules[:], b.calls[:]
	case n <= 4:
		b := &decisionWith[[4]RuleResult, [4]algorithms.Rule]{}
		d, first = &b.d, &b.call
		d.Rules, first.Rules = b.rules[:n:n], b.calls[:n:n]
	default:
		d, first = &Decision{Rules: make([]RuleResult, n)}, &algorithms.Call{}
	}
	d.Allowed, d.Decider = true, -1
	return d, first
}

// MaxRules is the most rules one decision (Allow, AllowN, Peek, AllowAll) may check: a
// request, or the requests of one AllowAll together, that more rules apply to is refused
// with ErrRequest before anything is sent. A call's cost on the backend is per rule (each
// is a key read and written inside one atomic script that stalls every other client of
// that Redis while it runs), so this bounds one call's script time: 128 rules of four
// built-in algorithms, all charged, cost redis-server about 2ms (serve's
// BenchmarkLargestCall measures it; 256 cost 3.5-5ms).
const MaxRules = 128

func tooManyRules(n int) error {
	return fmt.Errorf("%w: %d rules apply, more than the %d one decision may check (engine.MaxRules)", ErrRequest, n, MaxRules)
}

// rulesOf returns the rules that apply to request r of n units, those replaced dropped,
// and whether an unlimited block names it. A request that more than MaxRules rules apply
// to is refused with ErrRequest, and so, when leases is not "", is one that a rule holding
// concurrency leases applies to: leases says what cannot be done with them.
func (e *Engine) rulesOf(r dsl.Request, n int64, leases string) ([]pending, bool, error) {
	return e.rulesInto(nil, r, n, leases)
}

// rulesInto is rulesOf, appending to out.
func (e *Engine) rulesInto(out []pending, r dsl.Request, n int64, leases string) ([]pending, bool, error) {
	rules, gone, unl, err := e.collect(r, n, 0, out, nil)
	if err != nil {
		return nil, false, err
	}
	if len(rules) > MaxRules {
		return nil, false, tooManyRules(len(rules))
	}
	rules = e.dropReplaced(rules, gone)
	if leases != "" {
		for _, p := range rules {
			if p.call.Algorithm.HasLease() {
				return nil, false, fmt.Errorf("%w: rule %s of policy %s holds concurrency leases, which %s", ErrRequest, p.rule.Name, p.policy.Name, leases)
			}
		}
	}
	return rules, unl, nil
}

func (e *Engine) decide(ctx context.Context, r dsl.Request, n int64) (*Decision, error) {
	var room [2]pending // most requests' rules, on the stack
	rules, unl, err := e.rulesInto(room[:0], r, n, "")
	if err != nil {
		return nil, err
	}
	var d *Decision
	leased := false
	if e.plan.leased && n > 0 {
		d, leased, err = e.leasedDecision(ctx, rules)
	}
	if !leased {
		d, err = e.run(ctx, rules, rules, nil, n > 0, 0, -1, false)
	}
	if d != nil {
		if unl {
			d.unlimited = unlimitedFirst
		}
		if d.Allowed {
			d.Granted = n
		}
	}
	return d, err
}

// result returns rule p's RuleResult before it is decided: allowed, its window, its cost.
func (e *Engine) result(p *pending) RuleResult {
	w, ok := e.plan.windows[p.rule]
	if !ok {
		w = window(&p.call)
	}
	var unit calendar.Unit
	if c := &p.call; c.Calendar {
		// The period around the engine's clock (algorithms.SpanAround).
		w, unit = time.Duration(c.Span[3]-c.Span[2])*time.Microsecond, p.rule.Calendar.Unit
	}
	return RuleResult{
		Policy: p.policy.Name, Rule: p.rule.Name, Algorithm: p.call.Algorithm.Name,
		Shadow: p.call.Shadow, Allowed: true, Key: p.call.Key, Window: w, Calendar: unit,
		Request: p.req, Cost: p.call.Cost, cost: p.call.Cost,
	}
}

// run decides the rules of one or more requests (evaluate), and reports the decision to
// the Decided hook.
func (e *Engine) run(ctx context.Context, all, uniq []pending, fan []int, charging bool, most, wait int64, keep bool) (*Decision, error) {
	d, err := e.evaluate(ctx, all, uniq, fan, charging, most, wait, keep)
	if err == nil {
		e.decided(d)
	}
	return d, err
}

// evaluate decides the rules of one or more requests: all, and the same with shared keys
// merged, uniq (fan maps all to uniq; nil when they are the same). charging: some rule
// is charged (not a peek). most > 0 makes it a partial admission of up to most units,
// each rule's cost being its cost per unit (AllowAtMost). wait >= 0 lets a denied request
// reserve the earliest slot within wait µs (Wait): the rules must then make one call.
// keep records in an allowed Decision every group's charge (Decision.charges, for Settle).
func (e *Engine) evaluate(ctx context.Context, all, uniq []pending, fan []int, charging bool, most, wait int64, keep bool) (*Decision, error) {
	d, first := newDecision(len(all))
	for i := range all {
		d.Rules[i] = e.result(&all[i])
		if fan != nil {
			d.Rules[i].cost = uniq[fan[i]].call.Cost
		}
		if most > 0 {
			d.Rules[i].Cost = all[i].call.Cost * most
		}
	}
	if len(all) == 0 {
		d.Source, d.Granted = FromNoRules, most
		return d, nil
	}
	// results holds a verdict per rule of uniq: d.Rules itself unless keys were merged.
	rules, results := uniq, d.Rules
	if fan != nil {
		results = make([]RuleResult, len(uniq))
	}
	// The clock, read when a deny cache or a client clock needs it.
	var sent time.Time
	if e.cache != nil || slices.ContainsFunc(rules, func(p pending) bool { return p.client }) {
		sent = e.clock()
	}
	if charging && e.cache != nil && wait < 0 {
		if res, ok := e.cache.lookup(rules, sent); ok {
			for i := range rules {
				if rules[i].call.Key == res.Key {
					res.Request, res.Cost = rules[i].req, rules[i].call.Cost
					break
				}
			}
			d.Rules = []RuleResult{res}
			d.Allowed, d.Decider, d.RetryAfter, d.Source = false, 0, res.RetryAfter, FromCache
			return d, nil
		}
	}
	var done []charged
	var grants []int64 // a partial admission's grant in each group of done
	units := most      // a partial admission's grant so far: the most the next group may grant
	var room [2]group
	groups := e.groups(rules, room[:0])
	if wait >= 0 && len(groups) > 1 {
		return nil, fmt.Errorf("%w: the request's rules need %d calls (hash slots of a cluster, or policies of both clocks), and a slot is reserved in one atomic call: give the policies a shard, and one clock", ErrRequest, len(groups))
	}
	for gi, g := range groups {
		var call *algorithms.Call
		if n := len(g.idx); gi == 0 && n <= len(first.Rules) {
			// The first call lives in the decision's allocation, its rules too.
			call = first
			call.Rules = call.Rules[:n:n]
		} else {
			call = &algorithms.Call{Rules: make([]algorithms.Rule, n)}
		}
		call.Op, call.Now = algorithms.OpCheck, algorithms.ServerTime
		if most > 0 {
			call.Op, call.Units = algorithms.OpMost, units
		}
		if wait >= 0 {
			call.Op, call.MaxDelay = algorithms.OpDelay, wait
		}
		if g.client {
			call.Now, call.Skew = sent.UnixMicro(), g.skew
		}
		for k, i := range g.idx {
			call.Rules[k] = rules[i].call
		}
		res, err := e.check(ctx, call, rules, g)
		if err != nil {
			e.refund(ctx, done)
			return nil, err
		}
		rep := res.rep
		if res.src != FromBackend {
			d.Source, d.Err = res.src, res.err
		}
		for k, i := range g.idx {
			rr := &results[i]
			rr.evaluated = true
			res := rep.Rules[k]
			rr.Allowed, rr.Limit, rr.Remaining = res.Allowed, res.Limit, res.Remaining
			rr.RetryAfter, rr.ResetAfter = usToDuration(res.RetryAfter), usToDuration(res.ResetAfter)
		}
		if !rep.Allowed {
			d.Allowed = false
			break
		}
		if most > 0 {
			units = rep.Granted
		}
		if wait >= 0 && rep.Delay > 0 {
			// A reservation: a wait that ends early gives it back (Wait).
			d.Delay = usToDuration(rep.Delay)
			d.reserved = &charged{call: algorithms.Call{Op: algorithms.OpRefund, Now: rep.Now, Rules: call.Rules}, local: res.src != FromBackend}
		}
		// What this group charged, and where: every rule on the backend, or after a
		// failure only the rules the local fallback ran. The last group's charge is never
		// refunded here (no group after it can deny), so only its leases are kept.
		if !keep && gi == len(groups)-1 && !slices.ContainsFunc(call.Rules, func(r algorithms.Rule) bool { return r.Algorithm.HasLease() }) {
			continue
		}
		c := charged{call: algorithms.Call{Op: algorithms.OpRefund, Now: rep.Now, Skew: call.Skew}, local: res.src != FromBackend, client: g.client}
		for k := range call.Rules {
			if res.src == FromBackend || res.onLocal[k] {
				r := call.Rules[k]
				if most > 0 {
					r.Cost *= units // what the group charged
				}
				c.call.Rules = append(c.call.Rules, r)
			}
		}
		if len(c.call.Rules) == 0 {
			continue
		}
		done = append(done, c)
		grants = append(grants, units)
		for _, r := range c.call.Rules {
			if r.Algorithm.HasLease() && r.Cost > 0 {
				d.held = append(d.held, heldLease{rule: r, now: rep.Now, local: c.local})
			}
		}
	}
	if fan != nil {
		for j := range d.Rules {
			r, rr := &results[fan[j]], &d.Rules[j]
			rr.evaluated, rr.Allowed, rr.Limit, rr.Remaining = r.evaluated, r.Allowed, r.Limit, r.Remaining
			rr.RetryAfter, rr.ResetAfter = r.RetryAfter, r.ResetAfter
		}
	}
	if d.Allowed && most > 0 {
		// A partial admission's groups each granted at most what the ones before did: the
		// earlier ones give back what they charged beyond the last grant.
		d.Granted = units
		var excess []charged
		for i, c := range done {
			if grants[i] == units {
				continue
			}
			x := charged{call: algorithms.Call{Op: algorithms.OpRefund, Now: c.call.Now}, local: c.local}
			for _, r := range c.call.Rules {
				r.Cost = r.Cost / grants[i] * (grants[i] - units)
				x.call.Rules = append(x.call.Rules, r)
			}
			excess = append(excess, x)
		}
		e.refund(ctx, excess)
	}
	if d.Allowed && keep {
		d.charges = done
	}
	if !d.Allowed {
		// Cluster compensation: groups already charged give their charge back.
		e.refund(ctx, done)
		d.held = nil
		d.deny()
		if e.cache != nil && charging && d.Source == FromBackend {
			for i := range d.Rules {
				rr := d.Rules[i]
				if !rr.Allowed && !rr.Shadow && rr.RetryAfter > 0 && rr.Algorithm != "concurrency" {
					e.cache.store(rr, rr.cost, sent)
				}
			}
		}
	}
	return d, nil
}

// deny makes d a denial: the rules of calls that never ran (slot groups after the denying
// one, a leased rule's request denied before its other rules) left out, Decider the first
// enforcing rule that denied, RetryAfter the longest of theirs.
func (d *Decision) deny() {
	d.Allowed = false
	d.Rules = slices.DeleteFunc(d.Rules, func(r RuleResult) bool { return !r.evaluated })
	for i := range d.Rules {
		rr := &d.Rules[i]
		if rr.Allowed || rr.Shadow {
			continue
		}
		if d.Decider < 0 {
			d.Decider = i
		}
		if rr.RetryAfter == Never || d.RetryAfter == Never {
			d.RetryAfter = Never
		} else {
			d.RetryAfter = max(d.RetryAfter, rr.RetryAfter)
		}
	}
}

func (e *Engine) breakerChanged(node string, from, to BreakerState) {
	if node == "" {
		e.log.Warn("rlctl: backend circuit "+to.String(), "from", from.String())
	} else {
		e.log.Warn("rlctl: backend circuit "+to.String(), "node", node, "from", from.String())
	}
	if e.hooks.Breaker != nil {
		e.hooks.Breaker(node, from, to)
	}
}

func (e *Engine) decided(d *Decision) {
	if e.hooks.Decided != nil {
		e.hooks.Decided(d)
	}
}

func usToDuration(us int64) time.Duration {
	if us < 0 {
		return Never
	}
	return time.Duration(us) * time.Microsecond
}

// window derives RuleResult.Window from the rule's algorithm's guarantee: its window, or
// for a rate the time to earn the burst back; 0 for a concurrency limit or none.
func window(r *algorithms.Rule) time.Duration {
	t, ok, err := r.Algorithm.TermsOf(r.Params)
	if !ok || err != nil || r.Algorithm.Guarantee.Shape == algorithms.ShapeInFlight {
		return 0
	}
	return time.Duration(min(t.Refill(), math.MaxInt64/1000)) * time.Microsecond
}

// shardOf returns the shard value policy p has for request r ("" without a shard).
func shardOf(p *dsl.Policy, r dsl.Request) (string, error) {
	if p.Shard == nil {
		return "", nil
	}
	s, err := p.Shard.String(r)
	if err != nil {
		return "", fmt.Errorf("%w: policy %q shard: %v", ErrRequest, p.Name, err)
	}
	return s, nil
}

// callRule returns rule ru of policy p as a call's rule of cost cost for request r, whose
// shard value is shard: its key as decisions render it (into buf, returned for reuse), its
// parameters, and its flags. The lease is the caller's.
func (e *Engine) callRule(buf []byte, p *dsl.Policy, ru *dsl.Rule, shard string, r dsl.Request, cost int64) (algorithms.Rule, []byte, error) {
	var c algorithms.Rule
	buf, err := e.callRuleInto(&c, buf, p, ru, shard, r, cost)
	return c, buf, err
}

// callRuleInto is callRule, writing the rule to c.
func (e *Engine) callRuleInto(c *algorithms.Rule, buf []byte, p *dsl.Policy, ru *dsl.Rule, shard string, r dsl.Request, cost int64) ([]byte, error) {
	key, err := ru.Key.String(r)
	if err != nil {
		return buf, fmt.Errorf("%w: policy %q rule %q key: %v", ErrRequest, p.Name, ru.Name, err)
	}
	wire, err := ru.Wire(r)
	if err != nil {
		return buf, fmt.Errorf("%w: policy %q: %v", ErrRequest, p.Name, err)
	}
	buf = renderKey(buf, p.Name, ru.Name, e.plan.tags[ru], p.Shard != nil, shard, key, ru.HasFurtherKeys())
	c.Key, c.Algorithm, c.Cost, c.Params = string(buf), ru.Algorithm, cost, wire
	c.Shadow, c.Box, c.Overridable, c.Lists = ru.Shadow, ru.Box, ru.Overridable, ru.Lists
	if s := e.plan.spans[ru]; s != nil {
		c.Calendar, c.Span = true, *s.around(e.clock())
	}
	if k := e.plan.compiled[ru]; k != nil {
		*c = c.Compile(k)
	}
	return buf, nil
}
