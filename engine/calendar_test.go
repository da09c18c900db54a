package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/calendar"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// calendarPolicy sells 3 requests a calendar month in New York and 2 a calendar day in
// Kathmandu (UTC+5:45), per tenant.
const calendarPolicy = `
policy "p" {
  clock = "client"
  rule "monthly" {
    algorithm = "fixed_window"
    key       = request.tenant
    limit     = 3
    window    = "calendar_month"
    time_zone = "America/New_York"
  }
  rule "daily" {
    algorithm = "fixed_window"
    key       = request.tenant
    limit     = 2
    window    = "calendar_day"
    time_zone = "Asia/Kathmandu"
  }
}
`

// TestCalendarQuotas: on a virtual clock, a month's quota ends at the zone's midnight,
// exactly (the retry-after of a denial is to that instant, to the microsecond), across
// the US daylight-saving change of March 2027, and a day's quota at Kathmandu's
// midnight, 18:15 UTC; on Redis and on luahost.
func TestCalendarQuotas(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	ktm, _ := time.LoadLocation("Asia/Kathmandu")
	clock := newFrozen()
	for name, b := range backends(t, clock) {
		t.Run(name, func(t *testing.T) {
			e := New(b, compile(t, calendarPolicy), WithClock(clock.now))
			ctx := context.Background()
			set := func(at time.Time) { clock.us.Store(at.UnixMicro()) }
			decide := func(step, tenant string, allowed bool, retry time.Duration, rule string) {
				t.Helper()
				d, err := e.Allow(ctx, Attrs{"tenant": tenant})
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				by := ""
				if !d.Allowed {
					by = d.Rules[d.Decider].Rule
				}
				if d.Allowed != allowed || d.RetryAfter != retry || by != rule {
					t.Fatalf("%s: allowed %v, retry-after %v, rule %q; want %v, %v, %q", step, d.Allowed, d.RetryAfter, by, allowed, retry, rule)
				}
			}
			// The daily quota: 2 a day in Kathmandu, whose day starts at 18:15 UTC.
			evening := time.Date(2027, time.March, 13, 18, 14, 0, 0, time.UTC)
			set(evening)
			decide("day 1", "a", true, 0, "")
			decide("day 1, 2nd", "a", true, 0, "")
			decide("day 1, 3rd", "a", false, time.Minute, "daily")
			set(time.Date(2027, time.March, 14, 0, 0, 0, 0, ktm))
			decide("Kathmandu's midnight", "a", true, 0, "")
			// The monthly quota: March 2027 in New York lasts 31 days less an hour; its
			// third request is spent, the fourth waits for April 1st, 00:00 EDT.
			decide("month, 4th", "a", false, time.Date(2027, time.April, 1, 0, 0, 0, 0, ny).Sub(clock.now()), "monthly")
			april := time.Date(2027, time.April, 1, 0, 0, 0, 0, ny)
			set(april.Add(-time.Microsecond))
			decide("1µs before April", "a", false, time.Microsecond, "monthly")
			decide("another tenant", "b", true, 0, "")
			set(april)
			d, err := e.Allow(ctx, Attrs{"tenant": "a"})
			if err != nil || !d.Allowed {
				t.Fatalf("April's first: %+v %v", d, err)
			}
			if r := d.Rules[0]; r.Remaining != 2 || r.ResetAfter != time.Date(2027, time.May, 1, 0, 0, 0, 0, ny).Sub(april) {
				t.Fatalf("April's first: remaining %d, reset after %v; want 2, 30 days", r.Remaining, r.ResetAfter)
			}
			// Each result names its calendar unit and the period it counted in: April's
			// 30 days, and Kathmandu's day of 24 hours.
			if r := d.Rules[0]; r.Calendar != calendar.Month || r.Window != 30*24*time.Hour {
				t.Errorf("April's window: %v %v, want month, 720h", r.Calendar, r.Window)
			}
			if r := d.Rules[1]; r.Calendar != calendar.Day || r.Window != 24*time.Hour {
				t.Errorf("the day's window: %v %v, want day, 24h", r.Calendar, r.Window)
			}
			set(time.Date(2027, time.March, 20, 12, 0, 0, 0, ny))
			if d, err := e.Peek(ctx, Attrs{"tenant": "c"}); err != nil || d.Rules[0].Window != 31*24*time.Hour-time.Hour {
				t.Fatalf("March's window: %+v %v, want 31 days less the hour clocks skip", d, err)
			}
		})
	}
}

// TestCalendarClocksApart: a server clock (luahost's here) more than a period from the
// engine's clock is refused with an error that says so, rather than counted in a period
// the engine did not mean, and the decision is the policy's on_error (allow, the
// default); a day apart is fine.
func TestCalendarClocksApart(t *testing.T) {
	engineClock, serverClock := newFrozen(), newFrozen()
	src := strings.Replace(calendarPolicy, `clock = "client"`, `clock = "server"`, 1)
	e := New(NewLocal(luahost.New(luahost.WithClock(clockFunc(serverClock.now)))), compile(t, src), WithClock(engineClock.now))
	ctx := context.Background()
	serverClock.advance(24 * time.Hour)
	if _, err := e.Allow(ctx, Attrs{"tenant": "a"}); err != nil {
		t.Fatalf("a day apart: %v", err)
	}
	serverClock.advance(3 * 24 * time.Hour)
	d, err := e.Allow(ctx, Attrs{"tenant": "a"})
	if err != nil || d.Source != FromFailOpen || d.Err == nil || !strings.Contains(d.Err.Error(), "more than a period apart") {
		t.Fatalf("four days apart on a daily quota: %+v %v, want the clocks' error, failing open", d, err)
	}
}

// TestCalendarOnACluster: a calendar rule decides on a 3-node Redis Cluster as on one
// server (its span travels with each call to its key's node).
func TestCalendarOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	clock := newFrozen()
	ny, _ := time.LoadLocation("America/New_York")
	end := time.Date(2027, time.November, 1, 0, 0, 0, 0, ny)
	clock.us.Store(end.Add(-time.Hour).UnixMicro())
	monthly, _, _ := strings.Cut(calendarPolicy, `  rule "daily"`)
	e := New(NewRedis(cl.Client(t)), compile(t, monthly+"}\n"), WithClock(clock.now), WithTimeout(time.Minute))
	ctx := context.Background()
	for _, tenant := range []string{"t1", "t2", "t3", "t4"} {
		for i, want := range []bool{true, true, true, false} {
			d, err := e.Allow(ctx, Attrs{"tenant": tenant})
			if err != nil || d.Allowed != want {
				t.Fatalf("%s #%d: %+v %v", tenant, i+1, d, err)
			}
		}
	}
	clock.us.Store(end.UnixMicro())
	d, err := e.Allow(ctx, Attrs{"tenant": "t1"})
	if err != nil || !d.Allowed || d.Rules[0].Remaining != 2 {
		t.Fatalf("November's first: %+v %v", d, err)
	}
}
