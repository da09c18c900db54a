package algorithms

import (
	"fmt"
	"maps"
	"math/big"
	"slices"
)

// This file is the reference model: each algorithm's maths restated with exact rationals,
// as a test oracle. A model state answers only three questions — would a request of this
// cost pass now, what is the state after charging it, and is the state empty — and every
// reported number is derived from those by search, independently of the closed forms the
// Lua uses: remaining is the largest cost that would pass, retry-after the first instant the
// same request passes, reset-after the first instant the state is empty.

// state is one key's state under one algorithm with its parameters bound.
type state interface {
	capacity() int64
	allowed(now, cost int64) bool
	charge(now, cost int64, lease string) state
	empty(now int64) bool
	refund(now, cost int64, lease string) state
	// retune is the state at now in the parameters w (an override's change; see Override).
	retune(now int64, w []int64) state
}

// ceilRat is the smallest integer at least a.
func ceilRat(a *big.Rat) int64 {
	q := new(big.Int).Neg(a.Num())
	q.Div(q, a.Denom()) // floor(-a), Euclidean division by a positive denominator
	return -q.Int64()
}

func newState(a *Algorithm, w []int64) (state, error) {
	if err := a.Validate(w); err != nil {
		return nil, err
	}
	switch a.Name {
	case "fixed_window":
		return fixedState{limit: w[0], window: w[1], w: -1}, nil
	case "sliding_log":
		return logState{limit: w[0], window: w[1]}, nil
	case "sliding_window":
		return windowState{limit: w[0], window: w[1], w: -1}, nil
	case "token_bucket":
		return bucketState{cap: w[0], rate: w[1], period: w[2], tokens: rat(w[0])}, nil
	case "leaky_bucket":
		return leakyState{cap: w[0], rate: w[1], period: w[2], level: rat(0)}, nil
	case "gcra":
		return gcraState{rate: w[0], period: w[1], burst: w[2]}, nil
	case "concurrency":
		return leaseState{max: w[0], ttl: w[1]}, nil
	}
	return nil, fmt.Errorf("no reference model for %q", a.Name)
}

func rat(n int64) *big.Rat       { return new(big.Rat).SetInt64(n) }
func frac(a, b int64) *big.Rat   { return big.NewRat(a, b) }
func add(a, b *big.Rat) *big.Rat { return new(big.Rat).Add(a, b) }
func sub(a, b *big.Rat) *big.Rat { return new(big.Rat).Sub(a, b) }
func mul(a, b *big.Rat) *big.Rat { return new(big.Rat).Mul(a, b) }

func minRat(a, b *big.Rat) *big.Rat {
	if a.Cmp(b) <= 0 {
		return a
	}
	return b
}

func maxRat(a, b *big.Rat) *big.Rat {
	if a.Cmp(b) >= 0 {
		return a
	}
	return b
}

func atLeast(a *big.Rat, n int64) bool { return a.Cmp(rat(n)) >= 0 }

// floorDiv is floor(a / b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// fixed_window: n counted in aligned window w. A request whose clock is in an earlier
// window counts in w: the key's window never moves back. With a calendar (cal), the
// windows are the periods of span, each known by its first instant; an instant past the
// span is in a window of its own (the reference never decides there: the script refuses
// such a call, and searches only ask whether the window has moved on).
type fixedState struct {
	limit, window, w, n int64
	// ow, d, l: owe wrote window ow with a debt of d past its limit l, which each later
	// window earns back l of; it weighs on later windows while ow is the key's window (a
	// charge in a later window takes what is left of it into its count).
	ow, d, l int64
	cal      bool
	span     Span
}

// win is the window a request at now counts in.
func (s fixedState) win(now int64) int64 {
	if s.cal {
		if now >= s.span[SpanLen-1] {
			return max(s.span[SpanLen-1], s.w)
		}
		start, _ := s.span.Window(now)
		return max(start, s.w)
	}
	return max(floorDiv(now, s.window), s.w)
}

// owes reports whether the key's debt weighs on the windows after its own.
func (s fixedState) owes() bool { return s.ow == s.w && s.d > 0 && s.l > 0 }

