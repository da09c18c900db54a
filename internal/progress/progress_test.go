package progress

import (
	"strings"
	"testing"
	"time"
)

// clock is a virtual clock: tests move it by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time           { return c.t }
func (c *clock) add(d time.Duration)      { c.t = c.t.Add(d) }
func newClock() *clock                    { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func draws(out *strings.Builder) []string { return strings.Split(out.String(), "\r\033[K")[1:] }

func TestLine(t *testing.T) {
	tests := []struct {
		name string
		run  func(l *Line, c *clock)
		want []string // what each \r\033[K drew ("" for a clear)
	}{
		{"quiet for a short run", func(l *Line, c *clock) {
			l.Set("a")
			c.add(Delay - time.Millisecond)
			l.Set("b")
			l.Tick()
			l.Clear()
		}, nil},
		{"shown after the delay, cleared at the end", func(l *Line, c *clock) {
			l.Set("a")
			c.add(Delay)
			l.Set("b")
			l.Clear()
		}, []string{"b", ""}},
		{"a tick shows the status the delay held back", func(l *Line, c *clock) {
			l.Set("a")
			c.add(3 * time.Second)
			l.Tick()
			l.Clear()
		}, []string{"a", ""}},
		{"at most once every Every", func(l *Line, c *clock) {
			c.add(Delay)
			l.Set("1")
			c.add(Every / 2)
			l.Set("2") // held back
			c.add(Every / 2)
			l.Set("3")
			l.Set("4") // held back
			c.add(Every)
			l.Tick() // draws the held-back 4
			c.add(Every)
			l.Tick() // nothing new
			l.Clear()
		}, []string{"1", "3", "4", ""}},
		{"nothing to clear, nothing drawn", func(l *Line, c *clock) {
			c.add(time.Minute)
			l.Clear()
			l.Tick()
		}, nil},
		{"drawn again after a clear", func(l *Line, c *clock) {
			c.add(Delay)
			l.Set("a")
			l.Clear()
			l.Set("b")
			l.Clear()
		}, []string{"a", "", "b", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			c := newClock()
			tc.run(New(&out, c.now), c)
			got := draws(&out)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("drew %q, want %q", got, tc.want)
			}
		})
	}
}

// A line on no terminal (nil writer), and a nil line, draw nothing and do not fail.
func TestLineNowhere(t *testing.T) {
	var nilLine *Line
	nilLine.Set("a")
	nilLine.Tick()
	nilLine.Clear()
	c := newClock()
	l := New(nil, c.now)
	c.add(time.Minute)
	l.Set("a")
	l.Clear()
	if l.shown {
		t.Error("a line without a writer was drawn")
	}
}
