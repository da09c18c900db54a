// Package calendar computes the periods quotas are sold in: a day, a week that starts on
// a given weekday, a month or a year, in a time zone, each from the first instant of its
// first local day to the first instant of the next period's. A period is as long as the
// calendar makes it: a day of a daylight-saving change lasts 23 or 25 hours, a month 28
// to 31 days, a year 365 or 366 days. The tz database is embedded (time/tzdata), so a
// binary needs no system files.
package calendar

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // the IANA zones, whatever the machine has
)

// Unit is the length of a calendar period.
type Unit int

const (
	Day Unit = iota + 1
	Week
	Month
	Year
)

var unitNames = map[Unit]string{Day: "day", Week: "week", Month: "month", Year: "year"}

func (u Unit) String() string {
	if n, ok := unitNames[u]; ok {
		return n
	}
	return fmt.Sprintf("Unit(%d)", int(u))
}

// Period is a calendar period in a time zone.
type Period struct {
	Unit Unit
	// WeekStart is the weekday a Week starts on; ignored for the other units.
	WeekStart time.Weekday
	Loc       *time.Location
}

// Parse reads a period as a policy writes it, "calendar_day", "calendar_week" (from
// Monday, ISO 8601's week), "calendar_week_sunday" (or any weekday's name),
// "calendar_month" or "calendar_year", in the IANA time zone zone ("" is UTC).
func Parse(s, zone string) (Period, error) {
	loc, err := Zone(zone)
	if err != nil {
		return Period{}, err
	}
	p := Period{Loc: loc, WeekStart: time.Monday}
	name, ok := strings.CutPrefix(s, "calendar_")
	if !ok {
		return Period{}, fmt.Errorf("%q is not a calendar period: want calendar_day, calendar_week, calendar_month or calendar_year", s)
	}
	switch {
	case name == "day":
		p.Unit = Day
	case name == "week":
		p.Unit = Week
	case strings.HasPrefix(name, "week_"):
		p.Unit = Week
		day := strings.TrimPrefix(name, "week_")
		found := false
		for d := time.Sunday; d <= time.Saturday; d++ {
			if strings.EqualFold(d.String(), day) {
				p.WeekStart, found = d, true
			}
		}
		if !found {
			return Period{}, fmt.Errorf("%q: %q is not a weekday: write calendar_week_sunday, calendar_week_monday, ...", s, day)
		}
	case name == "month":
		p.Unit = Month
	case name == "year":
		p.Unit = Year
	default:
		return Period{}, fmt.Errorf("%q is not a calendar period: want calendar_day, calendar_week, calendar_month or calendar_year", s)
	}
	return p, nil
}

// Zone returns the IANA time zone name (such as "America/New_York"); "" and "UTC" are UTC.
// A name the tz database lacks is an error that says so.
func Zone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if strings.EqualFold(name, "local") {
		return nil, fmt.Errorf("time zone %q: name a zone, such as America/New_York; the machine's own zone differs from one host to the next", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q is not in the tz database: write an IANA name, such as America/New_York, Europe/Berlin or Asia/Kathmandu", name)
	}
	return loc, nil
}

// Bounds returns the period that contains t: its first instant and the first instant of
// the next period. start <= t < end.
func (p Period) Bounds(t time.Time) (start, end time.Time) {
	lt := t.In(p.Loc)
	y, m, d := lt.Date()
	switch p.Unit {
	case Week:
		back := (int(lt.Weekday()) - int(p.WeekStart) + 7) % 7
		d -= back
	case Month:
		d = 1
	case Year:
		m, d = time.January, 1
	}
	start = dayStart(y, m, d, p.Loc)
	if t.Before(start) {
		// t's local date is before its period's first local day: only when the day it
		// is on began (a fall back across midnight) before t's local midnight; t is in
		// the previous period.
		return p.Bounds(start.Add(-time.Nanosecond))
	}
	switch p.Unit {
	case Day:
		end = dayStart(y, m, d+1, p.Loc)
	case Week:
		end = dayStart(y, m, d+7, p.Loc)
	case Month:
		end = dayStart(y, m+1, 1, p.Loc)
	case Year:
		end = dayStart(y+1, time.January, 1, p.Loc)
	}
	return start, end
}

