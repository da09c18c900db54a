package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/luahost"
)

// charged is a charge a decision made: the refund call that undoes it, and where it runs.
type charged struct {
	call   algorithms.Call
	local  bool // on the local fallback
	client bool // of a policy on client clocks
}

// checked is how one group's check call ended.
type checked struct {
	rep algorithms.Reply
	src Source
	err error // the failure behind a degraded decision
	// onLocal marks, in a degraded group, the rules the local fallback ran (and so
	// charged, when the group was allowed). nil when src is FromBackend.
	onLocal []bool
}

// check runs one group's call on the backend, or decides it by the policies' on_error when
// the backend fails or the breaker is open. The only error it returns is the caller's.
func (e *Engine) check(ctx context.Context, call *algorithms.Call, rules []pending, g group) (checked, error) {
	if err := ctx.Err(); err != nil {
		return checked{}, err
	}
	rep, class, err := e.call(ctx, call)
	if err != nil && !errors.Is(err, ErrBreakerOpen) {
		// The call may have run and taken its leases although nobody will see them.
		e.orphans.add(e, call)
	}
	switch {
	case err == nil:
		return checked{rep: rep, src: FromBackend}, nil
	case class == ClassCaller:
		return checked{}, err
	}
	return e.degrade(ctx, call, rules, g, class, err)
}

// orphans are lease acquisitions that may have reached the backend although their callers
// never saw them allowed: the call failed after it was sent (a connection killed after the
// server ran it), or its caller left. The engine releases them once the backend answers
// again, one after each answered call. Releasing a lease that was never taken removes nothing:
// a lease algorithm's refund must be idempotent. Counters have no such compensation: a call
// whose reply was lost stays counted, as a request that reached the server.
type orphans struct {
	pending  atomic.Int64
	mu       sync.Mutex
	calls    []algorithms.Call
	draining bool
}

// maxOrphans bounds the leases waiting for release; beyond it the oldest are left to
// expire at their rule's ttl.
const maxOrphans = 10_000

// add records the leases of call, a check call that failed or a refund that could not be
// sent.
func (o *orphans) add(e *Engine, call *algorithms.Call) {
	var leases []algorithms.Rule
	for _, r := range call.Rules {
		if r.Cost > 0 && r.Lease != "" && r.Algorithm.HasLease() {
			leases = append(leases, r)
		}
	}
	if len(leases) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.calls) >= maxOrphans {
		e.logs.log(e, "orphans", "rlctl: too many leases wait for release; the oldest will expire at their ttl")
		o.calls = o.calls[1:]
	}
	o.calls = append(o.calls, algorithms.Call{Op: algorithms.OpRefund, Now: algorithms.ServerTime, Rules: leases})
	o.pending.Store(int64(len(o.calls)))
}

// drain releases the oldest recorded lease acquisition, if any, and no release runs
// already. It runs after a call the backend answered, on that caller's goroutine: one
// release per answered call keeps the cost of an outage's aftermath spread over calls, and
// keeps the engine deterministic on a virtual clock.
func (o *orphans) drain(e *Engine) {
	if o.pending.Load() == 0 {
		return
	}
	o.mu.Lock()
	if o.draining || len(o.calls) == 0 {
		o.mu.Unlock()
		return
	}
	o.draining = true
	c := o.calls[0]
	o.calls = o.calls[1:]
	o.pending.Store(int64(len(o.calls)))
	o.mu.Unlock()
	_, _, err := e.call(context.Background(), &c)
	o.mu.Lock()
	if err != nil {
		o.calls = append([]algorithms.Call{c}, o.calls...)
		o.pending.Store(int64(len(o.calls)))
	}
	o.draining = false
	o.mu.Unlock()
}