// count is what the key holds in the window of now: its count in its own window; in a
// later one what is left of its debt.
func (s fixedState) count(now int64) int64 {
	win := s.win(now)
	if win == s.w {
		return s.n
	}
	if !s.owes() || s.cal && win >= s.span[SpanLen-1] {
		// A calendar's debt ends with the periods the call carries, as the script's.
		return 0
	}
	if k := s.index(win) - s.index(s.w) - 1; k < ceilDiv(s.d, s.l) {
		return s.d - k*s.l
	}
	return 0
}

// index is window w's position: an aligned window's own index, a calendar period's
// position among the span's bounds (1 to SpanLen), or -SpanLen before them all.
func (s fixedState) index(w int64) int64 {
	if !s.cal {
		return w
	}
	for i := SpanLen - 1; i >= 0; i-- {
		if w >= s.span[i] {
			return int64(i + 1)
		}
	}
	return -SpanLen
}

func (s fixedState) capacity() int64              { return s.limit }
func (s fixedState) allowed(now, cost int64) bool { return s.count(now)+cost <= s.limit }
func (s fixedState) empty(now int64) bool         { return s.count(now) == 0 }
func (s fixedState) charge(now, cost int64, _ string) state {
	s.n, s.w = s.count(now)+cost, s.win(now)
	return s
}
func (s fixedState) retune(_ int64, w []int64) state { s.limit = w[0]; return s }
func (s fixedState) refund(now, cost int64, _ string) state {
	n := s.count(now)
	win := s.win(now)
	switch {
	case n <= 0:
	case win == s.w:
		if s.ow == s.w {
			s.d = max(0, s.d-cost)
		}
		s.n = max(0, n-cost)
	default:
		// What is left of a debt: the rest weighs on the windows after this one.
		s.n, s.w, s.ow, s.d = max(0, n-cost), win, win, max(0, n-cost-s.l)
	}
	return s
}

// sliding_log: the multiset of charge instants.
type logState struct {
	limit, window int64
	times         []int64 // sorted
}

func (s logState) count(now int64) int64 {
	var n int64
	for _, t := range s.times {
		if t > now-s.window {
			n++
		}
	}
	return n
}
func (s logState) capacity() int64              { return s.limit }
func (s logState) allowed(now, cost int64) bool { return s.count(now)+cost <= s.limit }
func (s logState) empty(now int64) bool         { return s.count(now) == 0 }
func (s logState) charge(now, cost int64, _ string) state {
	var kept []int64
	for _, t := range s.times {
		if t > now-s.window {
			kept = append(kept, t)
		}
	}
	for range cost {
		kept = append(kept, now)
	}
	slices.Sort(kept)
	s.times = kept
	return s
}
func (s logState) retune(_ int64, w []int64) state { s.limit = w[0]; return s }
func (s logState) refund(now, cost int64, _ string) state {
	kept := slices.Clone(s.times)
	for i := len(kept) - 1; i >= 0 && cost > 0; i-- {
		if kept[i] == now {
			kept = slices.Delete(kept, i, i+1)
			cost--
		}
	}
	s.times = kept
	return s
}

// sliding_window: counts of the current (c) and previous (p) aligned windows. A request
// whose clock is in an earlier window than w is decided as at the start of window w.
type windowState struct{ limit, window, w, c, p int64 }

// eff is the instant a request at now is decided at.
func (s windowState) eff(now int64) int64 {
	if s.w >= 0 && floorDiv(now, s.window) < s.w {
		return s.w * s.window
	}
	return now
}

