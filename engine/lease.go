package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlctl/rlctl/algorithms"
)

// maxLeased bounds the keys an engine holds slices of; a request of a further key is
// decided on the backend, unleased.
const maxLeased = 10_000

// returnsPerDecision bounds the refunds of ended slices one decision makes (see sweep).
const returnsPerDecision = 4

// leases are an engine's quota slices, by rule key.
type leases struct {
	mu sync.Mutex
	m  map[string]*slice
	// swept is the last sweep that found nothing more to return (µs on the engine's
	// clock), read without mu: most decisions only look at it.
	swept  atomic.Int64
	closed bool // ReturnLeases ran: no slice is taken again
}

// slice is one key's lease on this instance.
type slice struct {
	mu sync.Mutex
	// units are taken and not spent, spent are the units spent since the last take, gen
	// counts windows: a unit given back to the slice of another window is dropped (it
	// counted in a window that has ended).
	units, spent int64
	gen          uint64
	size         int64     // the next take's size (0: the lease's)
	lease        int64     // the rule's lease size: the most the slice holds
	now          int64     // the last take's instant on the rule's clock (a refund's Now)
	wend         int64     // the end of that instant's window on the rule's clock
	windowEnd    time.Time // on the engine's clock: when its units stop counting
	holdEnd      time.Time // when what is left goes back (at most windowEnd)
	idleEnd      time.Time // after it, an ended slice is forgotten
	denyUntil    time.Time // the backend had nothing more: no take before it
	retry        time.Duration
	// limit and remaining are the last take's reply: remaining is the backend's after it.
	limit, remaining int64
	rule             algorithms.Rule // the rule as the last take sent it (a refund's)
	skew             int64
	refill           *refill // the take in flight; nil when none
	forgotten        bool    // no longer in leases.m: a sweep removed it
}

// refill is a slice's take in flight: done is closed when it ends, and failed, set before,
// says that it failed on the backend (errTakeFailed).
type refill struct {
	done   chan struct{}
	failed bool
}

// spent is one leased rule's part of a decision: the slice it was spent from, how much,
// and in which of the slice's windows.
type spent struct {
	s    *slice
	cost int64
	gen  uint64
	// rule, now and skew are the take's that leased the units (a refund's), until the end
	// of their window on the engine's clock.
	rule      algorithms.Rule
	now, skew int64
	until     time.Time
}

// leasedDecision decides a request of Allow or AllowN whose rules include leased ones
// (dsl.Rule.LeaseSize): the leased rules from their slices, the others on the backend in the
// usual call. ok is false when the request is for the backend alone: a cost a slice
// cannot serve (0, or above the lease), no room for another key's slice, a take that
// failed (on_error then decides it as any request), or an engine whose leases were
// returned.
func (e *Engine) leasedDecision(ctx context.Context, rules []pending) (_ *Decision, ok bool, _ error) {
	var leased []int
	for i := range rules {
		p := &rules[i]
		if p.rule.LeaseSize == 0 {
			continue
		}
		if p.call.Cost == 0 || p.call.Cost > p.rule.LeaseSize {
			return nil, false, nil
		}
		leased = append(leased, i)
	}
	if len(leased) == 0 {
		return nil, false, nil // no leased rule applies: the usual path (no_rules included)
	}
	e.sweepLeases(ctx)
	d, _ := newDecision(len(rules))
	var taken []spent
	var denied bool
	for attempt := 0; ; attempt++ {
		held, ok := e.leases.slices(rules, leased)
		if !ok || attempt == 3 {
			return nil, false, nil
		}
		var err error
		d.Source, taken, denied, err = e.spendAll(ctx, rules, leased, held, d)
		if errors.Is(err, errForgotten) {
			continue // a sweep forgot a slice meanwhile: take the key's slice again
		}
		if errors.Is(err, errTakeFailed) {
			return nil, false, nil
		}
		if err != nil {
			return nil, true, err
		}
		break
	}
	if !denied {
		var rest []pending
		var at []int
		for i := range rules {
			if rules[i].rule.LeaseSize == 0 {
				rest, at = append(rest, rules[i]), append(at, i)
			}
		}
		if len(rest) > 0 {
			o, err := e.evaluate(ctx, rest, rest, nil, true, 0, -1, false)
			if err != nil {
				e.giveBack(ctx, taken)
				return nil, true, err
			}
			d.Source, d.Err, d.held = o.Source, o.Err, o.held
			// A denial leaves out the rules of the calls that never ran: place each
			// result by its rule and key.
			for _, r := range o.Rules {
				j := slices.IndexFunc(at, func(i int) bool {
					return rules[i].policy.Name == r.Policy && rules[i].rule.Name == r.Rule && rules[i].call.Key == r.Key && !d.Rules[i].evaluated
				})
				if j >= 0 {
					r.evaluated = true
					d.Rules[at[j]] = r
				}
			}
			denied = !o.Allowed
		}
	}
	if denied {
		e.giveBack(ctx, taken)
		d.deny()
	}
	e.decided(d)
	return d, true, nil
}

