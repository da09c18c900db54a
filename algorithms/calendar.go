package algorithms

import (
	"fmt"
	"time"

	"github.com/rlctl/rlctl/calendar"
)

// SpanLen is the number of period bounds a calendar rule's call carries (prelude.lua's
// CAL_BOUNDS).
const SpanLen = 6

// Span is the bounds of SpanLen consecutive calendar periods around a caller's clock, in
// microseconds since the Unix epoch, increasing: the caller's clock is in [Span[2],
// Span[3]), so the script finds the period that holds its own clock (the server's, or the
// caller's) as long as the two are less than a period apart, and refuses the call
// otherwise. A rule with a calendar (Rule.Calendar) decides with the period [Span[i],
// Span[i+1]) that holds the call's instant as its window.
type Span [SpanLen]int64

// SpanAround returns the Span of period p around t: the two periods before the one that
// holds t, that one, and the two after it.
func SpanAround(p calendar.Period, t time.Time) Span {
	start, end := p.Bounds(t)
	var s Span
	s[2], s[3] = start.UnixMicro(), end.UnixMicro()
	prev := start
	for i := 1; i >= 0; i-- {
		prev, _ = p.Bounds(prev.Add(-time.Microsecond))
		s[i] = prev.UnixMicro()
	}
	next := end
	for i := 4; i < SpanLen; i++ {
		_, next = p.Bounds(next)
		s[i] = next.UnixMicro()
	}
	return s
}

// Holds reports whether the instant now (µs) is within the span's periods, [Span[0],
// Span[SpanLen-1]).
func (s *Span) Holds(now int64) bool { return now >= s[0] && now < s[SpanLen-1] }

// Window returns the period of the span that holds now: its first instant (the window's
// id in the rule's key) and its end. now must be within the span (Holds).
func (s *Span) Window(now int64) (start, end int64) {
	for i := 1; i < SpanLen-1; i++ {
		if now < s[i] {
			return s[i-1], s[i]
		}
	}
	return s[SpanLen-2], s[SpanLen-1]
}

// check reports whether the span is well formed: increasing, from 0 up to 2^53.
func (s *Span) check() error {
	for i, v := range s {
		if v < 0 || v > MaxInt || i > 0 && v <= s[i-1] {
			return fmt.Errorf("calendar bounds %v: want %d increasing instants in [0, 2^53] µs", *s, SpanLen)
		}
	}
	return nil
}

// Calendared reports whether a's rules may take a calendar: their window is then a
// calendar period (prelude.lua's CALENDARED).
func (a *Algorithm) Calendared() bool { return a == builtin[0] }
