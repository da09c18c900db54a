package native

import (
	"math"

	"github.com/rlctl/rlctl/algorithms"
)

// The kernels below are the built-ins' check and commit in Go: each is its algorithm's
// fast check and commit (algorithms/fast.go, which lua/<name>.lua's check and commit
// match), statement for statement, in the same float64 arithmetic as the Lua's numbers,
// so that every reply and every value written is the Lua's to the bit. Products that feed
// a sum are converted to float64 explicitly, which keeps the compiler from fusing them
// (the Lua rounds each operation). TestNativeMatchesLua (differential_test.go) holds them
// to the Lua, on luahost and on Redis.

// alg names a key's layout: the algorithm that keeps it.
type alg uint8

const (
	algGCRA alg = iota + 1
	algTokenBucket
	algLeakyBucket
	algFixedWindow
	algSlidingWindow
)

// fields are the hash fields of each layout, in the order an entry keeps them (f[i] is
// field i); gcra's key is a string, its TAT t (f[0]) and its remainder r (f[1], held when
// the string is "t:r"). A fixed_window key in the compact form (see fixed_window.lua's
// Forms; has&compact) is one field named by its window w (f[0]) holding its count (f[1]).
var fields = [...][]string{
	algTokenBucket:   {"l", "t"},
	algLeakyBucket:   {"l", "t"},
	algFixedWindow:   {"w", "n", "o", "d", "l"},
	algSlidingWindow: {"w", "c", "p"},
}

// compact marks an entry of fixed_window's compact form in its has.
const compact uint8 = 1 << 7

// kernel is one rule's algorithm with its parameters bound, as the fast factory binds
// them: p holds the factory's arguments.
type kernel struct {
	alg alg
	p   [4]float64
}

// kernelOf returns r's kernel, or false when r is not one the store decides: an algorithm
// other than the five above, a rule with a penalty box, an override, lists or a calendar,
// or parameters the algorithm refuses.
func kernelOf(r *algorithms.Rule) (kernel, bool) {
	a := r.Algorithm
	if a == nil || !algorithms.IsBuiltin(a) || r.Box.For != 0 || r.Overridable || r.Lists.Any() || r.Calendar {
		return kernel{}, false
	}
	if c := r.Compiled; c != nil && (c.Box.For != 0 || c.Overridable || c.Lists.Any() || c.Calendar) {
		return kernel{}, false
	}
	p := r.Params
	var k kernel
	switch a.Name {
	case "gcra":
		if len(p) != 3 || r.Compiled == nil && a.Validate(p) != nil {
			return kernel{}, false
		}
		rate, period := p[0], p[1]
		if rate != 1 && period%rate == 0 {
			rate, period = 1, period/rate
		}
		k = kernel{algGCRA, [4]float64{float64(rate), float64(period), float64(p[2]), float64(p[2]) * float64(period)}}
	case "token_bucket", "leaky_bucket":
		if len(p) != 3 || r.Compiled == nil && a.Validate(p) != nil {
			return kernel{}, false
		}
		k = kernel{algTokenBucket, [4]float64{float64(p[0]), float64(p[1]), float64(p[2]), float64(p[0]) * float64(p[2])}}
		if a.Name == "leaky_bucket" {
			k.alg = algLeakyBucket
		}
	case "fixed_window":
		if len(p) != 2 || p[0] < 0 || p[1] < 1 || r.Compiled == nil && a.Validate(p) != nil {
			return kernel{}, false
		}
		k = kernel{algFixedWindow, [4]float64{float64(p[0]), float64(p[1])}}
	case "sliding_window":
		if len(p) != 2 || r.Compiled == nil && a.Validate(p) != nil {
			return kernel{}, false
		}
		k = kernel{algSlidingWindow, [4]float64{float64(p[0]), float64(p[1]), 2 * float64(p[1]), float64(p[0]) * float64(p[1])}}
	default:
		return kernel{}, false
	}
	return k, true
}

// verdict is a check's result: the reply values, and when it allows, the pending write
// (w, as the fast check returns it after its peek values) and the peek's remaining and
// reset (what a check of cost 0 reports).
type verdict struct {
	ok                             bool
	remaining, retry, reset, limit float64
	peekRemaining, peekReset       float64
	w                              [4]float64
	// ttl is the TTL commit sets (µs), unless keep: the key keeps the one it has.
	ttl  float64
	keep bool
	// held: the key holds the window the write is in (fixed_window: with keep false, in
	// the full form with a debt; else the write opens a window).
	held bool
}

func nonneg(x float64) float64 {
	if x < 0 {
		return 0
	}
	return x
}

// check decides cost at now (µs) on e (nil: no key), as the kernel's fast check does.
func (k *kernel) check(e *entry, now, cost float64) verdict {
	switch k.alg {
	case algGCRA:
		return k.gcra(e, now, cost)
	case algTokenBucket:
		return k.tokenBucket(e, now, cost)
	case algLeakyBucket:
		return k.leakyBucket(e, now, cost)
	case algFixedWindow:
		return k.fixedWindow(e, now, cost)
	}
	return k.slidingWindow(e, now, cost)
}