// spendAll spends each leased rule's cost from its slice held[k], in order, and writes
// their verdicts into d: until one denies (denied), or fails (err, with what was spent
// given back). src is FromLease, or FromBackend when a take called the backend.
func (e *Engine) spendAll(ctx context.Context, rules []pending, leased []int, held []*slice, d *Decision) (src Source, taken []spent, denied bool, err error) {
	src = FromLease
	for k, i := range leased {
		p := &rules[i]
		rr := &d.Rules[i]
		*rr = e.result(p)
		rr.evaluated = true
		sp, called, err := e.spend(ctx, held[k], p, rr)
		if called {
			src = FromBackend
		}
		if err != nil {
			e.giveBack(ctx, taken)
			return src, nil, false, err
		}
		if !rr.Allowed {
			return src, taken, true, nil
		}
		taken = append(taken, sp)
	}
	return src, taken, false, nil
}

// errForgotten is a slice that a sweep forgot while a decision held it.
var errForgotten = errors.New("lease slice forgotten")

// errTakeFailed is a take the backend failed: the request is decided on the backend,
// where on_error decides it.
var errTakeFailed = errors.New("lease take failed")

// slices returns the slice of each leased rule's key, created when missing; ok is false
// when a new one would pass maxLeased, or after ReturnLeases.
func (l *leases) slices(rules []pending, leased []int) (_ []*slice, ok bool) {
	out := make([]*slice, len(leased))
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, false
	}
	if l.m == nil {
		l.m = map[string]*slice{}
	}
	for k, i := range leased {
		key := rules[i].call.Key
		s := l.m[key]
		if s == nil {
			if len(l.m) >= maxLeased {
				return nil, false
			}
			s = &slice{}
			l.m[key] = s
		}
		out[k] = s
	}
	return out, true
}

// spend takes rule p's cost from slice s, filling it from the backend when it is short,
// and writes the rule's verdict into rr. called reports a backend call. The error is the
// caller's, or errTakeFailed.
func (e *Engine) spend(ctx context.Context, s *slice, p *pending, rr *RuleResult) (_ spent, called bool, _ error) {
	cost := p.call.Cost
	for {
		s.mu.Lock()
		if s.forgotten {
			s.mu.Unlock()
			return spent{}, called, errForgotten
		}
		now := e.clock()
		if ret := endSlice(s, now); ret != nil {
			s.mu.Unlock()
			e.refund(ctx, ret)
			continue
		}
		if s.units >= cost {
			s.units -= cost
			s.spent += cost
			rr.Allowed, rr.Limit, rr.Remaining = true, s.limit, max(s.remaining, 0)+s.units
			rr.ResetAfter = max(s.windowEnd.Sub(now), 0)
			sp := spent{s: s, cost: cost, gen: s.gen, rule: s.rule, now: s.now, skew: s.skew, until: s.windowEnd}
			s.mu.Unlock()
			return sp, called, nil
		}
		if now.Before(s.denyUntil) {
			rr.Allowed, rr.Limit, rr.Remaining = false, s.limit, s.units
			rr.RetryAfter, rr.ResetAfter = s.retry, max(s.windowEnd.Sub(now), 0)
			if s.retry != Never {
				rr.RetryAfter = s.denyUntil.Sub(now)
			}
			s.mu.Unlock()
			return spent{}, called, nil
		}
		if r := s.refill; r != nil {
			// One take a slice at a time: wait for it, then spend from what it brought.
			s.mu.Unlock()
			select {
			case <-r.done:
				if r.failed {
					// Decided on the backend, as the taker's request is, rather than by a
					// take of its own, each waiter in turn waiting for the failure of the
					// one before.
					return spent{}, called, errTakeFailed
				}
				continue
			case <-ctx.Done():
				return spent{}, called, ctx.Err()
			}
		}
		r := &refill{done: make(chan struct{})}
		s.refill = r
		size := s.size
		if size == 0 {
			size = p.rule.LeaseSize
		}
		// A slice holds at most the lease: what it has left counts.
		size = min(max(size, cost), p.rule.LeaseSize) - s.units
		s.mu.Unlock()
		called = true
		err := e.take(ctx, s, p, size)
		s.mu.Lock()
		s.refill = nil
		r.failed = errors.Is(err, errTakeFailed)
		close(r.done)
		s.mu.Unlock()
		if err != nil {
			return spent{}, called, err
		}
	}
}

