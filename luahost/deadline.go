package luahost

import (
	"context"
	"time"
)

// deadline is the context a script runs under: it reports done once the
// host's deadline has passed or the caller's context is done. gopher-lua
// asks Done before every instruction, so Done looks at the clock and the
// caller's context only every 1024th time, and otherwise returns a nil
// channel, which a select never picks.
type deadline struct {
	at     time.Time // zero: no deadline
	parent context.Context
	pdone  <-chan struct{} // parent.Done(); nil when it can never be done
	n      uint32
	err    error // why the script must stop; nil while it may run
	// steps counts instructions against limit (0: no limit).
	steps, limit uint64
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (d *deadline) Done() <-chan struct{} {
	if d.err != nil {
		return closedChan
	}
	d.n++
	if d.limit > 0 {
		d.steps++
		if d.steps > d.limit {
			d.err = ErrInstructionLimit
			return closedChan
		}
	}
	if d.n&1023 != 0 {
		return nil
	}
	return d.check()
}

func (d *deadline) check() <-chan struct{} {
	if d.pdone != nil {
		select {
		case <-d.pdone:
			d.err = d.parent.Err()
			return closedChan
		default:
		}
	}
	// d.at carries a monotonic reading, so Until reads only the monotonic clock, where
	// Now reads the wall clock too.
	if !d.at.IsZero() && time.Until(d.at) < 0 {
		d.err = ErrTimeout
		return closedChan
	}
	return nil
}

func (d *deadline) Err() error { return d.err }

func (d *deadline) Deadline() (time.Time, bool) { return d.at, !d.at.IsZero() }

func (d *deadline) Value(key any) any {
	if d.parent == nil {
		return nil
	}
	return d.parent.Value(key)
}
