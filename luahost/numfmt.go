package luahost

import (
	"math"
	"strconv"
	"strings"
)

// This file holds the number <-> text rules of Redis 7.0 and its Lua 5.1,
// which differ from Go's: C's printf("%.17g") for numbers passed to
// redis.call and for sorted-set scores in replies, printf("%.14g") for Lua's
// own tostring and concatenation, strtod for floats and string2ll for
// integers.

// formatG17 formats f as C's "%.17g" does (Redis 7.0 scores, redis.call
// arguments).
func formatG17(f float64) string { return formatCG(f, 17) }

// formatG14 formats f as Lua 5.1's LUA_NUMBER_FMT "%.14g" does (tostring,
// "..", string arguments).
func formatG14(f float64) string { return formatCG(f, 14) }

// formatCG formats f as C's "%.<prec>g" on x86-64 glibc, including its
// spelling of infinities and NaN (0/0 on x86 has its sign bit set: "-nan").
func formatCG(f float64, prec int) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		if math.Signbit(f) {
			return "-nan"
		}
		return "nan"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e14 {
		// Fast path: integers below 10^14 print as plain digits under
		// both precisions (and -0 keeps its sign).
		if f == 0 && math.Signbit(f) {
			return "-0"
		}
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', prec, 64)
}

// formatScore formats a sorted-set score as Redis 7.0 replies with it
// (addReplyDouble: "%.17g", infinities as "inf"/"-inf").
func formatScore(f float64) string { return formatG17(f) }

// cInt64 converts f to int64 as a C cast does on x86-64 (cvttsd2si):
// truncation toward zero, and the "integer indefinite" value MinInt64 for
// NaN and for anything out of range. Redis converts Lua numbers in replies
// this way.
func cInt64(f float64) int64 {
	if f != f || f >= 9223372036854775808.0 || f < -9223372036854775808.0 {
		return math.MinInt64
	}
	return int64(f)
}

// parseInt parses s as Redis's string2ll does: an optional '-', no '+', no
// spaces, no leading zeros, at most 20 characters, within int64.
func parseInt(s string) (int64, bool) {
	if len(s) == 0 || len(s) >= 21 {
		return 0, false
	}
	if s == "0" {
		return 0, true
	}
	neg := false
	p := s
	if p[0] == '-' {
		neg = true
		p = p[1:]
		if len(p) == 0 {
			return 0, false
		}
	}
	if p[0] < '1' || p[0] > '9' {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > math.MaxUint64/10 {
			return 0, false
		}
		v *= 10
		if v > math.MaxUint64-uint64(c-'0') {
			return 0, false
		}
		v += uint64(c - '0')
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}

// cIsSpace reports whether c is a C isspace() character.
func cIsSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// strtod parses the longest prefix of s that C's strtod accepts (leading
// white space, sign, decimal or hexadecimal mantissa and exponent, "inf",
// "infinity", "nan"). It returns the value, the number of bytes consumed (0
// when nothing parses) and whether the value over- or underflowed (ERANGE).
func strtod(s string) (f float64, n int, erange bool) {
	i := 0
	for i < len(s) && cIsSpace(s[i]) {
		i++
	}
	start := i
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	rest := s[i:]
	sign := 1.0
	if neg {
		sign = -1
	}
	switch {
	case hasPrefixFold(rest, "infinity"):
		return sign * math.Inf(1), i + 8, false
	case hasPrefixFold(rest, "inf"):
		return sign * math.Inf(1), i + 3, false
	case hasPrefixFold(rest, "nan"):
		j := i + 3
		// "nan(n-char-sequence)" is accepted as a whole.
		if j < len(s) && s[j] == '(' {
			k := j + 1
			for k < len(s) && (isAlnum(s[k]) || s[k] == '_') {
				k++
			}
			if k < len(s) && s[k] == ')' {
				j = k + 1
			}
		}
		nan := math.NaN()
		if neg {
			nan = math.Copysign(nan, -1)
		}
		return nan, j, false
	}
	if len(rest) >= 2 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X') {
		if f, m, ok := parseHexFloat(rest); ok {
			return sign * f, i + m, false
		}
		// "0x" without hex digits: strtod takes the "0".
		return sign * 0, i + 1, false
	}
	// Decimal: digits [. digits] [e [sign] digits], at least one digit.
	j := i
	digits := 0
	nonzero := false
	for j < len(s) && isDigit(s[j]) {
		nonzero = nonzero || s[j] != '0'
		j++
		digits++
	}
	if j < len(s) && s[j] == '.' {
		j++
		for j < len(s) && isDigit(s[j]) {
			nonzero = nonzero || s[j] != '0'
			j++
			digits++
		}
	}
	if digits == 0 {
		return 0, 0, false
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			for k < len(s) && isDigit(s[k]) {
				k++
			}
			j = k
		}
	}
	v, err := strconv.ParseFloat(s[start:j], 64)
	if err != nil {
		// Only ErrRange is possible here: the text is well formed.
		return v, j, true
	}
	if v == 0 && nonzero {
		return v, j, true // underflow to zero
	}
	return v, j, false
}

// parseHexFloat parses a "0x" mantissa with optional binary exponent at the
// start of s, returning how many bytes it used; ok is false when no hex
// digit follows "0x".
func parseHexFloat(s string) (f float64, n int, ok bool) {
	j := 2
	digits := 0
	for j < len(s) && isHex(s[j]) {
		j++
		digits++
	}
	if j < len(s) && s[j] == '.' {
		k := j + 1
		for k < len(s) && isHex(s[k]) {
			k++
			digits++
		}
		if digits > 0 {
			j = k
		}
	}
	if digits == 0 {
		return 0, 0, false
	}
	mant := s[:j]
	exp := "p0"
	if j < len(s) && (s[j] == 'p' || s[j] == 'P') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			for k < len(s) && isDigit(s[k]) {
				k++
			}
			exp = s[j:k]
			j = k
		}
	}
	v, _ := strconv.ParseFloat(mant+exp, 64)
	return v, j, true
}

// parseFloat parses s as Redis's string2d does (ZADD scores, increments):
// strtod must consume everything, no leading space, no overflow or
// underflow to zero, no NaN.
func parseFloat(s string) (float64, bool) {
	if len(s) == 0 || cIsSpace(s[0]) {
		return 0, false
	}
	f, n, erange := strtod(s)
	if n != len(s) || math.IsNaN(f) {
		return 0, false
	}
	if erange && (math.IsInf(f, 0) || f == 0) {
		return 0, false
	}
	return f, true
}

// parseRangeFloat parses one bound of a score range as zslParseRange does:
// plain strtod that must reach the end of the string (so "" is 0 and
// leading space is fine), NaN rejected.
func parseRangeFloat(s string) (float64, bool) {
	f, n, _ := strtod(s)
	if n != len(s) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isAlnum(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
