package algorithms

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rlctl/rlctl/calendar"
	"github.com/rlctl/rlctl/internal/redistest"
)

// calendarPeriods are the calendars the differential traces draw: daylight-saving zones
// of both hemispheres, a half-hour change (Lord Howe), a 5:45 offset (Kathmandu), and
// periods of every unit.
var calendarPeriods = []struct{ unit, zone string }{
	{"calendar_day", "America/New_York"},
	{"calendar_day", "Europe/Berlin"},
	{"calendar_day", "Australia/Lord_Howe"},
	{"calendar_day", "Asia/Kathmandu"},
	{"calendar_week_sunday", "America/Santiago"},
	{"calendar_month", "Europe/Berlin"},
	{"calendar_month", "UTC"},
	{"calendar_year", "America/New_York"},
}

// calendarStart returns where a trace of calendar rule p starts: shortly before one of
// its zone's changes (a daylight-saving day, when the zone has one) or before the end of
// February 2024 (a leap day), so that traces cross the periods that are odd.
func calendarStart(rng *rand.Rand, p *calendar.Period) int64 {
	at := time.Date(2024, time.February, 29, 0, 0, 0, 0, p.Loc)
	if rng.IntN(3) > 0 {
		t := time.Date(2023+rng.IntN(4), time.Month(1+rng.IntN(12)), 1, 0, 0, 0, 0, p.Loc)
		if _, end := t.ZoneBounds(); !end.IsZero() {
			at = end
		}
	}
	if p.Unit >= calendar.Month {
		_, end := p.Bounds(at)
		at = end
	}
	return at.Add(-time.Duration(rng.Int64N(int64(36 * time.Hour)))).UnixMicro()
}

// calendarKeys draws fixed_window keys with calendars, of small limits so that windows
// fill within a trace.
func calendarKeys(rng *rand.Rand, prefix string) []traceKey {
	c := calendarPeriods[rng.IntN(len(calendarPeriods))]
	p, err := calendar.Parse(c.unit, c.zone)
	if err != nil {
		panic(err)
	}
	keys := make([]traceKey, 1+rng.IntN(2))
	a := builtin[0]
	for i := range keys {
		keys[i] = traceKey{key: fmt.Sprintf("%sk%d", prefix, i), alg: a, params: []int64{rng.Int64N(12), p.Shortest().Microseconds()}, cal: &p}
		keys[i].lists = randomLists(rng)
		keys[i].ovr = rng.IntN(3) == 0
		keys[i].key = boxedKey(keys[i])
	}
	return keys
}

// TestCalendarMatchesModel runs random traces of calendar rules (days, weeks, months and
// years in zones with daylight saving, half-hour changes and odd offsets, starting near a
// change or a leap day) on a real redis-server and on luahost, each reply compared with
// the reference model, whose windows are the periods the calendar package computes; and
// the same rules compiled into a script, on luahost and by FCALL.
func TestCalendarMatchesModel(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	for _, ex := range []executor{loadRedis(t), hostExec{script: Default()}, compiledExec{}, compiledExec{rdb: rdb, fcall: true}} {
		t.Run(ex.name(), func(t *testing.T) {
			t.Parallel()
			checkTraces(t, ex, 3, traceCount(), 60, calendarKeys)
		})
	}
}

// TestCalendarWindow pins a calendar month around a daylight-saving change on real Redis:
// a March in New York (31 days less an hour) takes its limit once, the denial's retry
// and reset end exactly at April's first instant, and April starts empty.
func TestCalendarWindow(t *testing.T) {
	p, err := calendar.Parse("calendar_month", "America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	ex := loadRedis(t)
	key := freshPrefix(t) + "month"
	april := time.Date(2027, time.April, 1, 0, 0, 0, 0, p.Loc)
	at := func(t time.Time, cost int64) Call {
		return Call{Op: OpCheck, Now: t.UnixMicro(), Rules: []Rule{{Key: key, Algorithm: builtin[0], Cost: cost, Params: []int64{3, p.Shortest().Microseconds()}, Calendar: true, Span: SpanAround(p, t)}}}
	}
	mid := time.Date(2027, time.March, 20, 12, 0, 0, 0, p.Loc)
	calls := []Call{at(mid, 3), at(mid, 1), at(april.Add(-time.Microsecond), 1), at(april, 1)}
	got, err := ex.run(calls)
	if err != nil {
		t.Fatal(err)
	}
	if !got[0].Allowed || got[1].Allowed || got[2].Allowed || !got[3].Allowed {
		t.Fatalf("verdicts %v %v %v %v, want allowed, denied, denied, allowed", got[0].Allowed, got[1].Allowed, got[2].Allowed, got[3].Allowed)
	}
	if want := april.Sub(mid).Microseconds(); got[1].Rules[0].RetryAfter != want || got[0].Rules[0].ResetAfter != want {
		t.Errorf("retry %d µs, reset %d µs; want both %d µs (to April's first instant)", got[1].Rules[0].RetryAfter, got[0].Rules[0].ResetAfter, want)
	}
	if got[2].Rules[0].RetryAfter != 1 {
		t.Errorf("a microsecond before April: retry %d µs, want 1", got[2].Rules[0].RetryAfter)
	}
	if got[3].Rules[0].Remaining != 2 {
		t.Errorf("April's first request leaves %d, want 2", got[3].Rules[0].Remaining)
	}
	want := time.Date(2027, time.March, 1, 0, 0, 0, 0, p.Loc)
	if april.Sub(want) != 31*24*time.Hour-time.Hour {
		t.Fatalf("March 2027 in New York lasts %v", april.Sub(want))
	}
}