// take fills slice s with up to size units of rule p's key, in one partial admission on
// the backend.
func (e *Engine) take(ctx context.Context, s *slice, p *pending, size int64) error {
	r := p.call
	r.Cost = 1
	call := algorithms.Call{Op: algorithms.OpMost, Now: algorithms.ServerTime, Units: size, Rules: []algorithms.Rule{r}}
	sent := e.clock()
	if p.client {
		call.Now, call.Skew = sent.UnixMicro(), p.policy.ClockSkew
	}
	rep, class, err := e.call(ctx, &call)
	if err != nil {
		if class == ClassCaller {
			return err
		}
		return errTakeFailed
	}
	res := rep.Rules[0]
	// The window's end on the engine's clock, from the instant the call was sent: never
	// later than the server's.
	wend := windowEnd(p, rep.Now)
	end := sent.Add(usToDuration(max(wend-rep.Now, 0)))
	s.mu.Lock()
	if s.forgotten {
		// ReturnLeases ran, or a sweep, while the take was in flight: its units go back.
		s.mu.Unlock()
		if rep.Granted > 0 {
			e.refund(ctx, refundOf(r, rep.Now, call.Skew, rep.Granted))
		}
		return nil
	}
	defer s.mu.Unlock()
	if wend != s.wend {
		// A new window: what was left of the last one stopped counting with it.
		s.units, s.gen, s.wend = 0, s.gen+1, wend
	}
	s.units += rep.Granted
	s.now, s.rule, s.skew, s.lease = rep.Now, r, call.Skew, p.rule.LeaseSize
	s.limit, s.remaining = res.Limit, res.Remaining
	s.windowEnd, s.holdEnd = end, end
	if h := p.rule.LeaseFor; h > 0 {
		s.holdEnd = minTime(end, sent.Add(time.Duration(h)*time.Microsecond))
	}
	hold := s.holdEnd.Sub(sent)
	s.idleEnd = s.holdEnd.Add(hold)
	// The next size follows this take's demand: twice what the last slice served.
	if s.spent > 0 {
		s.size = min(max(2*s.spent, 1), p.rule.LeaseSize)
	}
	s.spent = 0
	s.denyUntil = time.Time{}
	if rep.Granted < size {
		// The backend had no more for now.
		s.retry = usToDuration(res.RetryAfter)
		switch {
		case res.RetryAfter < 0:
			s.denyUntil = s.holdEnd
		case rep.Granted == 0 && res.RetryAfter > 0:
			s.denyUntil = minTime(sent.Add(s.retry), s.holdEnd)
		default:
			s.denyUntil = s.holdEnd
		}
	}
	return nil
}

