package dsl

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/rlctl/rlctl/algorithms"
)

// Policies write durations as strings: one or more whole numbers each followed by a unit,
// largest unit first ("250ms", "30s", "1m30s", "1d"). Rates are "<amount>/<period>", where
// the period is a duration or a bare unit meaning one of it ("10/s", "5/250ms").
const (
	durationForms = `Write a duration as a whole number followed by a unit, such as "250ms", "30s", "1m", "1h" or "1d", or as a sum, largest unit first, such as "1m30s". Units: ms, s, m, h, d.`
	rateForms     = `Write a rate as "<amount>/<period>": a whole number, a slash, then a duration or a bare unit, such as "10/s", "600/m", "5/250ms" or "1000/1h".`
	resolution    = `rlctl's clock resolution is 1ms: Redis expires keys in whole milliseconds, and clocks across clients never agree more closely than that, so a shorter period would limit nothing reliably.`
)

// Microseconds per unit. In a rule "us" and "µs" are understood only to explain that they
// are below the clock resolution; a guarantee's precision may use them.
var units = []struct {
	name string
	us   int64
}{
	{"d", 86_400_000_000},
	{"h", 3_600_000_000},
	{"m", 60_000_000},
	{"s", 1_000_000},
	{"ms", 1_000},
	{"us", 1},
	{"µs", 1},
}

const msUS = 1000 // a millisecond in microseconds: the shortest duration

// unitError is a duration or rate that does not parse or is out of range. Its message is a
// sentence for the Detail of a diagnostic; the accepted forms are appended by the caller.
type unitError struct {
	msg string
	// forms is false when the value was well-formed but out of range, so repeating the
	// accepted forms would not help.
	forms bool
}

func (e *unitError) Error() string { return e.msg }

func badForm(format string, args ...any) error {
	return &unitError{msg: fmt.Sprintf(format, args...), forms: true}
}

func badValue(format string, args ...any) error {
	return &unitError{msg: fmt.Sprintf(format, args...)}
}

// parseDuration returns the microseconds a policy duration denotes: at least 1ms, at most
// 2^53 µs.
func parseDuration(s string) (int64, error) {
	us, err := parseDurationTerms(s)
	if err != nil {
		return 0, err
	}
	if us == 0 {
		return 0, badValue("The duration %q is zero; it must be at least 1ms.", s)
	}
	if us < msUS {
		return 0, badValue("The duration %q is below 1ms. %s", s, resolution)
	}
	return us, nil
}

// parsePrecision returns the microseconds of a guarantee's precision or resolution: at
// least 1µs (verify's virtual clock counts microseconds, so a float clock's noise of a
// microsecond can be declared), at most 2^53 µs. Unlike a rule's duration it may be below
// 1ms: it states how far an algorithm's answers or clock are from exact, not a period to
// limit over.
func parsePrecision(s string) (int64, error) {
	us, err := parseDurationTerms(s)
	if err != nil {
		return 0, err
	}
	if us == 0 {
		return 0, badValue("The duration %q is zero; leave the attribute out for exact (1µs), or write at least \"1us\".", s)
	}
	return us, nil
}

// parseDurationTerms parses the "1m30s" grammar without the range checks.
func parseDurationTerms(s string) (int64, error) {
	if s == "" {
		return 0, badForm("The duration is empty.")
	}
	if strings.TrimSpace(s) != s || strings.ContainsAny(s, " \t") {
		return 0, badForm("The duration %q contains spaces.", s)
	}
	if s[0] == '-' {
		return 0, badValue("The duration %q is negative; it must be at least 1ms.", s)
	}
	rest := s
	var total int64
	last := -1 // index in units of the previous term's unit: terms go largest first
	for rest != "" {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, badForm("The duration %q does not start with a number.", s)
		}
		digits := rest[:i]
		rest = rest[i:]
		if strings.HasPrefix(rest, ".") {
			return 0, decimalError(s)
		}
		j := 0
		for j < len(rest) && (rest[j] < '0' || rest[j] > '9') {
			j++
		}
		unit := rest[:j]
		rest = rest[j:]
		if unit == "" {
			return 0, badForm("The duration %q has no unit.", s)
		}
		k := unitIndex(unit)
		if k < 0 {
			return 0, badForm("The duration %q has the unknown unit %q.%s", s, unit, unitSuggestion(unit))
		}
		if k <= last || (last >= 0 && units[last].us == units[k].us) {
			return 0, badForm("The duration %q repeats a unit or puts a smaller unit first.", s)
		}
		last = k
		n, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || n > algorithms.MaxInt/units[k].us || total > algorithms.MaxInt-n*units[k].us {
			return 0, badValue("The duration %q is too long: durations stop at about 285 years (2^53 microseconds).", s)
		}
		total += n * units[k].us
	}
	return total, nil
}

