// Package stat holds the small numeric and formatting helpers the benchmark commands
// share.
package stat

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Map returns f applied to each element of xs, in order; a slice of len(xs).
func Map[T any](xs []T, f func(T) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// Median returns the median of xs: the middle value, or the mean of the two middle
// values when len(xs) is even; 0 when xs is empty. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Thousands returns v rounded to a whole number (as %.0f rounds) with a comma between
// each group of three digits: 1234567.4 is "1,234,567", -1234 is "-1,234".
func Thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	sign := ""
	if s != "" && (s[0] == '-' || s[0] == '+') {
		sign, s = s[:1], s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return sign + s
}

// Loadavg returns the first three fields of /proc/loadavg (the 1, 5 and 15 minute load
// averages) separated by single spaces, as "0.52 0.61 0.70"; "unknown" when the file
// cannot be read or has fewer than three fields.
func Loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
