package luahost

import (
	"sync"
	"time"
)

// Clock gives the host's notion of now. TIME answers it, relative TTLs
// start from it and keys expire by it, at millisecond precision as in Redis.
// Now must be safe to call from any goroutine.
type Clock interface {
	Now() time.Time
}

// wallClock is the default Clock: the machine's time.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// ManualClock is a Clock that moves only when told to, for simulations and
// tests. Its methods are safe for concurrent use.
type ManualClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewManualClock returns a ManualClock reading t.
func NewManualClock(t time.Time) *ManualClock {
	return &ManualClock{t: t}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t, backwards or forwards.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Advance moves the clock by d (which may be negative) and returns the new
// time.
func (c *ManualClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}
