package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/luahost"
)

// charged is a charge a decision made: the refund call that undoes it, and where it runs.
type charged struct {
	call  algorithms.Call
	local bool // on the local fallback
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
	rep, class, err := e.call(ctx, call)
	switch {
	case err == nil:
		return checked{rep: rep, src: FromBackend}, nil
	case class == ClassCaller:
		return checked{}, err
	}
	return e.degrade(ctx, call, rules, g, class, err)
}

// call runs c on the backend through the breaker and within the decision deadline, and
// returns its reply or the class of its failure.
func (e *Engine) call(ctx context.Context, c *algorithms.Call) (algorithms.Reply, Class, error) {
	caller := ctx
	if err := ctx.Err(); err != nil {
		return algorithms.Reply{}, ClassCaller, err
	}
	t, ok := e.br.acquire(e.clock())
	if !ok {
		return algorithms.Reply{}, ClassBackend, ErrBreakerOpen
	}
	_, inProcess := e.backend.(interface{ inProcess() })
	var sent int64
	if !inProcess && e.timeout > 0 {
		wait := e.timeout
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
		sent = e.clock().UnixMicro()
		if c.Op == algorithms.OpCheck {
			c.Deadline = e.server.deadline(sent, wait.Microseconds())
		}
	}
	rep, err := e.exec(ctx, e.backend, c)
	if err == nil {
		e.br.resolve(t, succeeded, e.clock())
		if sent != 0 && rep.Server > 0 {
			e.server.observe(sent, rep.Server)
		}
		return rep, ClassBackend, nil
	}
	class := classify(caller, err)
	switch class {
	case ClassCaller:
		e.br.resolve(t, abandoned, e.clock())
	case ClassScript:
		e.br.resolve(t, succeeded, e.clock())
		err = fmt.Errorf("%w: %w", ErrScript, err)
	default:
		e.br.resolve(t, failed, e.clock())
		if algorithms.IsDeadlineError(err) {
			e.server.reset()
		}
	}
	return algorithms.Reply{}, class, err
}

// exec sends c to b and decodes the reply. A reply that does not decode is an
// algorithms.ErrReply error.
func (e *Engine) exec(ctx context.Context, b Backend, c *algorithms.Call) (algorithms.Reply, error) {
	argv, err := c.Argv()
	if err != nil {
		return algorithms.Reply{}, fmt.Errorf("%w: %v", ErrRequest, err)
	}
	v, err := b.Eval(ctx, e.plan.script, c.Keys(), argv)
	if err != nil {
		return algorithms.Reply{}, err
	}
	if c.Op == algorithms.OpRefund {
		return algorithms.Reply{Allowed: true}, nil
	}
	return algorithms.DecodeReply(v, len(c.Rules))
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
		lc := algorithms.Call{Op: call.Op, Now: call.Now, Rules: make([]algorithms.Rule, len(localIdx))}
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
			rep.Now = lrep.Now
			if res.src == FromFailOpen {
				res.src = FromLocal
			}
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
		} else {
			_, _, err = e.call(ctx, &c.call)
		}
		if err != nil {
			e.logs.log(e, "refund", "rlctl: a refund failed; the charge stays until the key expires", "err", err)
		}
	}
}

// Release gives back the concurrency leases an allowed decision holds. It is idempotent
// and does not depend on ctx being live: a request whose client went away still gives
// its leases back (ctx's values are kept, its cancellation is not). A release goes through
// the breaker and the decision deadline like any call; one that cannot reach the backend
// is logged, and its lease ends at its rule's ttl. A decision made without the backend
// holds no backend lease. The error is always nil; it is kept for callers that check it.
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
			e.local = NewLocal(luahost.New(luahost.WithClock(clockFunc(e.clock))))
		}
	})
	return e.local
}

type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// logFailure logs a degraded decision: script errors at error level (a bug to fix),
// backend failures at warning level.
func (e *Engine) logFailure(policy, mode string, class Class, err error) {
	msg := "rlctl: backend failed; deciding by on_error"
	if class == ClassScript {
		msg = "rlctl: the engine script failed (a plugin or plan bug); deciding by on_error"
	}
	e.logs.log(e, class.String()+"/"+policy, msg, "policy", policy, "mode", mode, "err", err)
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

// serverClock places deadlines on the backend's clock. Each reply gives a sample
// server - sent, an upper bound of the offset between the clocks (the call took time to
// arrive); the smallest of the recent samples is the estimate, so a deadline is never
// earlier than the caller's, and at most one fast round trip later.
type serverClock struct {
	mu      sync.Mutex
	samples [8]int64
	n, next int
}

func (c *serverClock) observe(sent, server int64) {
	c.mu.Lock()
	c.samples[c.next] = server - sent
	c.next = (c.next + 1) % len(c.samples)
	c.n = min(c.n+1, len(c.samples))
	c.mu.Unlock()
}

// deadline returns the server-clock instant wait µs after sent (engine clock), or 0 while
// no sample is known.
func (c *serverClock) deadline(sent, wait int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		return 0
	}
	off := c.samples[0]
	for _, s := range c.samples[1:c.n] {
		off = min(off, s)
	}
	if d := sent + wait + off; d > 0 {
		return d
	}
	return 0
}

// reset forgets the samples: a call that the server refused as past its deadline while the
// engine still waited means the clocks moved; the next call goes without a deadline and
// brings a fresh sample.
func (c *serverClock) reset() {
	c.mu.Lock()
	c.n, c.next = 0, 0
	c.mu.Unlock()
}
