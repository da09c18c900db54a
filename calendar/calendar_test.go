package calendar

import (
	"testing"
	"time"
)

// zones: the US and EU daylight-saving changes, a zone with a non-hour offset and none
// (Kathmandu), half-hour changes (Lord Howe), changes at midnight (Havana, Santiago,
// Beirut, São Paulo until 2019), a skipped day (Apia, 2011-12-30) and a negative
// half-hour offset (St John's).
var zones = []string{"America/New_York", "Europe/Berlin", "Asia/Kathmandu", "Australia/Lord_Howe", "America/Havana",
	"America/Santiago", "Asia/Beirut", "America/Sao_Paulo", "Pacific/Apia", "America/St_Johns", "UTC"}

// TestBoundsBruteForce: for instants every hour (every five in -short) over years with
// every kind of change, the period that contains t holds it, starts on its unit's first
// local day at that day's first instant (the instant before is on another local date),
// and ends where the next period starts.
func TestBoundsBruteForce(t *testing.T) {
	step := time.Hour
	if testing.Short() {
		step = 5 * time.Hour
	}
	units := []Period{{Unit: Day}, {Unit: Week, WeekStart: time.Monday}, {Unit: Week, WeekStart: time.Sunday}, {Unit: Month}, {Unit: Year}}
	for _, zone := range zones {
		loc, err := Zone(zone)
		if err != nil {
			t.Fatal(err)
		}
		for _, years := range [][2]int{{2011, 2012}, {2016, 2016}, {2024, 2024}} {
			from := time.Date(years[0], 1, 1, 0, 0, 0, 0, time.UTC)
			to := time.Date(years[1]+1, 1, 1, 0, 0, 0, 0, time.UTC)
			for _, p := range units {
				p.Loc = loc
				for at := from; at.Before(to); at = at.Add(step) {
					start, end := p.Bounds(at)
					ls := start.In(loc)
					switch {
					case at.Before(start) || !at.Before(end):
						t.Fatalf("%s %s at %v: [%v, %v) does not hold it", zone, p.Unit, at.In(loc), ls, end.In(loc))
					case sameDate(start.Add(-time.Nanosecond).In(loc), ls):
						t.Fatalf("%s %s at %v: starts at %v, which is not its local date's first instant", zone, p.Unit, at.In(loc), ls)
					case p.Unit == Week && ls.Weekday() != p.WeekStart,
						p.Unit == Month && ls.Day() != 1,
						p.Unit == Year && (ls.Day() != 1 || ls.Month() != time.January):
						t.Fatalf("%s %s at %v: starts on %v", zone, p.Unit, at.In(loc), ls)
					}
					if s2, _ := p.Bounds(end); !s2.Equal(end) {
						t.Fatalf("%s %s at %v: ends at %v but the next period starts at %v", zone, p.Unit, at.In(loc), end.In(loc), s2.In(loc))
					}
				}
			}
		}
	}
}

func sameDate(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd
}

