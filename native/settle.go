package native

import (
	"math"

	"github.com/rlctl/rlctl/algorithms"
)

// The kernels' refund and owe: each algorithm's refund(key, now, cost, p) and owe(key, now,
// cost, p) in lua/<name>.lua (the calendar-free cases: a calendar rule never reaches the
// store), statement for statement in the Lua's arithmetic, as kernels.go's checks are.
// A refund gives back what a charge took (a cluster's compensation, a reservation's
// excess, an early end of a wait); owe charges without a check, into a debt later windows
// or refills earn back (a reservation settled above its estimate).

// maxDebt is MAX_INT / 2: what owe holds a count or level at.
const maxDebt = 1 << 52

// refund applies refund(key, now, cost) to e (nil: no key) and reports whether the key is
// to be deleted.
func (k *kernel) refund(e *entry, now, cost float64, nowMs int64, slack float64) (del bool) {
	switch k.alg {
	case algGCRA:
		PERIOD := k.p[1]
		d, live := k.tat(e, now)
		if !live {
			return false
		}
		d = nonneg(d - float64(cost*PERIOD))
		if d == 0 {
			return true
		}
		k.store(e, now, d, nowMs, slack)
	case algTokenBucket:
		RATE, PERIOD, FULL := k.p[1], k.p[2], k.p[3]
		l, t := k.tokens(e, now)
		l2 := l + float64(cost*PERIOD)
		if l2 >= FULL {
			return true
		}
		e.set(0, l2)
		e.set(1, t)
		e.expire(nowMs, (t-now)+math.Ceil((FULL-l2)/RATE), slack)
	case algLeakyBucket:
		RATE, PERIOD := k.p[1], k.p[2]
		l, t := k.level(e, now)
		l2 := nonneg(l - float64(cost*PERIOD))
		if l2 == 0 {
			return true
		}
		e.set(0, l2)
		e.set(1, t)
		e.expire(nowMs, (t-now)+math.Ceil(l2/RATE), slack)
	case algFixedWindow:
		u := k.used(e, now)
		if u.n <= 0 {
			return false
		}
		switch {
		case !u.debt && e.has&compact != 0:
			if u.n > cost {
				e.set(1, u.n-cost)
			} else {
				// A compact key's count of 0 is written full (see fixed_window.lua's Forms).
				e.has &^= compact
				e.set(0, u.win)
				e.set(1, 0)
			}
		case !u.debt:
			e.set(0, u.win)
			e.set(1, nonneg(u.n-cost))
		case u.io == u.win:
			e.set(1, nonneg(u.n-cost))
			e.set(3, nonneg(u.d-cost))
		default:
			// What is left of a debt, refunded in a later window: the rest weighs on the
			// windows after this one as a debt from it.
			e.set(0, u.win)
			e.set(1, nonneg(u.n-cost))
			e.set(2, u.win)
			e.set(3, nonneg(u.n-cost-u.l))
		}
	case algSlidingWindow:
		if e == nil || e.has&1 == 0 {
			return false
		}
		switch win := math.Floor(now / k.p[1]); e.f[0] {
		case win:
			e.set(1, nonneg(e.field(1)-cost))
		case win + 1:
			e.set(2, nonneg(e.field(2)-cost))
		}
	}
	return false
}

// carriesDebt reports whether the kernel's algorithm has an owe.
func (k *kernel) carriesDebt() bool { return k.alg != algSlidingWindow }

// owe applies owe(key, now, cost) to e, a new entry when there was no key.
func (k *kernel) owe(e *entry, now, cost float64, nowMs int64, slack float64) {
	switch k.alg {
	case algGCRA:
		PERIOD := k.p[1]
		d, _ := k.tat(e, now)
		d += float64(cost * PERIOD)
		if d > maxDebt {
			d = maxDebt
		}
		k.store(e, now, d, nowMs, slack)
	case algTokenBucket:
		RATE, PERIOD, FULL := k.p[1], k.p[2], k.p[3]
		l, t := k.tokens(e, now)
		l2 := l - float64(cost*PERIOD)
		if l2 < -maxDebt {
			l2 = -maxDebt
		}
		e.set(0, l2)
		e.set(1, t)
		e.expire(nowMs, (t-now)+math.Ceil((FULL-l2)/RATE), slack)
	case algLeakyBucket:
		RATE, PERIOD := k.p[1], k.p[2]
		l, t := k.level(e, now)
		l2 := l + float64(cost*PERIOD)
		if l2 > maxDebt {
			l2 = maxDebt
		}
		e.set(0, l2)
		e.set(1, t)
		e.expire(nowMs, (t-now)+math.Ceil(l2/RATE), slack)
	case algFixedWindow:
		LIMIT, WINDOW := k.p[0], k.p[1]
		u := k.used(e, now)
		n2 := u.n + cost
		if n2 > maxDebt {
			n2 = maxDebt
		}
		if n2 <= 0 {
			return
		}
		d := 0.0
		if LIMIT > 0 {
			d = nonneg(n2 - LIMIT) // a limit of 0 earns nothing back
		}
		if e.has&compact != 0 {
			e.has = 0 // owe writes the full form
		}
		e.set(0, u.win)
		e.set(1, n2)
		e.set(2, u.win)
		e.set(3, d)
		e.set(4, LIMIT)
		ends := float64((u.win + 1) * WINDOW)
		if d > 0 {
			if after := u.win + 1 + math.Ceil(d/LIMIT); after > u.win+1 {
				ends = float64(after * WINDOW)
			}
		}
		e.expire(nowMs, ends-now, slack)
	}
}