// call runs c on the backend through the breaker and within the decision deadline, and
// returns its reply or the class of its failure. On a Redis Cluster a failure that a
// failover or a moved slot explains refreshes the client's slot map (slotMap), and a call
// that a node refused without running it (remedy resend) is sent once more, to the slot's
// owner in the refreshed map, through that owner's breaker.
func (e *Engine) call(ctx context.Context, c *algorithms.Call) (algorithms.Reply, Class, error) {
	caller := ctx
	if err := ctx.Err(); err != nil {
		return algorithms.Reply{}, ClassCaller, err
	}
	_, inProcess := e.backend.(interface{ inProcess() })
	var sent int64
	if !inProcess && e.timeout > 0 {
		var wait time.Duration
		var cancel context.CancelFunc
		ctx, wait, cancel = e.bound(ctx)
		if cancel != nil {
			defer cancel()
		}
		sent = e.clock().UnixMicro()
		if c.Op != algorithms.OpRefund && c.Op != algorithms.OpOwe { // a late one is still owed
			c.Deadline = e.server.deadline(sent, wait.Microseconds())
		}
	}
	slots := e.slotMap()
	for resent := false; ; resent = true {
		br, node := e.breakerFor(ctx, c)
		t, ok := br.acquire(e.clock)
		if !ok {
			if node {
				// The node may have lost its slots in a failover: the traffic that would
				// see it never reaches it while its breaker is open.
				slots.stale(ctx, e.clock(), false)
			}
			return algorithms.Reply{}, ClassBackend, ErrBreakerOpen
		}
		// The clock times a call only for the hook (the breaker reads it when it must).
		var start time.Time
		if e.hooks.Called != nil {
			start = e.clock()
		}
		rep, err := e.exec(ctx, e.backend, c)
		if e.hooks.Called != nil {
			e.hooks.Called(CallStats{Op: string(c.Op), Rules: len(c.Rules), Duration: e.clock().Sub(start), Err: err})
		}
		if err == nil {
			br.resolve(t, succeeded, e.clock)
			if sent != 0 && rep.Server > 0 {
				e.server.observe(sent, e.clock().UnixMicro(), rep.Server)
			}
			e.orphans.drain(e)
			return rep, ClassBackend, nil
		}
		class := classify(caller, err)
		br.resolve(t, outcomeOf(class, err), e.clock)
		switch class {
		case ClassScript:
			err = fmt.Errorf("%w: %w", ErrScript, err)
		case ClassBackend:
			// The server refused the call as late while the engine still waited: the
			// clocks moved, the samples are stale, and the reply says where the server's
			// is now.
			if server, ok := algorithms.DeadlineServerTime(err); ok && server > 0 && sent != 0 {
				e.server.restart(sent, e.clock().UnixMicro(), server)
			}
			again := !resent && remedyOf(err) == resend && ctx.Err() == nil
			if slots != nil && (again || !isReply(err) && !errors.Is(err, errLoadWait)) {
				slots.stale(ctx, e.clock(), again)
				if again {
					continue
				}
			}
		}
		return algorithms.Reply{}, class, err
	}
}

// slotMap returns the slot map of the engine's Redis Cluster backend, nil for any other.
func (e *Engine) slotMap() *slotMap {
	if r, ok := e.backend.(*Redis); ok {
		return r.slots
	}
	return nil
}

// bound returns the context a backend call runs under, ending at the decision deadline or
// the caller's, whichever comes first, and how long that is from now. cancel, when not
// nil, must be called when the call ends. A call creates no context or timer of its own
// when the caller's deadline comes first (its context is used as it is), nor when the
// caller's context can never end (context.Background or TODO): those calls share a
// context per millisecond, ending the decision timeout after it, rounded up to the next
// millisecond.
func (e *Engine) bound(ctx context.Context) (context.Context, time.Duration, context.CancelFunc) {
	now := time.Now()
	if dl, ok := ctx.Deadline(); ok && dl.Sub(now) <= e.timeout {
		return ctx, dl.Sub(now), nil
	}
	if ctx == context.Background() || ctx == context.TODO() {
		want := now.Add(e.timeout)
		if d := e.shared.Load(); d != nil && !d.at.Before(want) && d.at.Sub(want) <= time.Millisecond {
			return d.ctx, d.at.Sub(now), nil
		}
		at := want.Truncate(time.Millisecond).Add(time.Millisecond)
		d := &sharedDeadline{at: at}
		d.ctx, d.cancel = context.WithDeadline(context.Background(), at)
		e.shared.Store(d)
		return d.ctx, at.Sub(now), nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	return ctx, e.timeout, cancel
}

// sharedDeadline is a context that the calls of one millisecond share (see bound). Its
// timer ends it at its deadline; cancel is kept for that timer's sake and never called
// early, since other calls may still use the context.
type sharedDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc
	at     time.Time
}

// breakerFor returns the breaker of the node c goes to, and whether it is a node's: on a
// Redis Cluster each primary has its own, keyed by the address that the client's slot map
// gives for the slot, so one node down does not open the circuit for the others, nor do
// the others' successes keep it closed, and a slot that a failover moved to another node
// is asked through that node's breaker as soon as the map knows it; elsewhere (and while
// the cluster's slot map is unknown) the engine's one breaker.
func (e *Engine) breakerFor(ctx context.Context, c *algorithms.Call) (*breaker, bool) {
	if e.clusterClient == nil || len(c.Rules) == 0 {
		return &e.br, false
	}
	node, err := e.clusterClient.MasterForKey(ctx, c.Rules[0].Key)
	if err != nil {
		return &e.br, false
	}
	addr := node.Options().Addr
	if b, ok := e.nodes.Load(addr); ok {
		return b.(*breaker), true
	}
	b := &breaker{threshold: e.br.threshold, cooldown: e.br.cooldown}
	b.changed = func(from, to BreakerState) { e.breakerChanged(addr, from, to) }
	actual, _ := e.nodes.LoadOrStore(addr, b)
	return actual.(*breaker), true
}