func (s windowState) view(now int64) (cur, prev int64) {
	now = s.eff(now)
	switch floorDiv(now, s.window) {
	case s.w:
		return s.c, s.p
	case s.w + 1:
		return 0, s.c
	}
	return 0, 0
}
func (s windowState) estimate(now int64) *big.Rat {
	cur, prev := s.view(now)
	now = s.eff(now)
	e := now - floorDiv(now, s.window)*s.window
	return add(mul(rat(prev), frac(s.window-e, s.window)), rat(cur))
}
func (s windowState) capacity() int64 { return s.limit }
func (s windowState) allowed(now, cost int64) bool {
	return add(s.estimate(now), rat(cost)).Cmp(rat(s.limit)) <= 0
}
func (s windowState) empty(now int64) bool { return s.estimate(now).Sign() == 0 }
func (s windowState) charge(now, cost int64, _ string) state {
	cur, prev := s.view(now)
	s.w, s.c, s.p = floorDiv(s.eff(now), s.window), cur+cost, prev
	return s
}
func (s windowState) retune(_ int64, w []int64) state { s.limit = w[0]; return s }
func (s windowState) refund(now, cost int64, _ string) state {
	switch floorDiv(now, s.window) {
	case s.w:
		s.c = max(0, s.c-cost)
	case s.w - 1:
		s.p = max(0, s.p-cost)
	}
	return s
}

// token_bucket: tokens (exact) as of instant t.
type bucketState struct {
	cap, rate, period, t int64
	tokens               *big.Rat
}

func (s bucketState) at(now int64) *big.Rat {
	if now <= s.t {
		return s.tokens
	}
	return minRat(rat(s.cap), add(s.tokens, frac((now-s.t)*s.rate, s.period)))
}
func (s bucketState) capacity() int64              { return s.cap }
func (s bucketState) allowed(now, cost int64) bool { return atLeast(s.at(now), cost) }
func (s bucketState) empty(now int64) bool         { return s.at(now).Cmp(rat(s.cap)) == 0 }
func (s bucketState) charge(now, cost int64, _ string) state {
	s.tokens, s.t = sub(s.at(now), rat(cost)), max(s.t, now)
	return s
}

// retune carries the tokens used, rounded up and at most the new capacity.
func (s bucketState) retune(now int64, w []int64) state {
	used := min(ceilRat(sub(rat(s.cap), s.at(now))), w[0])
	s.cap, s.rate, s.period = w[0], w[1], w[2]
	if used <= 0 {
		s.tokens, s.t = rat(s.cap), 0
		return s
	}
	s.tokens, s.t = rat(s.cap-used), max(s.t, now)
	return s
}

// refund gives cost back; a bucket it fills is the empty state, which has no time (the
// script deletes the key), so a later call whose clock is behind sees a full bucket.
func (s bucketState) refund(now, cost int64, _ string) state {
	s.tokens, s.t = minRat(rat(s.cap), add(s.at(now), rat(cost))), max(s.t, now)
	if s.tokens.Cmp(rat(s.cap)) == 0 {
		s.t = 0
	}
	return s
}

// leaky_bucket: level (exact) as of instant t.
type leakyState struct {
	cap, rate, period, t int64
	level                *big.Rat
}

func (s leakyState) at(now int64) *big.Rat {
	if now <= s.t {
		return s.level
	}
	return maxRat(rat(0), sub(s.level, frac((now-s.t)*s.rate, s.period)))
}
func (s leakyState) capacity() int64 { return s.cap }
func (s leakyState) allowed(now, cost int64) bool {
	return add(s.at(now), rat(cost)).Cmp(rat(s.cap)) <= 0
}
func (s leakyState) empty(now int64) bool { return s.at(now).Sign() == 0 }
func (s leakyState) charge(now, cost int64, _ string) state {
	s.level, s.t = add(s.at(now), rat(cost)), max(s.t, now)
	return s
}

// retune carries the level, rounded up and at most the new capacity.
func (s leakyState) retune(now int64, w []int64) state {
	used := min(ceilRat(s.at(now)), w[0])
	s.cap, s.rate, s.period = w[0], w[1], w[2]
	if used <= 0 {
		s.level, s.t = rat(0), 0
		return s
	}
	s.level, s.t = rat(used), max(s.t, now)
	return s
}

// refund takes cost back out; a bucket it empties has no time, as for token_bucket.
func (s leakyState) refund(now, cost int64, _ string) state {
	s.level, s.t = maxRat(rat(0), sub(s.at(now), rat(cost))), max(s.t, now)
	if s.level.Sign() == 0 {
		s.t = 0
	}
	return s
}