// windowEnd returns the end, in µs on the rule's clock, of the window of leased rule p
// that holds instant now: a fixed_window's aligned window, or its calendar period.
func windowEnd(p *pending, now int64) int64 {
	if c := p.rule.Calendar; c != nil {
		_, end := c.Bounds(time.UnixMicro(now))
		return end.UnixMicro()
	}
	w := p.call.Params[1]
	return (now/w + 1) * w
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// endSlice ends slice s (locked) when its hold is over at now, and returns the refund that
// gives back what is left, for the caller to make once it has unlocked s: nil when
// nothing is left, or its window no longer counts it.
func endSlice(s *slice, now time.Time) []charged {
	if s.units == 0 || now.Before(s.holdEnd) {
		return nil
	}
	left := s.units
	s.units, s.gen = 0, s.gen+1
	if !now.Before(s.windowEnd) {
		return nil
	}
	return refundOf(s.rule, s.now, s.skew, left)
}

// refundOf returns the refund of units of leased rule r to the window of the take at now
// (with skew, of a policy on client clocks).
func refundOf(r algorithms.Rule, now, skew, units int64) []charged {
	r.Cost = units
	return []charged{{call: algorithms.Call{Op: algorithms.OpRefund, Now: now, Skew: skew, Rules: []algorithms.Rule{r}}, client: skew != 0}}
}

// giveBack returns a denied request's units to the slices they were spent from. A slice
// refilled meanwhile keeps at most the lease, and what would pass it goes back to the
// backend; so do the units of a slice that ended meanwhile (its hold, or ReturnLeases),
// while the window they were leased in still counts them.
func (e *Engine) giveBack(ctx context.Context, taken []spent) {
	for _, t := range taken {
		s := t.s
		s.mu.Lock()
		back := int64(0)
		if s.gen == t.gen && !s.forgotten {
			back = min(t.cost, max(s.lease-s.units, 0))
			s.units += back
			s.spent = max(s.spent-back, 0)
		}
		s.mu.Unlock()
		if excess := t.cost - back; excess > 0 && e.clock().Before(t.until) {
			e.refund(ctx, refundOf(t.rule, t.now, t.skew, excess))
		}
	}
}

// sweepLeases returns what is left of slices whose hold has ended, at most
// returnsPerDecision of them, and forgets slices idle for as long as they were held. It
// runs on a deciding goroutine, at most once a second of the engine's clock when there is
// nothing to return, so a slice nobody asks for still goes back.
func (e *Engine) sweepLeases(ctx context.Context) {
	l := &e.leases
	now := e.clock()
	if now.UnixMicro()-l.swept.Load() < time.Second.Microseconds() {
		return
	}
	l.mu.Lock()
	var ended []*slice
	for key, s := range l.m {
		if !s.mu.TryLock() {
			continue
		}
		switch {
		case s.refill == nil && s.units == 0 && !s.idleEnd.IsZero() && !now.Before(s.idleEnd):
			delete(l.m, key)
			s.forgotten = true
		case s.units > 0 && !now.Before(s.holdEnd) && len(ended) < returnsPerDecision:
			ended = append(ended, s)
		}
		s.mu.Unlock()
	}
	if len(ended) < returnsPerDecision {
		l.swept.Store(now.UnixMicro())
	}
	l.mu.Unlock()
	for _, s := range ended {
		s.mu.Lock()
		ret := endSlice(s, e.clock())
		s.mu.Unlock()
		e.refund(ctx, ret)
	}
}

// ReturnLeases gives back to the backend what is left of every quota lease the engine
// holds (dsl.Rule.LeaseSize) and stops it taking new ones: from then on it decides leased
// rules on the backend, as unleased. Call it before dropping an engine (a reload, a
// shutdown), so its units serve other instances at once rather than when their windows
// end. It returns the first refund's failure; a slice that could not be returned stays
// charged until its window ends.
func (e *Engine) ReturnLeases(ctx context.Context) error {
	l := &e.leases
	l.mu.Lock()
	l.closed = true
	all := make([]*slice, 0, len(l.m))
	for _, s := range l.m {
		all = append(all, s)
	}
	l.m = nil
	l.mu.Unlock()
	var first error
	for _, s := range all {
		s.mu.Lock()
		left := s.units
		s.units, s.gen, s.forgotten = 0, s.gen+1, true
		live := left > 0 && e.clock().Before(s.windowEnd)
		ret := refundOf(s.rule, s.now, s.skew, left)
		s.mu.Unlock()
		if !live {
			continue
		}
		if _, _, err := e.call(ctx, &ret[0].call); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Leased returns the units the engine holds unspent of rule key key (RuleResult.Key) in
// its quota lease: 0 when it holds none.
func (e *Engine) Leased(key string) int64 {
	e.leases.mu.Lock()
	s := e.leases.m[key]
	e.leases.mu.Unlock()
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !e.clock().Before(s.windowEnd) {
		return 0
	}
	return s.units
}
