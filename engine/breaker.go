package engine

import (
	"sync"
	"time"
)

// breaker stops calling a backend that keeps failing: after threshold consecutive failures
// it opens for cooldown, then lets one call through; that call's outcome closes it again
// or reopens it.
type breaker struct {
	threshold int64
	cooldown  time.Duration

	mu        sync.Mutex
	failures  int64
	openUntil time.Time
	probing   bool
}

func (b *breaker) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openUntil.IsZero() {
		return true
	}
	if now.Before(b.openUntil) || b.probing {
		return false
	}
	b.probing = true
	return true
}

func (b *breaker) success() {
	b.mu.Lock()
	b.failures, b.openUntil, b.probing = 0, time.Time{}, false
	b.mu.Unlock()
}

func (b *breaker) failure(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	if b.probing || b.failures >= b.threshold {
		b.openUntil, b.probing = now.Add(b.cooldown), false
	}
}