// gcra: the theoretical arrival time (exact); nil means "in the past".
type gcraState struct {
	rate, period, burst int64
	tat                 *big.Rat
}

func (s gcraState) delay(now int64) *big.Rat { // max(0, TAT - now)
	if s.tat == nil {
		return rat(0)
	}
	return maxRat(rat(0), sub(s.tat, rat(now)))
}
func (s gcraState) capacity() int64 { return s.burst }
func (s gcraState) allowed(now, cost int64) bool {
	t := frac(s.period, s.rate)
	return add(s.delay(now), mul(rat(cost), t)).Cmp(mul(rat(s.burst), t)) <= 0
}
func (s gcraState) empty(now int64) bool { return s.delay(now).Sign() == 0 }
func (s gcraState) charge(now, cost int64, _ string) state {
	s.tat = add(add(rat(now), s.delay(now)), mul(rat(cost), frac(s.period, s.rate)))
	return s
}

// retune carries the cells used, D/T rounded up and at most the new burst.
func (s gcraState) retune(now int64, w []int64) state {
	used := min(ceilRat(mul(s.delay(now), frac(s.rate, s.period))), w[2])
	s.rate, s.period, s.burst = w[0], w[1], w[2]
	if used <= 0 {
		s.tat = nil
		return s
	}
	s.tat = add(rat(now), mul(rat(used), frac(s.period, s.rate)))
	return s
}

func (s gcraState) refund(now, cost int64, _ string) state {
	if s.tat == nil || s.tat.Cmp(rat(now)) < 0 {
		return s
	}
	d := sub(s.delay(now), mul(rat(cost), frac(s.period, s.rate)))
	if d.Sign() <= 0 {
		s.tat = nil
	} else {
		s.tat = add(rat(now), d)
	}
	return s
}

// concurrency: the leases held, each an id and a cost, and their expiry instants. A
// release names the lease's id and cost; any other pair is a lease never taken.
type leaseState struct {
	max, ttl int64
	leases   map[lease]int64
}

type lease struct {
	id   string
	cost int64
}

func (s leaseState) active(now int64) int64 {
	var n int64
	for l, exp := range s.leases {
		if exp > now {
			n += l.cost
		}
	}
	return n
}
func (s leaseState) capacity() int64              { return s.max }
func (s leaseState) allowed(now, cost int64) bool { return s.active(now)+cost <= s.max }
func (s leaseState) empty(now int64) bool         { return s.active(now) == 0 }
func (s leaseState) charge(now, cost int64, id string) state {
	next := map[lease]int64{}
	for l, exp := range s.leases {
		if exp > now {
			next[l] = exp
		}
	}
	next[lease{id, cost}] = now + s.ttl
	s.leases = next
	return s
}
func (s leaseState) retune(_ int64, w []int64) state { s.max, s.ttl = w[0], w[1]; return s }
func (s leaseState) refund(now, cost int64, id string) state {
	next := maps.Clone(s.leases)
	delete(next, lease{id, cost})
	s.leases = next
	return s
}

// searchLimit bounds every search: 2^52 µs is about 142 years.
const searchLimit = int64(1) << 52