func (k *kernel) gcra(e *entry, now, cost float64) verdict {
	RATE, PERIOD, BURST, CAP := k.p[0], k.p[1], k.p[2], k.p[3]
	d := 0.0
	if e != nil && e.f[0] >= now {
		d = float64((e.f[0]-now)*RATE) + e.f[1]
	}
	reset := d
	if RATE != 1 {
		reset = math.Ceil(d / RATE)
	}
	if cost <= BURST {
		d2 := d + float64(cost*PERIOD)
		if d2 <= CAP {
			reset2 := d2
			if RATE != 1 {
				reset2 = math.Ceil(d2 / RATE)
			}
			remaining := math.Floor((CAP - d2) / PERIOD)
			return verdict{ok: true, remaining: remaining, reset: reset2, limit: BURST,
				peekRemaining: remaining + cost, peekReset: reset, w: [4]float64{now, d2}, ttl: reset2}
		}
		retry := d2 - CAP
		if RATE != 1 {
			retry = math.Ceil(retry / RATE)
		}
		return verdict{remaining: nonneg(math.Floor((CAP - d) / PERIOD)), retry: retry, reset: reset, limit: BURST}
	}
	return verdict{remaining: nonneg(math.Floor((CAP - d) / PERIOD)), retry: -1, reset: reset, limit: BURST}
}

// tokenBucket is fast_token_bucket's check. A key in debt (an owe took its tokens below
// zero) is denied with 0 remaining, as token_bucket.lua's check replies.
func (k *kernel) tokenBucket(e *entry, now, cost float64) verdict {
	CAPACITY, RATE, PERIOD, FULL := k.p[0], k.p[1], k.p[2], k.p[3]
	l, t := k.tokens(e, now)
	skew := t - now
	if cost > CAPACITY {
		return verdict{remaining: nonneg(math.Floor(l / PERIOD)), retry: -1, reset: skew + math.Ceil((FULL-l)/RATE), limit: CAPACITY}
	}
	c := float64(cost * PERIOD)
	if l >= c {
		l2 := l - c
		reset := skew + math.Ceil((FULL-l2)/RATE)
		remaining := math.Floor(l2 / PERIOD)
		return verdict{ok: true, remaining: remaining, reset: reset, limit: CAPACITY,
			peekRemaining: remaining + cost, peekReset: skew + math.Ceil((FULL-l)/RATE), w: [4]float64{l2, t}, ttl: reset}
	}
	return verdict{remaining: nonneg(math.Floor(l / PERIOD)), retry: skew + math.Ceil((c-l)/RATE), reset: skew + math.Ceil((FULL-l)/RATE), limit: CAPACITY}
}

// leakyBucket is fast_leaky_bucket's check. A key in debt (an owe filled it past its
// capacity) is denied with 0 remaining, as leaky_bucket.lua's check replies.
func (k *kernel) leakyBucket(e *entry, now, cost float64) verdict {
	CAPACITY, RATE, PERIOD, FULL := k.p[0], k.p[1], k.p[2], k.p[3]
	l, t := k.level(e, now)
	skew := t - now
	if cost > CAPACITY {
		return verdict{remaining: nonneg(math.Floor((FULL - l) / PERIOD)), retry: -1, reset: skew + math.Ceil(l/RATE), limit: CAPACITY}
	}
	l2 := l + float64(cost*PERIOD)
	if l2 <= FULL {
		reset := skew + math.Ceil(l2/RATE)
		remaining := math.Floor((FULL - l2) / PERIOD)
		return verdict{ok: true, remaining: remaining, reset: reset, limit: CAPACITY,
			peekRemaining: remaining + cost, peekReset: skew + math.Ceil(l/RATE), w: [4]float64{l2, t}, ttl: reset}
	}
	return verdict{remaining: nonneg(math.Floor((FULL - l) / PERIOD)), retry: skew + math.Ceil((l2-FULL)/RATE), reset: skew + math.Ceil(l/RATE), limit: CAPACITY}
}

func (k *kernel) fixedWindow(e *entry, now, cost float64) verdict {
	LIMIT, WINDOW := k.p[0], k.p[1]
	win, n, held := math.Floor(now/WINDOW), 0.0, false
	var io, d, l float64
	debt := false
	hasW := e != nil && e.has&1 != 0
	if hasW && e.has&4 != 0 && e.f[2] == e.f[0] {
		d, l = e.field(3), e.field(4)
		if d > 0 && l > 0 {
			io, debt = e.f[0], true
		}
	}
	if hasW && e.f[0] >= win {
		win, n, held = e.f[0], e.field(1), true
	} else if debt {
		n = d - float64((win-io-1)*l)
		if n <= 0 {
			n, debt = 0, false
		}
	}
	toEnd := float64((win+1)*WINDOW) - now
	reset := 0.0
	if n > 0 {
		reset = toEnd
		if debt {
			reset = float64((io+1+math.Ceil(d/l))*WINDOW) - now
		}
	}
	if cost > LIMIT {
		return verdict{remaining: nonneg(LIMIT - n), retry: -1, reset: reset, limit: LIMIT}
	}
	if n+cost <= LIMIT {
		peek, ttl := reset, toEnd
		if debt && io == win {
			ttl = reset
		}
		if cost > 0 {
			reset = ttl
		}
		return verdict{ok: true, remaining: LIMIT - n - cost, reset: reset, limit: LIMIT,
			peekRemaining: LIMIT - n, peekReset: peek, w: [4]float64{win, n + cost}, ttl: ttl, keep: held && !debt, held: held}
	}
	if debt {
		after := io + 1 + math.Ceil(nonneg(d+cost-LIMIT)/l)
		if after > win+1 {
			return verdict{remaining: nonneg(LIMIT - n), retry: float64(after*WINDOW) - now, reset: reset, limit: LIMIT}
		}
	}
	return verdict{remaining: nonneg(LIMIT - n), retry: toEnd, reset: reset, limit: LIMIT}
}

