package httplimit_test

import (
	"strconv"
	"testing"
	"time"
)

// TestCalendarHeaders: a calendar quota's headers count to the zone's next midnight, on
// the day clocks go forward (23 hours) as on any other: after the quota is spent,
// Retry-After and the RateLimit field's t are the seconds to Berlin's midnight, and a
// client that waits them gets through.
func TestCalendarHeaders(t *testing.T) {
	for _, clock := range []string{"server", "client"} {
		t.Run(clock, func(t *testing.T) {
			g := newRig(t, `
policy "p" {
  clock = "`+clock+`"
  rule "daily" {
    algorithm = "fixed_window"
    key       = request.ip
    limit     = 2
    window    = "calendar_day"
    time_zone = "Europe/Berlin"
  }
}`, rigOpts{})
			berlin, _ := time.LoadLocation("Europe/Berlin")
			noon := time.Date(2027, time.March, 28, 12, 0, 0, 0, berlin) // a day of 23 hours
			g.clock.Set(noon)
			for i := range 2 {
				if r := g.get("/"); r.status != 200 {
					t.Fatalf("request %d: %d", i+1, r.status)
				}
			}
			r := g.get("/")
			midnight := time.Date(2027, time.March, 29, 0, 0, 0, 0, berlin)
			want := strconv.Itoa(int(midnight.Sub(noon) / time.Second))
			if r.status != 429 || r.header.Get("Retry-After") != want || r.header.Get("Ratelimit") != `"p.daily";r=0;t=`+want {
				t.Fatalf("spent: %d, Retry-After %q, RateLimit %q; want 429, %s s to Berlin's midnight", r.status, r.header.Get("Retry-After"), r.header.Get("Ratelimit"), want)
			}
			if got := r.header.Get("Ratelimit-Policy"); got != `"p.daily";q=2;w=82800` {
				t.Errorf("RateLimit-Policy %q, want the day's own 23 hours as w", got)
			}
			g.clock.Set(midnight.Add(-time.Second))
			if r := g.get("/"); r.status != 429 {
				t.Fatalf("a second before midnight: %d", r.status)
			}
			g.clock.Set(midnight)
			if r := g.get("/"); r.status != 200 {
				t.Fatalf("at midnight: %d", r.status)
			}
		})
	}
}
