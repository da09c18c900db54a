package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/luahost"
)

// Engine decides requests against a Plan. It is safe for concurrent use.
type Engine struct {
	plan    *Plan
	backend Backend
	local   Backend // the on_error = "local" fallback
	cluster bool
	timeout time.Duration
	clock   func() time.Time
	log     *slog.Logger
	hooks   Hooks
	br      breaker
	cache   *denyCache

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
	// ("allow", "deny" or "local").
	Degraded func(policy, mode string, err error)
}

// Option configures an Engine.
type Option func(*Engine)

// WithTimeout sets the decision deadline for a backend call (default 50ms): a hung Redis
// never holds a caller longer; a call past it counts as a backend failure. It does not apply
// to the in-process Local backend, which cannot hang on a network and whose runaway
// scripts luahost's own script timeout stops.
func WithTimeout(d time.Duration) Option { return func(e *Engine) { e.timeout = d } }

// WithClock sets the clock of client-clock policies, the deny cache and the breaker
// (default time.Now). Server-clock policies read Redis TIME (or the local host's clock).
func WithClock(now func() time.Time) Option { return func(e *Engine) { e.clock = now } }

// WithLogger sets where degraded decisions are logged (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.log = l } }

// WithHooks sets metric hooks.
func WithHooks(h Hooks) Option { return func(e *Engine) { e.hooks = h } }

// WithBreaker opens the circuit after failures consecutive backend failures: for cooldown
// no request reaches the backend, and policies decide by their on_error mode; then one
// request probes. Default: 5 failures, 1s.
func WithBreaker(failures int, cooldown time.Duration) Option {
	return func(e *Engine) { e.br.threshold, e.br.cooldown = int64(max(failures, 1)), cooldown }
}

// WithDenyCache lets the engine answer, without a backend call, a request that an
// enforcing rule denied within its retry-after: same rule and key, cost at least the
// denied one. It is sound because retry-after is (nothing for that key passes earlier), but
// it ignores refunds, Reset and parameter changes during that time. size bounds the
// entries; 0 disables it (the default).
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
		log:     slog.New(slog.DiscardHandler),
		br:      breaker{threshold: 5, cooldown: time.Second},
	}
	if r, ok := backend.(*Redis); ok {
		_, e.cluster = r.c.(*redis.ClusterClient)
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	e.leasePrefix = hex.EncodeToString(id[:]) + "-"
	for _, o := range opts {
		o(e)
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
)

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

	held []heldLease // concurrency leases taken, for Release
}

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
	// windowed algorithm, the time a bucket takes to refill from empty
	// (capacity × period / rate), 0 for concurrency.
	Window time.Duration
	Key    string // the Redis key

	evaluated bool
	cost      int64 // what this request asked of the rule
}

type heldLease struct {
	rule  algorithms.Rule
	now   int64
	local bool
}

// Errors of bad requests. Backend failures are not errors: policies decide by on_error.
var (
	// ErrRequest wraps a failure to evaluate a policy expression for a request.
	ErrRequest = errors.New("engine: bad request")
	// ErrScript wraps an error reply of the engine script: a bug or a plan/server mismatch.
	ErrScript = errors.New("engine: script error")
)

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

// Peek reports what Allow would decide without charging anything.
func (e *Engine) Peek(ctx context.Context, r dsl.Request) (*Decision, error) {
	return e.decide(ctx, r, 0)
}