// Next returns the period after the one whose end is end: its bounds.
func (p Period) Next(end time.Time) (time.Time, time.Time) { return p.Bounds(end) }

// dayStart returns the first instant of the local date y-m-d in loc (time.Date
// normalizes the date): its midnight, or where a daylight-saving change skips midnight,
// the change's instant; where a change repeats midnight, the first of the two.
func dayStart(y int, m time.Month, d int, loc *time.Location) time.Time {
	y, m, d = time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Date() // normalized
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	lt := t.In(loc)
	if ly, lm, ld := lt.Date(); ly != y || lm != m || ld != d {
		// time.Date put a midnight that does not exist on the day before: the day begins
		// when that day's zone ends.
		_, ze := t.ZoneBounds()
		return ze
	}
	if lt.Hour() != 0 || lt.Minute() != 0 || lt.Second() != 0 {
		// Midnight does not exist: the day begins when the zone changes, before t.
		zs, _ := t.ZoneBounds()
		return zs
	}
	// Midnight may exist twice (a fall back across it): the first is the day's start.
	if zs, _ := t.ZoneBounds(); !zs.IsZero() {
		_, before := zs.Add(-time.Nanosecond).Zone()
		_, now := t.Zone()
		if before > now {
			earlier := t.Add(-time.Duration(before-now) * time.Second)
			if earlier.Before(zs) {
				if ey, em, ed := earlier.In(loc).Date(); ey == y && em == m && ed == d {
					return earlier
				}
			}
		}
	}
	return t
}

// Shortest returns a length no period of p exceeds from below: the period's shortest
// calendar length (24 hours, 7 days, 28 days, 365 days) less the largest jump forward of
// p's zone between 1970 and 2100, a jump of a day or more (a zone that moved across the
// date line, skipping a date) shortening every unit but a day, whose date is skipped
// whole. The engine states a calendar rule's window as this length wherever one
// duration must stand for it (a guarantee over any interval that long, RateLimit-Policy).
func (p Period) Shortest() time.Duration {
	nominal := map[Unit]time.Duration{Day: 24 * time.Hour, Week: 7 * 24 * time.Hour, Month: 28 * 24 * time.Hour, Year: 365 * 24 * time.Hour}[p.Unit]
	var jump time.Duration
	t := time.Date(1970, time.January, 1, 0, 0, 0, 0, time.UTC).In(p.Loc)
	stop := time.Date(2100, time.January, 1, 0, 0, 0, 0, time.UTC)
	for t.Before(stop) {
		_, end := t.ZoneBounds()
		if end.IsZero() {
			break
		}
		if !end.After(t) {
			// Past its table, Go extends a zone's rule a year at a time and reports each
			// year's first instant as a bound of the zone: step over it.
			end = t.Add(time.Hour)
		}
		_, before := t.Zone()
		_, after := end.In(p.Loc).Zone()
		if d := time.Duration(after-before) * time.Second; d > jump && (p.Unit != Day || d < 24*time.Hour) {
			jump = d
		}
		t = end.In(p.Loc)
	}
	return nominal - jump
}

// String is the period as a policy writes it, with its zone: "calendar_month
// (America/New_York)".
func (p Period) String() string {
	name := "calendar_" + p.Unit.String()
	if p.Unit == Week && p.WeekStart != time.Monday {
		name += "_" + strings.ToLower(p.WeekStart.String())
	}
	zone := "UTC"
	if p.Loc != nil {
		zone = p.Loc.String()
	}
	return name + " (" + zone + ")"
}