// unitSuggestion suggests a unit for a longer misspelling ("sec", "mins"); a single wrong
// letter is as close to every unit, so it gets none.
func unitSuggestion(u string) string {
	if len(u) < 2 {
		return ""
	}
	return suggestion(u, []string{"ms", "s", "m", "h", "d"})
}

func unitIndex(u string) int {
	for i, x := range units {
		if x.name == u {
			return i
		}
	}
	return -1
}

// decimalError explains that durations take whole numbers and, when the value is a whole
// number of milliseconds, shows how to write it.
func decimalError(s string) error {
	num := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	unit := s[len(num):]
	k := unitIndex(unit)
	r, ok := new(big.Rat).SetString(num)
	if k >= 0 && ok {
		us := new(big.Rat).Mul(r, new(big.Rat).SetInt64(units[k].us))
		if us.IsInt() && us.Num().IsInt64() {
			n := us.Num().Int64()
			if n%msUS == 0 && n > 0 {
				return badForm("Durations take whole numbers: write %q instead of %q.", formatDuration(n), s)
			}
		}
	}
	return badForm("Durations take whole numbers; %q has a decimal point.", s)
}

// formatDuration writes microseconds in the policy syntax, largest units first.
func formatDuration(us int64) string {
	if us == 0 {
		return "0ms"
	}
	var b strings.Builder
	for _, u := range units[:5] {
		if n := us / u.us; n > 0 {
			b.WriteString(strconv.FormatInt(n, 10))
			b.WriteString(u.name)
			us -= n * u.us
		}
	}
	if us > 0 {
		b.WriteString(strconv.FormatInt(us, 10))
		b.WriteString("us")
	}
	return b.String()
}

// parseRate returns a rate as its amount and period in microseconds, reduced by their
// greatest common divisor ("600/m" is 1 per 100000µs). The written period must be at least
// 1ms; the amount positive and at most 2^53.
func parseRate(s string) (amount, periodUS int64, err error) {
	amount, periodUS, err = parseRateAsWritten(s)
	if err != nil {
		return 0, 0, err
	}
	g := gcd(amount, periodUS)
	return amount / g, periodUS / g, nil
}

// parseRateAsWritten is parseRate without the reduction: "600/m" is 600 per 60000000µs.
func parseRateAsWritten(s string) (amount, periodUS int64, err error) {
	num, per, ok := strings.Cut(s, "/")
	if !ok {
		if _, derr := parseDurationTerms(s); derr == nil {
			return 0, 0, badForm("%q is a duration, not a rate.", s)
		}
		return 0, 0, badForm("The rate %q has no slash.", s)
	}
	if strings.ContainsAny(s, " \t") {
		return 0, 0, badForm("The rate %q contains spaces.", s)
	}
	if num == "" {
		return 0, 0, badForm("The rate %q has no amount before the slash.", s)
	}
	if strings.HasPrefix(num, "-") {
		return 0, 0, badValue("The rate %q is negative; the amount must be at least 1.", s)
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			if c == '.' {
				return 0, 0, badForm("The amount of the rate %q is not a whole number; scale both sides instead, e.g. \"1/2s\" for half a request per second.", s)
			}
			return 0, 0, badForm("The amount of the rate %q is not a whole number.", s)
		}
	}
	amount, perr := strconv.ParseInt(num, 10, 64)
	if perr != nil || amount > algorithms.MaxInt {
		return 0, 0, badValue("The amount of the rate %q is above 2^53, the largest exact count.", s)
	}
	if amount == 0 {
		return 0, 0, badValue("The rate %q is zero; the amount must be at least 1.", s)
	}
	if per == "" {
		return 0, 0, badForm("The rate %q has no period after the slash.", s)
	}
	if unitIndex(per) >= 0 {
		per = "1" + per
	} else if per[0] < '0' || per[0] > '9' {
		return 0, 0, badForm("The rate %q has the unknown unit %q.%s", s, per, unitSuggestion(per))
	}
	periodUS, err = parseDurationTerms(per)
	if err != nil {
		ue := err.(*unitError)
		return 0, 0, &unitError{msg: fmt.Sprintf("The period of the rate %q is not a duration. %s", s, ue.msg), forms: ue.forms}
	}
	if periodUS < msUS {
		return 0, 0, badValue("The period of the rate %q is below 1ms. %s", s, resolution)
	}
	return amount, periodUS, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