// tat is gcra.lua's delay: D scaled by the rate, max(0, TAT - now) * rate, and whether
// TAT >= now.
func (k *kernel) tat(e *entry, now float64) (float64, bool) {
	if e == nil || e.has&1 == 0 || e.f[0] < now {
		return 0, false
	}
	return float64((e.f[0]-now)*k.p[0]) + e.f[1], true
}

// store is gcra.lua's store: SET key (the TAT now + d scaled by the rate) PX until the
// TAT has passed (d, or ceil(d / rate) scaled).
func (k *kernel) store(e *entry, now, d float64, nowMs int64, slack float64) {
	RATE := k.p[0]
	ttl := d
	if RATE != 1 {
		ttl = math.Ceil(d / RATE)
	}
	e.f[0], e.f[1], e.has = now+d, 0, 1
	if RATE != 1 {
		w := math.Floor(d / RATE)
		e.f[0] = now + w
		if r := d - float64(w*RATE); r != 0 {
			e.f[1], e.has = r, 3
		}
	}
	e.expire(nowMs, ttl, slack)
}

// tokens is token_bucket.lua's level: the tokens (scaled by the period) and their time.
func (k *kernel) tokens(e *entry, now float64) (float64, float64) {
	RATE, FULL := k.p[1], k.p[3]
	if e == nil || e.has&3 != 3 {
		return FULL, now
	}
	l, t := e.f[0], e.f[1]
	if now > t {
		if now-t >= math.Ceil((FULL-l)/RATE) {
			return FULL, now
		}
		return l + float64((now-t)*RATE), now
	}
	return l, t
}

// level is leaky_bucket.lua's level: the level (scaled by the period) and its time.
func (k *kernel) level(e *entry, now float64) (float64, float64) {
	RATE := k.p[1]
	if e == nil || e.has&3 != 3 {
		return 0, now
	}
	l, t := e.f[0], e.f[1]
	if now > t {
		if now-t >= math.Ceil(l/RATE) {
			return 0, now
		}
		return l - float64((now-t)*RATE), now
	}
	return l, t
}

// usage is fixed_window.lua's used: the window a request at now counts in, the cost it
// holds, and, for a key whose debt weighs on later windows, the window owe wrote, the
// debt and the limit that earns it back.
type usage struct {
	win, n   float64
	debt     bool
	io, d, l float64
}

func (k *kernel) used(e *entry, now float64) usage {
	WINDOW := k.p[1]
	u := usage{win: math.Floor(now / WINDOW)}
	if e == nil || e.has&1 == 0 {
		return u
	}
	w := e.f[0]
	var io, d, l float64
	debt := false
	if e.has&4 != 0 && e.f[2] == w {
		d, l = e.field(3), e.field(4)
		if d > 0 && l > 0 {
			io, debt = w, true
		}
	}
	if w >= u.win {
		return usage{win: w, n: e.field(1), debt: debt, io: io, d: d, l: l}
	}
	if !debt {
		return u
	}
	left := d - float64((u.win-io-1)*l)
	if left <= 0 {
		return u
	}
	return usage{win: u.win, n: left, debt: true, io: io, d: d, l: l}
}

// owe charges every rule of c its cost without a check, as the dispatcher's owe does, and
// returns rep with each rule's values those of a peek at its key afterwards. New keys are
// added first, so that a store at its cap refuses the call before any write.
func (s *Store) owe(c *algorithms.Call, p *pass, shs []*shard, now float64, nowMs int64, slack float64, rep algorithms.Reply) (algorithms.Reply, bool, error) {
	var want uint
	for i := range c.Rules {
		if c.Rules[i].Cost > 0 {
			want |= 1 << i
		}
	}
	if err := s.addKeys(p, shs, want, nowMs); err != nil {
		return algorithms.Reply{}, true, err
	}
	rep.Rules = make([]algorithms.RuleResult, len(c.Rules))
	for i := range c.Rules {
		if cost := c.Rules[i].Cost; cost > 0 {
			p.ks[i].owe(p.es[i], now, float64(cost), nowMs, slack)
		}
		v := p.ks[i].check(p.es[i], now, 0)
		rep.Rules[i] = algorithms.RuleResult{Allowed: v.ok, Remaining: int64(v.remaining), RetryAfter: int64(v.retry), ResetAfter: int64(v.reset), Limit: int64(v.limit)}
	}
	return rep, true, nil
}