func (k *kernel) slidingWindow(e *entry, now, cost float64) verdict {
	LIMIT, WINDOW, WINDOW2, LIMIT_WINDOW := k.p[0], k.p[1], k.p[2], k.p[3]
	win := math.Floor(now / WINDOW)
	ev, cur, prev, shift, held := now-float64(win*WINDOW), 0.0, 0.0, 0.0, false
	if e != nil && e.has&1 != 0 {
		w := e.f[0]
		switch {
		case w == win:
			cur, prev, held = e.field(1), e.field(2), true
		case w == win-1:
			prev = e.field(1)
		case w > win:
			win, ev, cur, prev, shift, held = w, 0, e.field(1), e.field(2), float64(w*WINDOW)-now, true
		}
	}
	weight := float64(prev * (WINDOW - ev))
	te := ev - shift
	used := math.Ceil(weight / WINDOW)
	reset := 0.0
	if cur > 0 {
		reset = WINDOW2 - te
	} else if weight > 0 {
		reset = WINDOW - te
	}
	if cost > LIMIT {
		return verdict{remaining: nonneg(LIMIT - cur - used), retry: -1, reset: reset, limit: LIMIT}
	}
	if weight+float64((cur+cost)*WINDOW) <= LIMIT_WINDOW {
		peek := reset
		if cost > 0 {
			reset = WINDOW2 - te
		}
		return verdict{ok: true, remaining: LIMIT - cur - cost - used, reset: reset, limit: LIMIT,
			peekRemaining: LIMIT - cur - used, peekReset: peek, w: [4]float64{win, cur + cost, prev}, ttl: WINDOW2 - te, keep: held}
	}
	room := LIMIT - cur - cost
	if room >= 0 {
		e2 := WINDOW - math.Floor(float64(room*WINDOW)/prev)
		if e2 < WINDOW {
			return verdict{remaining: nonneg(LIMIT - cur - used), retry: e2 - te, reset: reset, limit: LIMIT}
		}
	}
	e3 := 0.0
	if cur > 0 {
		e3 = nonneg(WINDOW - math.Floor(float64((LIMIT-cost)*WINDOW)/cur))
	}
	return verdict{remaining: nonneg(LIMIT - cur - used), retry: WINDOW - te + e3, reset: reset, limit: LIMIT}
}

// commit writes v's pending write to e (a new entry when the key is absent) at nowMs, the
// store's clock in milliseconds; slack is the call's clock skew (µs), which every TTL set
// carries (the prelude's ttl_ms).
func (k *kernel) commit(e *entry, v *verdict, nowMs int64, slack float64) {
	switch k.alg {
	case algGCRA:
		// SET key (the TAT now + d2) PX until it has passed (the check's reset).
		k.store(e, v.w[0], v.w[1], nowMs, slack)
	case algTokenBucket, algLeakyBucket:
		e.set(0, v.w[0])
		e.set(1, v.w[1])
		e.expire(nowMs, v.ttl, slack)
	case algFixedWindow:
		switch {
		case v.keep: // HINCRBY of the count's field, in either form
			e.set(1, v.w[1])
		case v.held: // the full form, with a debt
			e.set(0, v.w[0])
			e.set(1, v.w[1])
			e.expire(nowMs, v.ttl, slack)
		default: // a new window: the key rewritten compact (a commit's cost is above 0)
			e.has = compact
			e.set(0, v.w[0])
			e.set(1, v.w[1])
			e.expire(nowMs, v.ttl, slack)
		}
	case algSlidingWindow:
		e.set(0, v.w[0])
		e.set(1, v.w[1])
		e.set(2, v.w[2])
		if !v.keep {
			e.expire(nowMs, v.ttl, slack)
		}
	}
}

// ttlMs is the prelude's ttl_ms: the PEXPIRE argument that makes a key outlive the next
// us microseconds, ceil((nonneg(us) + slack) / 1000) + 1.
func ttlMs(us, slack float64) int64 {
	if us < 0 {
		us = 0
	}
	return int64(math.Ceil((us+slack)/1000) + 1)
}