// exec sends c to b and decodes the reply. A reply that does not decode is an
// algorithms.ErrReply error.
func (e *Engine) exec(ctx context.Context, b Backend, c *algorithms.Call) (algorithms.Reply, error) {
	var v any
	var err error
	if nb, ok := b.(*Native); ok {
		rep, decided, err := nb.store.Decide(c)
		if decided {
			if e.hooks.Evicted != nil {
				if n := nb.evicted(); n > 0 {
					e.hooks.Evicted(n)
				}
			}
			return rep, err
		}
	}
	if r, ok := b.(*Redis); ok && len(c.Rules) > 0 {
		args, aerr := c.AppendArgs(prepare(c))
		if aerr != nil {
			return algorithms.Reply{}, fmt.Errorf("%w: %v", ErrRequest, aerr)
		}
		v, err = r.call(ctx, e.plan.script, e.plan.scriptArgs, c, args)
	} else {
		argv, aerr := c.Argv()
		if aerr != nil {
			return algorithms.Reply{}, fmt.Errorf("%w: %v", ErrRequest, aerr)
		}
		v, err = b.Eval(ctx, e.plan.script, c.Keys(), argv)
	}
	if e.hooks.Evicted != nil {
		if ev, ok := b.(interface{ evicted() uint64 }); ok {
			if n := ev.evicted(); n > 0 {
				e.hooks.Evicted(n)
			}
		}
	}
	if err != nil {
		return algorithms.Reply{}, err
	}
	if c.Op == algorithms.OpRefund {
		return algorithms.Reply{Allowed: true}, nil
	}
	return algorithms.DecodeCallReply(c, v)
}

// degrade decides a group whose backend call failed with err of class. Each policy in the
// group decides by its on_error: "local" rules run on the in-process fallback, "allow"
// rules allow, "deny" rules deny with the breaker's cooldown as retry-after. A local
// fallback that fails too (the same script error) allows, and says so at error level.
func (e *Engine) degrade(ctx context.Context, call *algorithms.Call, rules []pending, g group, class Class, ferr error) (checked, error) {
	res := checked{
		rep:     algorithms.Reply{Allowed: true, Rules: make([]algorithms.RuleResult, len(call.Rules)), Now: e.clock().UnixMicro()},
		src:     FromFailOpen,
		err:     ferr,
		onLocal: make([]bool, len(call.Rules)),
	}
	rep := &res.rep
	rep.Granted = call.Units // what the policies' fail-open grants; the local fallback's grant replaces it
	var localIdx []int
	for k, i := range g.idx {
		p := rules[i].policy
		mode := p.OnError
		if mode == "" {
			mode = dsl.OnErrorAllow
		}
		if k == 0 || rules[g.idx[k-1]].policy != p {
			e.logFailure(p.Name, mode, class, ferr)
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
			res.src = FromFailDeny
		default:
			rep.Rules[k] = algorithms.RuleResult{Allowed: true}
		}
	}
	if len(localIdx) > 0 {
		e.shareLocal(call, rules, g, localIdx) // localshare.go
		lc := algorithms.Call{Op: call.Op, Now: call.Now, Skew: call.Skew, Units: call.Units, Rules: make([]algorithms.Rule, len(localIdx))}
		for j, k := range localIdx {
			lc.Rules[j] = call.Rules[k]
		}
		lrep, err := e.exec(context.WithoutCancel(ctx), e.localBackend(), &lc)
		if err != nil {
			e.logs.log(e, "local", "rlctl: the local fallback failed too; allowing", "err", err)
			for _, k := range localIdx {
				rep.Rules[k] = algorithms.RuleResult{Allowed: true}
			}
		} else {
			for j, k := range localIdx {
				rep.Rules[k] = lrep.Rules[j]
				res.onLocal[k] = true
			}
			if !lrep.Allowed {
				rep.Allowed = false
			}
			rep.Now, rep.Granted = lrep.Now, lrep.Granted
			if res.src == FromFailOpen {
				res.src = FromLocal
			}
		}
	}
	if !rep.Allowed {
		rep.Granted = 0
		for k := range rep.Rules {
			if !rep.Rules[k].Allowed && !call.Rules[k].Shadow {
				rep.Decider = k + 1
				break
			}
		}
	}
	return res, nil
}

// refund gives back charges of a request that ends without them (a later slot group
// denied, or the caller left). It does not wait for the caller.
func (e *Engine) refund(ctx context.Context, done []charged) {
	ctx = context.WithoutCancel(ctx)
	for _, c := range done {
		var err error
		if c.local {
			_, err = e.exec(ctx, e.localBackend(), &c.call)
		} else if _, _, err = e.call(ctx, &c.call); err != nil {
			e.orphans.add(e, &c.call) // leases are released once the backend is back
		}
		if err != nil {
			e.logs.log(e, "refund", "rlctl: a refund failed; a counter keeps the charge until its key expires", "err", err)
		}
	}
}

