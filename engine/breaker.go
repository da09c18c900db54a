package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// BreakerState is the state of the engine's circuit breaker.
type BreakerState uint8

const (
	// Closed: calls reach the backend; consecutive failures are counted.
	Closed BreakerState = iota
	// Open: no call reaches the backend until the cooldown ends; policies decide by on_error.
	Open
	// HalfOpen: the cooldown ended and one call (the probe) is asking the backend; the
	// others decide by on_error until the probe resolves.
	HalfOpen
)

func (s BreakerState) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	default:
		return "closed"
	}
}

// outcome is how a call that the breaker let through ended.
type outcome uint8

const (
	succeeded outcome = iota // the backend answered (a script error is an answer)
	failed                   // a backend failure
	abandoned                // the caller stopped waiting: says nothing about the backend
)

// breaker stops calling a backend that keeps failing. Its transitions:
//
//	Closed   --failure (threshold reached)-->  Open      (until now+cooldown)
//	Closed   --failure (below threshold)-->    Closed    (failures+1)
//	Closed   --success-->                      Closed    (failures reset)
//	Open     --acquire after the cooldown-->   HalfOpen  (the caller is the probe)
//	HalfOpen --probe succeeded-->              Closed
//	HalfOpen --probe failed-->                 Open      (until now+cooldown)
//	HalfOpen --probe abandoned-->              Open      (cooldown already over: the next call probes)
//	HalfOpen --acquire after probe+cooldown--> HalfOpen  (a probe that never resolved is replaced)
//
// Every call acquire lets through must be resolved exactly once. An outcome of a call
// that started in an earlier state (a generation ago) is ignored, so a slow call from
// before the breaker opened cannot close it, and a replaced probe cannot resolve it.
type breaker struct {
	threshold int64
	cooldown  time.Duration
	changed   func(from, to BreakerState) // called with mu held; may be nil

	// quiet is gen<<1 while the breaker is Closed with no failure counted, else
	// gen<<1 | 1: the state in which a call's acquire and its success change nothing,
	// read without the lock (the zero breaker is Closed, generation 0).
	quiet atomic.Uint64

	mu         sync.Mutex
	state      BreakerState
	gen        uint64 // bumped on every state change
	failures   int64
	until      time.Time // Open: end of the cooldown
	probeStart time.Time // HalfOpen: when the probe was let through
}

// ticket is a call the breaker let through.
type ticket struct {
	gen   uint64
	probe bool
}

// acquire reports whether a call may reach the backend at now, and its ticket.
func (b *breaker) acquire(clock func() time.Time) (ticket, bool) {
	if q := b.quiet.Load(); q&1 == 0 {
		return ticket{gen: q >> 1}, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var now time.Time
	switch b.state {
	case Open:
		if now = clock(); now.Before(b.until) {
			return ticket{}, false
		}
	case HalfOpen:
		if now = clock(); now.Before(b.probeStart.Add(b.cooldown)) {
			return ticket{}, false
		}
	default:
		return ticket{gen: b.gen}, true
	}
	b.set(HalfOpen)
	b.probeStart = now
	return ticket{gen: b.gen, probe: true}, true
}

// resolve records how t's call ended at now.
func (b *breaker) resolve(t ticket, o outcome, clock func() time.Time) {
	if o == succeeded && !t.probe && b.quiet.Load() == t.gen<<1 {
		return // Closed with no failure counted: a success changes nothing
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.gen != b.gen {
		return
	}
	switch {
	case b.state == Closed && o == succeeded:
		b.failures = 0
		b.quiet.Store(b.gen << 1)
	case b.state == Closed && o == failed:
		b.failures++
		b.quiet.Store(b.gen<<1 | 1)
		if b.failures >= b.threshold {
			b.open(clock())
		}
	case b.state == HalfOpen && t.probe && o == succeeded:
		b.set(Closed)
	case b.state == HalfOpen && t.probe && o == failed:
		b.open(clock())
	case b.state == HalfOpen && t.probe && o == abandoned:
		b.set(Open)
		b.until = clock()
	}
}

func (b *breaker) open(now time.Time) {
	b.set(Open)
	b.until = now.Add(b.cooldown)
}

func (b *breaker) set(s BreakerState) {
	from := b.state
	b.state, b.failures = s, 0
	b.gen++
	if s == Closed {
		b.quiet.Store(b.gen << 1)
	} else {
		b.quiet.Store(b.gen<<1 | 1)
	}
	if b.changed != nil && from != s {
		b.changed(from, s)
	}
}

// current returns the breaker's state.
func (b *breaker) current() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}
