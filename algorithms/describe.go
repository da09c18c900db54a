package algorithms

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Describe is a rule's limit in words, the one way rlctl shows it (simulate's report,
// compile's plan, verify's rule headers): from the guarantee's terms for wire parameters
// w, "20 per 10m" (window), "20/h, burst 5" (rate) or "3 in flight, ttl 30s" (in
// flight); for an algorithm whose guarantee gives no terms, its parameters by name,
// "limit=4 window=10s".
func (a *Algorithm) Describe(w []int64) string {
	t, ok, _ := a.TermsOf(w)
	if !ok {
		return a.DescribeParams(w)
	}
	switch a.Guarantee.Shape {
	case ShapeWindow:
		return fmt.Sprintf("%d per %s", t.Amount, FormatDuration(t.Interval))
	case ShapeRate:
		return fmt.Sprintf("%s, burst %d", FormatRate(t.Rate, t.Period), t.Amount)
	case ShapeInFlight:
		return fmt.Sprintf("%d in flight, ttl %s", t.Amount, FormatDuration(t.Interval))
	}
	return a.DescribeParams(w)
}

// DescribeParams renders wire parameters w by name: "limit=5 window=1m", "rate=20/h
// burst=5". A Lease parameter carries no value and is left out.
func (a *Algorithm) DescribeParams(w []int64) string {
	if len(w) != a.WireLen() {
		return fmt.Sprint(w)
	}
	var parts []string
	i := 0
	for _, p := range a.Params {
		switch p.Kind {
		case Count:
			if p.Flag {
				parts = append(parts, fmt.Sprintf("%s=%t", p.Name, w[i] == 1))
				break
			}
			parts = append(parts, fmt.Sprintf("%s=%d", p.Name, w[i]))
		case Duration:
			parts = append(parts, p.Name+"="+FormatDuration(w[i]))
		case Rate:
			parts = append(parts, p.Name+"="+FormatRate(w[i], w[i+1]))
		}
		i += p.slots()
	}
	return strings.Join(parts, " ")
}

// FormatRate prints n per `per` µs as a whole amount per second, minute, hour or day when
// one is (rates arrive reduced: "1/3m" is 20/h, "1024/h" is 1 per 3.515625s), else as
// n/period: "20/h", "200/s", "3/7s".
func FormatRate(n, per int64) string {
	for _, u := range []struct {
		us   int64
		name string
	}{{1e6, "s"}, {60e6, "m"}, {3600e6, "h"}, {86400e6, "d"}} {
		if u.us >= per && n <= math.MaxInt64/u.us && (n*u.us)%per == 0 {
			return fmt.Sprintf("%d/%s", n*u.us/per, u.name)
		}
	}
	return fmt.Sprintf("%d/%s", n, FormatDuration(per))
}

// FormatDuration prints a number of microseconds compactly: 10m, 1m30s, 250ms, 1.5s, 2h.
func FormatDuration(us int64) string {
	if us == 0 {
		return "0s"
	}
	s := (time.Duration(us) * time.Microsecond).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
