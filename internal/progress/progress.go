// Package progress draws a one-line progress indicator on a terminal for a long run: it
// stays quiet for the first Delay, then redraws the line at most once every Every
// (so a few times a second) with the latest status, and Clear erases it. Time comes from
// an injected clock, so the logic is tested without waiting.
package progress

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Defaults: a run shorter than Delay shows nothing; the line changes at most 1/Every
// times a second.
const (
	Delay = 2 * time.Second
	Every = 250 * time.Millisecond
)

// Line is a progress line on w. Its methods are safe for concurrent use.
type Line struct {
	w            io.Writer
	now          func() time.Time
	start        time.Time
	delay, every time.Duration

	mu     sync.Mutex
	shown  bool      // the line is on the terminal
	drawn  time.Time // when it was last drawn
	status string    // the latest status, drawn or not
	text   string    // the status on the terminal, when shown
}

// New returns a line on w, a terminal, that starts counting its delay now (by clock
// now; time.Now when nil). A nil w gives a line that draws nothing.
func New(w io.Writer, now func() time.Time) *Line {
	if now == nil {
		now = time.Now
	}
	return &Line{w: w, now: now, start: now(), delay: Delay, every: Every}
}

// Set makes status the line's text ("verifying: 3 of 21 checks"), drawn now when the run
// has lasted at least the delay and the line was not drawn within the last Every; else
// it is kept for the next Set or Tick.
func (l *Line) Set(status string) {
	if l == nil || l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.status = status
	l.draw()
}

// Tick draws the latest status if it is due, as Set would: a caller whose status changes
// rarely calls it from a ticker so the line still appears after the delay.
func (l *Line) Tick() {
	if l == nil || l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.draw()
}

// Clear erases the line if it was drawn; the terminal is then as if it never was. Set
// after Clear draws again.
func (l *Line) Clear() {
	if l == nil || l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shown {
		fmt.Fprint(l.w, "\r\033[K")
		l.shown = false
	}
}

func (l *Line) draw() {
	if l.status == "" || (l.shown && l.status == l.text) {
		return
	}
	t := l.now()
	if t.Sub(l.start) < l.delay || (l.shown && t.Sub(l.drawn) < l.every) {
		return
	}
	fmt.Fprintf(l.w, "\r\033[K%s", l.status)
	l.shown, l.drawn, l.text = true, t, l.status
}

// Run calls Tick every Every until stop is called, for a line whose status may not
// change for a while; stop also clears the line.
func (l *Line) Run() (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(Every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				l.Tick()
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		l.Clear()
	}
}