// firstFrom returns the smallest d >= from with ok(d), for ok monotone (false..., true...).
func firstFrom(from int64, ok func(d int64) bool) int64 {
	if ok(from) {
		return from
	}
	lo, hi := from, from+1 // ok(lo) is false
	for !ok(hi) {
		lo, hi = hi, from+2*(hi-from)
		if hi-from > searchLimit {
			panic("algorithms: reference model search does not converge")
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// observe derives a rule's reported numbers from state s at now.
func observe(s state, now int64) (remaining, reset int64) {
	// remaining: the largest cost in [0, capacity] that passes (allowed is monotone in cost).
	if s.allowed(now, 0) {
		remaining = firstFrom(1, func(c int64) bool { return c > s.capacity() || !s.allowed(now, c) }) - 1
	}
	reset = firstFrom(0, func(d int64) bool { return s.empty(now + d) })
	return remaining, reset
}

// checkRule is the reference verdict of one rule, and the state after its charge when allowed.
func checkRule(s state, now, cost int64, lease string) (RuleResult, state) {
	r := RuleResult{Limit: s.capacity()}
	switch {
	case cost > s.capacity():
		r.RetryAfter = Never
	case s.allowed(now, cost):
		r.Allowed = true
		if cost > 0 {
			s = s.charge(now, cost, lease)
		}
	default:
		r.RetryAfter = firstFrom(1, func(d int64) bool { return s.allowed(now+d, cost) })
	}
	r.Remaining, r.ResetAfter = observe(s, now)
	return r, s
}

// Oracle is the reference model of a whole keyspace: it answers calls as the engine script
// should. It assumes each key keeps one algorithm and parameters; Do fails otherwise.
type Oracle struct {
	states map[string]state
	algs   map[string]string
	boxes  map[string]boxRecord // each boxed rule key's last block
	// overrides holds each overridable rule key's override; its state is in the
	// override's figures while it is here.
	overrides map[string]Override
	// members holds the list members (ListKey) that are set.
	members map[string]bool
}

// NewOracle returns an empty reference keyspace.
func NewOracle() *Oracle {
	return &Oracle{states: map[string]state{}, algs: map[string]string{}, boxes: map[string]boxRecord{}, overrides: map[string]Override{}, members: map[string]bool{}}
}

func (o *Oracle) state(r *Rule) (state, error) {
	id := r.Algorithm.Name + fmt.Sprint(r.Params)
	if prev, ok := o.algs[r.Key]; ok && prev != id {
		return nil, fmt.Errorf("key %q was %s, now %s", r.Key, prev, id)
	}
	if s, ok := o.states[r.Key]; ok {
		return s, nil
	}
	// A key without state is empty in the figures in force: its override's, while it
	// has one (the script's state of a key that expired while overridden).
	params := r.Params
	if ov, ok := o.overrides[r.Key]; ok && r.Overridable {
		params = ov.Params
	}
	s, err := newState(r.Algorithm, params)
	if err != nil {
		return nil, err
	}
	o.algs[r.Key] = id
	o.states[r.Key] = s
	return s, nil
}

// Do answers a call. A check call returns its Reply; a refund call returns a Reply with
// no rules. c.Now must be a client time (the oracle has no server clock).
func (o *Oracle) Do(c *Call) (Reply, error) {
	if c.Now < 0 {
		return Reply{}, fmt.Errorf("oracle needs an explicit time, got %d", c.Now)
	}
	if _, err := c.Argv(); err != nil {
		return Reply{}, err
	}
	states := make([]state, len(c.Rules))
	for i := range c.Rules {
		s, err := o.state(&c.Rules[i])
		if err != nil {
			return Reply{}, err
		}
		if r := &c.Rules[i]; r.Overridable {
			// An override whose Until has come ends: the state at Until, in the rule's figures.
			if ov, ok := o.overrides[r.Key]; ok && ov.Until != 0 && c.Now >= ov.Until {
				s = s.retune(ov.Until, r.Params)
				o.states[r.Key] = s
				delete(o.overrides, r.Key)
			}
		}
		if r := &c.Rules[i]; r.Calendar {
			// The call's periods (the reference's windows are the span's, as the script's).
			f := s.(fixedState)
			f.cal, f.span = true, r.Span
			s = f
		}
		states[i] = s
	}
	if c.Op == OpInspect {
		r := c.Rules[0]
		f := &Further{Exempt: r.Lists.Exempt != "" && o.members[ListKey(r.Key, r.Lists.Exempt)], Deny: r.Lists.Deny != "" && o.members[ListKey(r.Key, r.Lists.Deny)]}
		if b, ok := o.boxes[r.Key]; ok && r.Box.For > 0 && c.Now < b.end {
			f.BlockEnd = b.end
		}
		if ov, ok := o.overrides[r.Key]; ok && r.Overridable {
			f.Override = &Override{Until: ov.Until, Params: slices.Clone(ov.Params)}
		}
		return Reply{Allowed: true, Now: c.Now, Further: f}, nil
	}
	if c.Op == OpList {
		k := ListKey(c.Rules[0].Key, c.List)
		switch c.Action {
		case ListAdd:
			o.members[k] = true
		case ListRemove:
			delete(o.members, k)
		}
		return Reply{Allowed: true, Now: c.Now, Member: o.members[k]}, nil
	}
	if c.Op == OpOverride && c.Read {
		rep := Reply{Allowed: true, Now: c.Now}
		if ov, ok := o.overrides[c.Rules[0].Key]; ok {
			rep.Override = &Override{Until: ov.Until, Params: slices.Clone(ov.Params)}
		}
		return rep, nil
	}
	if c.Op == OpOverride {
		r := c.Rules[0]
		figures := r.Params
		if c.Override != nil {
			figures = c.Override.Params
			o.overrides[r.Key] = Override{Until: c.Override.Until, Params: slices.Clone(figures)}
		} else {
			delete(o.overrides, r.Key)
		}
		o.states[r.Key] = states[0].retune(c.Now, figures)
		return Reply{Allowed: true, Now: c.Now}, nil
	}
	if c.Op == OpOwe {
		return o.owe(c, states)
	}
	if c.Op == OpRefund {
		for i, r := range c.Rules {
			if r.Cost > 0 {
				o.states[r.Key] = states[i].refund(c.Now, r.Cost, r.Lease)
			}
		}
		return Reply{Allowed: true, Now: c.Now}, nil
	}
	units := int64(1)
	if c.Op == OpMost {
		units = c.Units
	}
	rep, next, blocks := o.checkAll(c, states, units)
	at := c.Now // the instant the call is charged at
	if c.Op == OpDelay {
		rep.Delay = 0
		if !rep.Allowed {
			rep.Delay = -1
			if d, ok := delayOf(c, rep, blocks); ok {
				later := *c
				later.Now = c.Now + d
				if lrep, lnext, lblocks := o.checkAll(&later, states, 1); lrep.Allowed {
					rep, next, blocks, at = lrep, lnext, lblocks, later.Now
					rep.Now, rep.Delay = c.Now, d
					for i := range rep.Rules {
						rep.Rules[i].ResetAfter += d // from the call's instant
					}
				}
			}
		}
	}
	if c.Op == OpMost {
		rep.Granted = units
		if !rep.Allowed {
			// The largest grant the denying rules' remaining allow, or one unit.
			g := units
			for i, r := range c.Rules {
				if !rep.Rules[i].Allowed && !r.Shadow && r.Cost > 0 {
					g = min(g, rep.Rules[i].Remaining/r.Cost)
				}
			}
			rep, next, blocks = o.checkAll(c, states, max(g, 1))
			rep.Granted = 0
			if rep.Allowed {
				rep.Granted = max(g, 1)
			}
		}
	}
	for i, length := range blocks {
		if length > 0 {
			o.boxes[c.Rules[i].Key] = boxRecord{end: at + length, length: length}
			rep.Rules[i] = offend(rep.Rules[i], length)
		}
	}
	for i, r := range c.Rules {
		switch {
		case rep.Allowed:
			o.states[r.Key] = next[i]
		case rep.Rules[i].Allowed && r.Cost > 0: // not charged: report as a peek
			rep.Rules[i].Remaining, rep.Rules[i].ResetAfter = observe(states[i], c.Now)
		}
	}
	return rep, nil
}

// owe answers an OpOwe call c on states: each rule charged its cost unchecked (not a key
// on its exempt list), then peeked at.
func (o *Oracle) owe(c *Call, states []state) (Reply, error) {
	for i, r := range c.Rules {
		if r.Cost > 0 && !r.Algorithm.CarriesDebt() {
			return Reply{}, fmt.Errorf("rule %d: %s carries no debt", i+1, r.Algorithm.Name)
		}
	}
	rep := Reply{Allowed: true, Now: c.Now, Rules: make([]RuleResult, len(c.Rules))}
	for i, r := range c.Rules {
		s := states[i]
		if r.Cost > 0 && r.Lists.on(r.Key, o.members) != listExempt {
			s = owe(s, c.Now, r.Cost)
			o.states[r.Key] = s
		}
		rep.Rules[i], _ = checkRule(s, c.Now, 0, "")
	}
	return rep, nil
}

// maxDebt is the fixed-point bound the script holds a debt to (2^52): see each
// algorithm's owe in lua/.
const maxDebt = MaxInt / 2

// owe is s charged cost at now without a check, held to the script's bounds.
func owe(s state, now, cost int64) state {
	switch s := s.(type) {
	case fixedState:
		n, w := min(s.count(now)+cost, maxDebt), s.win(now)
		if s.cal {
			// A calendar rule's debt ends within the periods its call carries.
			n = min(n, max((SpanLen-s.index(w))*s.limit, 0))
		}
		if n <= 0 {
			return s // nothing to owe: the script writes nothing
		}
		s.n, s.w, s.ow, s.d, s.l = n, w, w, max(0, n-s.limit), s.limit
		return s
	case bucketState:
		s.tokens, s.t = maxRat(sub(s.at(now), rat(cost)), frac(-maxDebt, s.period)), max(s.t, now)
		return s
	case leakyState:
		s.level, s.t = minRat(add(s.at(now), rat(cost)), frac(maxDebt, s.period)), max(s.t, now)
		return s
	case gcraState:
		scale := s.rate // the script keeps D scaled by the rate, or in µs when T is whole
		if s.period%s.rate == 0 {
			scale = 1
		}
		d := minRat(add(s.delay(now), mul(rat(cost), frac(s.period, s.rate))), frac(maxDebt, scale))
		s.tat = add(rat(now), d)
		return s
	}
	panic(fmt.Sprintf("owe: %T carries no debt", s))
}

// delayOf returns how long an OpDelay call c denied at its instant (rep, with the blocks
// its denial starts) waits for its slot: the longest retry-after of the enforcing rules
// that deny, when none is Never, it is within c.MaxDelay, and the denial starts no block.
func delayOf(c *Call, rep Reply, blocks []int64) (int64, bool) {
	var d int64
	for i, r := range c.Rules {
		if blocks[i] > 0 {
			return 0, false
		}
		if x := rep.Rules[i]; !x.Allowed && !r.Shadow {
			if x.RetryAfter < 0 || x.RetryAfter > c.MaxDelay {
				return 0, false
			}
			d = max(d, x.RetryAfter)
		}
	}
	return d, true
}

// checkAll checks every rule of c at units times its cost, with its penalty box, on states
// (unchanged), and returns the reply, the states an allowed call leaves, and the length of
// the block each rule's denial starts if the call ends so (0: none).
func (o *Oracle) checkAll(c *Call, states []state, units int64) (Reply, []state, []int64) {
	rep := Reply{Allowed: true, Now: c.Now, Rules: make([]RuleResult, len(c.Rules))}
	next := make([]state, len(c.Rules))
	blocks := make([]int64, len(c.Rules))
	for i, r := range c.Rules {
		cost := r.Cost * units
		on := r.Lists.on(r.Key, o.members)
		if on == listExempt {
			cost = 0
		}
		rep.Rules[i], next[i] = checkRule(states[i], c.Now, cost, r.Lease)
		if on != listNone {
			rep.Rules[i] = r.Lists.verdict(on, rep.Rules[i])
			next[i] = states[i]
		} else if r.Box.For > 0 {
			var blocked bool
			rep.Rules[i], blocked, blocks[i] = r.Box.apply(rep.Rules[i], o.boxes[r.Key], c.Now, cost)
			if blocked {
				next[i] = states[i]
			}
		}
		if !rep.Rules[i].Allowed && !r.Shadow && rep.Allowed {
			rep.Allowed, rep.Decider = false, i+1
		}
	}
	return rep, next, blocks
}