// Release gives back the concurrency leases an allowed decision holds. It is idempotent.
func (e *Engine) Release(ctx context.Context, d *Decision) error {
	held := d.held
	d.held = nil
	var errs []error
	for _, h := range held {
		c := algorithms.Call{Op: algorithms.OpRefund, Now: h.now, Rules: []algorithms.Rule{h.rule}}
		b := e.backend
		if h.local {
			b = e.localBackend()
		}
		if _, err := e.run(ctx, b, &c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Reset deletes the state of every rule that applies to r, as if it had never been seen.
func (e *Engine) Reset(ctx context.Context, r dsl.Request) error {
	rules, err := e.collect(r, 0)
	if err != nil {
		return err
	}
	keys := make([]string, len(rules))
	for i := range rules {
		keys[i] = rules[i].call.Key
		e.cache.forget(keys[i])
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	return e.backend.Del(ctx, keys...)
}

// pending is one rule of a request, ready for the wire.
type pending struct {
	policy *dsl.Policy
	rule   *dsl.Rule
	call   algorithms.Rule
	client bool // client clock
}

// collect evaluates the plan for r: every applicable rule with its key, cost and params.
func (e *Engine) collect(r dsl.Request, n int64) ([]pending, error) {
	var out []pending
	var buf []byte
	for _, p := range e.plan.policies {
		if p.Match != nil {
			ok, err := p.Match.Bool(r)
			if err != nil {
				return nil, fmt.Errorf("%w: policy %q match: %v", ErrRequest, p.Name, err)
			}
			if !ok {
				continue
			}
		}
		var shard string
		if p.Shard != nil {
			s, err := p.Shard.String(r)
			if err != nil {
				return nil, fmt.Errorf("%w: policy %q shard: %v", ErrRequest, p.Name, err)
			}
			shard = s
		}
		for _, ru := range p.Rules {
			if ru.When != nil {
				ok, err := ru.When.Bool(r)
				if err != nil {
					return nil, fmt.Errorf("%w: policy %q rule %q when: %v", ErrRequest, p.Name, ru.Name, err)
				}
				if !ok {
					continue
				}
			}
			key, err := ru.Key.String(r)
			if err != nil {
				return nil, fmt.Errorf("%w: policy %q rule %q key: %v", ErrRequest, p.Name, ru.Name, err)
			}
			cost := int64(1)
			if ru.Cost != nil {
				if cost, err = ru.Cost.Int(r); err != nil {
					return nil, fmt.Errorf("%w: policy %q rule %q cost: %v", ErrRequest, p.Name, ru.Name, err)
				}
				if cost < 0 {
					return nil, fmt.Errorf("%w: policy %q rule %q: negative cost %d", ErrRequest, p.Name, ru.Name, cost)
				}
			}
			if n != 0 && cost > algorithms.MaxInt/n {
				return nil, fmt.Errorf("%w: policy %q rule %q: cost %d × %d is too large", ErrRequest, p.Name, ru.Name, cost, n)
			}
			wire, err := ru.Wire(r)
			if err != nil {
				return nil, fmt.Errorf("%w: policy %q: %v", ErrRequest, p.Name, err)
			}
			buf = renderKey(buf, p.Name, ru.Name, p.Shard != nil, shard, key)
			c := algorithms.Rule{Key: string(buf), Algorithm: ru.Algorithm, Cost: cost * n, Shadow: ru.Shadow, Params: wire}
			if hasLease(ru.Algorithm) {
				c.Lease = e.leasePrefix + strconv.FormatUint(e.leaseSeq.Add(1), 36)
			}
			out = append(out, pending{policy: p, rule: ru, call: c, client: p.Clock == dsl.ClockClient})
		}
	}
	return out, nil
}

func hasLease(a *algorithms.Algorithm) bool {
	for _, p := range a.Params {
		if p.Kind == algorithms.Lease {
			return true
		}
	}
	return false
}

// group is the rules of one script call: one clock, and in cluster mode one slot.
type group struct {
	idx    []int // indexes into the request's rules
	client bool
	slot   int
}

func (e *Engine) groups(rules []pending) []group {
	var gs []group
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
		gs[j].idx = append(gs[j].idx, i)
	}
	return gs
}

func (e *Engine) decide(ctx context.Context, r dsl.Request, n int64) (*Decision, error) {
	rules, err := e.collect(r, n)
	if err != nil {
		return nil, err
	}
	d := &Decision{Allowed: true, Decider: -1, Rules: make([]RuleResult, len(rules))}
	for i := range rules {
		d.Rules[i] = RuleResult{
			Policy: rules[i].policy.Name, Rule: rules[i].rule.Name, Algorithm: rules[i].call.Algorithm.Name,
			Shadow: rules[i].call.Shadow, Allowed: true, Key: rules[i].call.Key, Window: window(&rules[i].call),
			cost: rules[i].call.Cost,
		}
	}
	if len(rules) == 0 {
		d.Source = FromNoRules
		e.decided(d)
		return d, nil
	}
	sent := e.clock()
	if n > 0 && e.cache != nil {
		if res, ok := e.cache.lookup(rules, sent); ok {
			d.Rules = []RuleResult{res}
			d.Allowed, d.Decider, d.RetryAfter, d.Source = false, 0, res.RetryAfter, FromCache
			e.decided(d)
			return d, nil
		}
	}
	type charged struct {
		call  algorithms.Call
		local bool
	}
	var done []charged
	for _, g := range e.groups(rules) {
		call := algorithms.Call{Op: algorithms.OpCheck, Now: algorithms.ServerTime, Rules: make([]algorithms.Rule, len(g.idx))}
		if g.client {
			call.Now = sent.UnixMicro()
		}
		for k, i := range g.idx {
			call.Rules[k] = rules[i].call
		}
		rep, src, ferr, err := e.check(ctx, &call, rules, g)
		if err != nil {
			return nil, err
		}
		if src != FromBackend {
			d.Source, d.Err = src, ferr
		}
		for k, i := range g.idx {
			d.Rules[i].evaluated = true
			rr := &d.Rules[i]
			res := rep.Rules[k]
			rr.Allowed, rr.Limit, rr.Remaining = res.Allowed, res.Limit, res.Remaining
			rr.RetryAfter, rr.ResetAfter = usToDuration(res.RetryAfter), usToDuration(res.ResetAfter)
		}
		if !rep.Allowed {
			d.Allowed = false
			break
		}
		local := src == FromLocal
		done = append(done, charged{call: call, local: local})
		for k, i := range g.idx {
			if hasLease(rules[i].call.Algorithm) && call.Rules[k].Cost > 0 {
				d.held = append(d.held, heldLease{rule: call.Rules[k], now: rep.Now, local: local})
			}
		}
		done[len(done)-1].call.Now = rep.Now
	}
	if !d.Allowed {
		// Cluster compensation: groups already charged give their charge back.
		for _, c := range done {
			c.call.Op = algorithms.OpRefund
			b := e.backend
			if c.local {
				b = e.localBackend()
			}
			if _, err := e.run(context.WithoutCancel(ctx), b, &c.call); err != nil {
				e.log.Warn("rlctl: refund after a denied slot group failed", "err", err)
			}
		}
		d.held = nil
		// Slot groups after the denying one never ran: leave their rules out.
		d.Rules = slices.DeleteFunc(d.Rules, func(r RuleResult) bool { return !r.evaluated })
		for i := range d.Rules {
			rr := &d.Rules[i]
			if !rr.Allowed && !rr.Shadow {
				if d.Decider < 0 {
					d.Decider = i
				}
				switch {
				case rr.RetryAfter == Never || d.RetryAfter == Never:
					d.RetryAfter = Never
				default:
					d.RetryAfter = max(d.RetryAfter, rr.RetryAfter)
				}
			}
		}
		if e.cache != nil && n > 0 && d.Source == FromBackend {
			for i := range d.Rules {
				rr := d.Rules[i]
				if !rr.Allowed && !rr.Shadow && rr.RetryAfter > 0 && rr.Algorithm != "concurrency" {
					e.cache.store(rr, rr.cost, sent)
				}
			}
		}
	}
	e.decided(d)
	return d, nil
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

// check runs one group's call on the backend, or decides it by the policies' on_error when
// the backend fails or the breaker is open.
func (e *Engine) check(ctx context.Context, call *algorithms.Call, rules []pending, g group) (algorithms.Reply, Source, error, error) {
	var ferr error
	if e.br.allow(e.clock()) {
		rep, err := e.run(ctx, e.backend, call)
		if err == nil {
			e.br.success()
			return rep, FromBackend, nil, nil
		}
		if errors.Is(err, ErrScript) {
			return algorithms.Reply{}, 0, nil, err
		}
		e.br.failure(e.clock())
		ferr = err
	} else {
		ferr = errBreakerOpen
	}
	return e.degrade(ctx, call, rules, g, ferr)
}

var errBreakerOpen = errors.New("engine: backend circuit open")

// degrade decides a group whose backend failed. Each policy in the group decides by its
// on_error: "local" rules run on the in-process fallback, "allow" rules allow, "deny" rules
// deny with the breaker's cooldown as retry-after.
func (e *Engine) degrade(ctx context.Context, call *algorithms.Call, rules []pending, g group, ferr error) (algorithms.Reply, Source, error, error) {
	rep := algorithms.Reply{Allowed: true, Rules: make([]algorithms.RuleResult, len(call.Rules)), Now: e.clock().UnixMicro()}
	src := FromFailOpen
	var localIdx []int
	seen := map[string]bool{}
	for k, i := range g.idx {
		p := rules[i].policy
		mode := p.OnError
		if mode == "" {
			mode = dsl.OnErrorAllow
		}
		if !seen[p.Name] {
			seen[p.Name] = true
			e.log.Warn("rlctl: backend failed; deciding by on_error", "policy", p.Name, "mode", mode, "err", ferr)
			if e.hooks.Degraded != nil {
				e.hooks.Degraded(p.Name, mode, ferr)
			}
		}
		switch mode {
		case dsl.OnErrorLocal:
			localIdx = append(localIdx, k)
		case dsl.OnErrorDeny:
			rep.Rules[k] = algorithms.RuleResult{RetryAfter: e.br.cooldown.Microseconds()}
			if !call.Rules[k].Shadow {
				rep.Allowed = false
			}
			src = FromFailDeny
		default:
			rep.Rules[k] = algorithms.RuleResult{Allowed: true}
		}
	}
	if len(localIdx) > 0 {
		lc := algorithms.Call{Op: call.Op, Now: call.Now, Rules: make([]algorithms.Rule, len(localIdx))}
		for j, k := range localIdx {
			lc.Rules[j] = call.Rules[k]
		}
		lrep, err := e.run(ctx, e.localBackend(), &lc)
		if err != nil {
			return algorithms.Reply{}, 0, nil, err
		}
		for j, k := range localIdx {
			rep.Rules[k] = lrep.Rules[j]
		}
		if !lrep.Allowed {
			rep.Allowed = false
		}
		rep.Now = lrep.Now
		if src == FromFailOpen {
			src = FromLocal
		}
	}
	if !rep.Allowed {
		for k := range rep.Rules {
			if !rep.Rules[k].Allowed && !call.Rules[k].Shadow {
				rep.Decider = k + 1
				break
			}
		}
	}
	return rep, src, ferr, nil
}

func (e *Engine) localBackend() Backend {
	e.loadLocal.Do(func() {
		if e.local == nil {
			e.local = NewLocal(luahost.New(luahost.WithClock(clockFunc(e.clock))))
		}
	})
	return e.local
}

type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// run sends one call to b within the decision deadline and decodes the reply. Reply errors
// of the script are ErrScript; anything else is a backend failure.
func (e *Engine) run(ctx context.Context, b Backend, c *algorithms.Call) (algorithms.Reply, error) {
	argv, err := c.Argv()
	if err != nil {
		return algorithms.Reply{}, fmt.Errorf("%w: %v", ErrRequest, err)
	}
	if _, inProcess := b.(*Local); e.timeout > 0 && !inProcess {
		// A caller's own deadline that comes first already bounds the call: no timer needed.
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > e.timeout {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, e.timeout)
			defer cancel()
		}
	}
	v, err := b.Eval(ctx, e.plan.script, c.Keys(), argv)
	if err != nil {
		if isScriptError(err) {
			return algorithms.Reply{}, fmt.Errorf("%w: %v", ErrScript, err)
		}
		return algorithms.Reply{}, err
	}
	if c.Op == algorithms.OpRefund {
		return algorithms.Reply{Allowed: true}, nil
	}
	rep, err := algorithms.DecodeReply(v, len(c.Rules))
	if err != nil {
		return algorithms.Reply{}, fmt.Errorf("%w: %v", ErrScript, err)
	}
	return rep, nil
}

// isScriptError reports whether err is an error reply of the script itself, as opposed to
// a server that cannot run it now (LOADING, BUSY, cluster and replica states).
func isScriptError(err error) bool {
	var re interface{ RedisError() }
	if !errors.As(err, &re) {
		return false
	}
	msg := err.Error()
	for _, transient := range []string{"LOADING", "BUSY", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "READONLY", "MOVED", "ASK", "NOREPLICAS"} {
		if strings.HasPrefix(msg, transient) {
			return false
		}
	}
	return true
}

// window derives RuleResult.Window from a rule's wire parameters: a Duration parameter
// named "window", or for a Rate the time to refill the rule's Capacity parameter.
func window(r *algorithms.Rule) time.Duration {
	var capacity, amount, period int64
	i := 0
	for _, p := range r.Algorithm.Params {
		switch p.Kind {
		case algorithms.Duration:
			if p.Name == "window" {
				return time.Duration(r.Params[i]) * time.Microsecond
			}
		case algorithms.Count:
			if p.Capacity {
				capacity = r.Params[i]
			}
		case algorithms.Rate:
			amount, period = r.Params[i], r.Params[i+1]
			i++
		}
		i++
	}
	if amount == 0 || capacity == 0 {
		return 0
	}
	if period > (1<<62)/capacity {
		return 0
	}
	return time.Duration((capacity*period+amount-1)/amount) * time.Microsecond
}