// Release gives back the concurrency leases an allowed decision holds. It is idempotent
// and does not depend on ctx being live: a request whose client went away still gives
// its leases back (ctx's values are kept, its cancellation is not). A release goes through
// the breaker and the decision deadline like any call; one that cannot reach the backend
// is retried once the backend answers again (and the lease ends at its rule's ttl at the
// latest). A decision made without the backend holds no backend lease. The error is
// always nil; it is kept for callers that check it.
func (e *Engine) Release(ctx context.Context, d *Decision) error {
	held := d.held
	d.held = nil
	var done []charged
	for _, h := range held {
		done = append(done, charged{call: algorithms.Call{Op: algorithms.OpRefund, Now: h.now, Rules: []algorithms.Rule{h.rule}}, local: h.local})
	}
	e.refund(ctx, done)
	return nil
}

func (e *Engine) localBackend() Backend {
	e.loadLocal.Do(func() {
		if e.local == nil {
			opts := append([]luahost.Option{luahost.WithClock(clockFunc(e.clock))}, e.localOpts...)
			l := NewNative(luahost.New(opts...), e.nativeOpts...)
			l.local.load(e.plan.Script())
			e.local = l
		}
	})
	return e.local
}

type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// logFailure logs a degraded decision: script errors at error level (a bug to fix),
// backend failures at warning level.
func (e *Engine) logFailure(policy, mode string, class Class, err error) {
	if class == ClassScript {
		// The error names lines of the assembled script; say which file they came from.
		e.logs.log(e, class.String()+"/"+policy, "rlctl: the engine script failed (a plugin or plan bug); deciding by on_error",
			"policy", policy, "mode", mode, "err", e.plan.script.Locate(err.Error()))
		return
	}
	e.logs.log(e, class.String()+"/"+policy, "rlctl: backend failed; deciding by on_error", "policy", policy, "mode", mode, "err", err)
}

// logLimiter logs each kind of message at most once a second (engine clock), with the
// number of times it was suppressed since.
type logLimiter struct {
	mu   sync.Mutex
	last map[string]logEntry
}

type logEntry struct {
	at         time.Time
	suppressed int
}

func (l *logLimiter) log(e *Engine, kind, msg string, args ...any) {
	now := e.clock()
	l.mu.Lock()
	if l.last == nil {
		l.last = map[string]logEntry{}
	}
	ent, seen := l.last[kind]
	if seen && now.Sub(ent.at) < time.Second && now.Sub(ent.at) >= 0 {
		ent.suppressed++
		l.last[kind] = ent
		l.mu.Unlock()
		return
	}
	l.last[kind] = logEntry{at: now}
	l.mu.Unlock()
	if ent.suppressed > 0 {
		args = append(args, "suppressed", ent.suppressed)
	}
	level := e.log.Warn
	if kind == "local" || len(kind) > 7 && kind[:7] == "script/" {
		level = e.log.Error
	}
	level(msg, args...)
}

// serverClock places deadlines on the backend's clock. A call sent at t0 and answered at
// t1 (engine clock) with the server's clock T gives the sample T - t1, a lower bound of the
// offset between the clocks, tightest for the call with the shortest round trip. The
// deadline is the caller's give-up instant plus the lower bound of the recent call with the
// shortest round trip: never later than the give-up instant on the server's clock, so a
// call the server runs after it is one nobody waits for; and a call it runs before it
// answers in time unless the answer travels slower than that fastest call's did.
type serverClock struct {
	mu      sync.Mutex
	samples [8]clockSample
	n, next int
}

type clockSample struct{ offset, rtt int64 }

func (c *serverClock) observe(sent, received, server int64) {
	c.mu.Lock()
	c.samples[c.next] = clockSample{offset: server - received, rtt: max(received-sent, 0)}
	c.next = (c.next + 1) % len(c.samples)
	c.n = min(c.n+1, len(c.samples))
	c.mu.Unlock()
}

// restart forgets every sample but this one.
func (c *serverClock) restart(sent, received, server int64) {
	c.mu.Lock()
	c.n, c.next = 0, 0
	c.mu.Unlock()
	c.observe(sent, received, server)
}

// deadline returns the server-clock instant wait µs after sent (engine clock), or 0 while
// no sample is known (the first calls of an engine carry no deadline).
func (c *serverClock) deadline(sent, wait int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		return 0
	}
	best := c.samples[0]
	for _, s := range c.samples[1:c.n] {
		if s.rtt < best.rtt {
			best = s
		}
	}
	if d := sent + wait + best.offset; d > 0 {
		return d
	}
	return 0
}
