package engine

import (
	"sync/atomic"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/calendar"
)

// A calendar rule's calls carry the bounds of the periods around the engine's clock
// (algorithms.Span); the script finds among them the period that holds its own clock (the
// server's, or the client clock the call sends), so a server clock that is off by up to
// a period still counts each request in the right one. Computing the bounds takes a few
// microseconds of time-zone arithmetic, so a Plan keeps each rule's latest span and
// computes it again only when the clock leaves the period it was computed in.

// spans is one calendar rule's latest span.
type spans struct {
	period calendar.Period
	latest atomic.Pointer[algorithms.Span]
}

// around returns the span around t, computed again when t is outside the latest span's
// middle period.
func (s *spans) around(t time.Time) *algorithms.Span {
	us := t.UnixMicro()
	if sp := s.latest.Load(); sp != nil && us >= sp[2] && us < sp[3] {
		return sp
	}
	sp := algorithms.SpanAround(s.period, t)
	s.latest.Store(&sp)
	return &sp
}