// TestLengths: the days of the US and EU changes last 23 and 25 hours, Lord Howe's 23½
// and 24½, Kathmandu's every 24; February 2024 has 29 days, 2023's 28; a month across a
// change is that much shorter or longer; Apia's 2011-12-29 ended at the start of the 31st.
func TestLengths(t *testing.T) {
	cases := []struct {
		zone string
		unit Unit
		at   string // local date-time in zone
		want time.Duration
	}{
		{"America/New_York", Day, "2024-03-10 12:00", 23 * time.Hour},
		{"America/New_York", Day, "2024-11-03 12:00", 25 * time.Hour},
		{"Europe/Berlin", Day, "2024-03-31 12:00", 23 * time.Hour},
		{"Europe/Berlin", Day, "2024-10-27 12:00", 25 * time.Hour},
		{"Australia/Lord_Howe", Day, "2024-10-06 12:00", 23*time.Hour + 30*time.Minute},
		{"Australia/Lord_Howe", Day, "2024-04-07 12:00", 24*time.Hour + 30*time.Minute},
		{"Asia/Kathmandu", Day, "2024-03-31 12:00", 24 * time.Hour},
		{"UTC", Month, "2024-02-15 12:00", 29 * 24 * time.Hour},
		{"UTC", Month, "2023-02-15 12:00", 28 * 24 * time.Hour},
		{"UTC", Year, "2024-06-01 00:00", 366 * 24 * time.Hour},
		{"America/New_York", Month, "2024-03-15 12:00", 31*24*time.Hour - time.Hour},
		{"Europe/Berlin", Month, "2024-10-15 12:00", 31*24*time.Hour + time.Hour},
		{"Pacific/Apia", Day, "2011-12-29 12:00", 24 * time.Hour},
		{"America/New_York", Week, "2024-03-08 12:00", 7*24*time.Hour - time.Hour},
	}
	for _, c := range cases {
		loc, err := Zone(c.zone)
		if err != nil {
			t.Fatal(err)
		}
		at, err := time.ParseInLocation("2006-01-02 15:04", c.at, loc)
		if err != nil {
			t.Fatal(err)
		}
		start, end := Period{Unit: c.unit, WeekStart: time.Monday, Loc: loc}.Bounds(at)
		if got := end.Sub(start); got != c.want {
			t.Errorf("%s %s containing %s: [%v, %v) lasts %v, want %v", c.zone, c.unit, c.at, start.In(loc), end.In(loc), got, c.want)
		}
	}
	// Kathmandu's days start at 18:15 UTC.
	loc, _ := Zone("Asia/Kathmandu")
	if start, _ := (Period{Unit: Day, Loc: loc}).Bounds(time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)); start.UTC() != time.Date(2024, 2, 29, 18, 15, 0, 0, time.UTC) {
		t.Errorf("Kathmandu's day starts at %v UTC", start.UTC())
	}
}

// TestParse: the names a policy writes, and the errors for the others.
func TestParse(t *testing.T) {
	for s, want := range map[string]Period{
		"calendar_day":         {Unit: Day, WeekStart: time.Monday},
		"calendar_week":        {Unit: Week, WeekStart: time.Monday},
		"calendar_week_sunday": {Unit: Week, WeekStart: time.Sunday},
		"calendar_month":       {Unit: Month, WeekStart: time.Monday},
		"calendar_year":        {Unit: Year, WeekStart: time.Monday},
	} {
		p, err := Parse(s, "Asia/Kathmandu")
		if err != nil || p.Unit != want.Unit || p.WeekStart != want.WeekStart || p.Loc.String() != "Asia/Kathmandu" {
			t.Errorf("Parse(%q): %+v %v", s, p, err)
		}
	}
	for _, c := range [][2]string{{"calendar_fortnight", ""}, {"month", ""}, {"calendar_week_someday", ""}, {"calendar_day", "Mars/Olympus"}, {"calendar_day", "Local"}} {
		if _, err := Parse(c[0], c[1]); err == nil {
			t.Errorf("Parse(%q, %q): no error", c[0], c[1])
		}
	}
}

// TestShortest holds Shortest below every period's length, day by day from 2000 to 2040
// in zones with daylight saving, half-hour changes and a skipped date, and finds it
// exact where the zone has a 23-hour day.
func TestShortest(t *testing.T) {
	for _, zone := range []string{"UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kathmandu", "Pacific/Apia", "America/Santiago"} {
		for _, unit := range []string{"calendar_day", "calendar_week", "calendar_month", "calendar_year"} {
			p, err := Parse(unit, zone)
			if err != nil {
				t.Fatal(err)
			}
			short := p.Shortest()
			if short <= 0 {
				t.Fatalf("%s %s: Shortest %v", unit, zone, short)
			}
			var least time.Duration = 1 << 62
			start, end := p.Bounds(time.Date(2000, 1, 1, 12, 0, 0, 0, time.UTC))
			for start.Year() < 2040 {
				least = min(least, end.Sub(start))
				start, end = p.Next(end)
			}
			if least < short {
				t.Errorf("%s %s: a period of %v, Shortest says %v", unit, zone, least, short)
			}
			if zone == "America/New_York" && unit == "calendar_day" && least != short {
				t.Errorf("%s %s: shortest period %v, Shortest says %v", unit, zone, least, short)
			}
		}
	}
}
