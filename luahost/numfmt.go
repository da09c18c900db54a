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
	if f == math.Trunc(f) && (math.Abs(f) < 1e14 || prec >= 17 && math.Abs(f) <= 1<<53) {
		// Fast path: integers below 10^14 print as plain digits under
		// both precisions, and under %.17g every integer a double holds
		// exactly, up to 2^53 (16 digits; microsecond timestamps); -0
		// keeps its sign.
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

// numText is the number C's strtod and strtold find at the start of a
// string: leading white space, a sign, then "inf", "infinity", "nan" or
// "nan(chars)", a hexadecimal mantissa ("0x", digits with an optional
// point) with an optional binary exponent ("p"), or a decimal mantissa with
// an optional exponent ("e").
type numText struct {
	n       int  // bytes consumed; 0 when nothing parses
	neg     bool // a '-' sign
	kind    byte // 'i' infinity, 'n' NaN, 'x' hexadecimal, 'd' decimal
	mant    string
	exp     string // the exponent with its sign, "" for none
	nonzero bool   // a mantissa digit is not 0
}

// scanNumber returns the longest prefix of s that strtod accepts.
func scanNumber(s string) numText {
	i := 0
	for i < len(s) && cIsSpace(s[i]) {
		i++
	}
	var t numText
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		t.neg = s[i] == '-'
		i++
	}
	rest := s[i:]
	switch {
	case hasPrefixFold(rest, "infinity"):
		t.kind, t.n = 'i', i+8
		return t
	case hasPrefixFold(rest, "inf"):
		t.kind, t.n = 'i', i+3
		return t
	case hasPrefixFold(rest, "nan"):
		t.kind, t.n = 'n', i+3
		// "nan(n-char-sequence)" is accepted as a whole.
		if j := t.n; j < len(s) && s[j] == '(' {
			k := j + 1
			for k < len(s) && (isAlnum(s[k]) || s[k] == '_') {
				k++
			}
			if k < len(s) && s[k] == ')' {
				t.n = k + 1
			}
		}
		return t
	}
	hex := len(rest) >= 2 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X')
	j, digits := i, 0
	isDig, expChar := isDigit, byte('e')
	if hex {
		j += 2
		isDig, expChar = isHex, 'p'
	}
	m := j
	for j < len(s) && isDig(s[j]) {
		t.nonzero = t.nonzero || s[j] != '0'
		j++
		digits++
	}
	if j < len(s) && s[j] == '.' {
		k := j + 1
		for k < len(s) && isDig(s[k]) {
			t.nonzero = t.nonzero || s[k] != '0'
			k++
			digits++
		}
		if digits > 0 {
			j = k
		}
	}
	if digits == 0 {
		if hex { // "0x" without hex digits: strtod takes the "0"
			t.kind, t.mant, t.n = 'd', "0", i+1
		}
		return t
	}
	t.kind, t.mant = 'd', s[m:j]
	if hex {
		t.kind = 'x'
	}
	if j < len(s) && (s[j]|0x20) == expChar {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			for k < len(s) && isDigit(s[k]) {
				k++
			}
			t.exp = s[j+1 : k]
			j = k
		}
	}
	t.n = j
	return t
}

// strtod parses the longest prefix of s that C's strtod accepts (see
// numText). It returns the value, the number of bytes consumed (0 when
// nothing parses) and whether the value over- or underflowed (ERANGE).
func strtod(s string) (f float64, n int, erange bool) {
	if f, ok := plainInteger(s); ok {
		return f, len(s), false
	}
	return strtodScan(s)
}

// strtodScan is strtod for any text.
func strtodScan(s string) (f float64, n int, erange bool) {
	t := scanNumber(s)
	sign := 1.0
	if t.neg {
		sign = -1
	}
	switch t.kind {
	case 0:
		return 0, 0, false
	case 'i':
		return sign * math.Inf(1), t.n, false
	case 'n':
		return math.Copysign(math.NaN(), sign), t.n, false
	}
	text := t.mant
	if t.kind == 'x' {
		exp := t.exp
		if exp == "" {
			exp = "0"
		}
		text = "0x" + t.mant + "p" + exp
	} else if t.exp != "" {
		text += "e" + t.exp
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil || (v == 0 && t.nonzero) {
		// Only ErrRange is possible here: the text is well formed. An
		// underflow to zero is not an error to ParseFloat.
		return sign * v, t.n, true
	}
	return sign * v, t.n, false
}

// plainInteger parses the commonest number text, an optional minus and at most 16 decimal
// digits of a magnitude up to 2^53 and nothing else (a microsecond timestamp has 16), which
// strtod would read exactly to the same double (every such integer is one). ok is false for
// any other text.
func plainInteger(s string) (f float64, ok bool) {
	digits := s
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 16 {
		return 0, false
	}
	var v int64
	for i := 0; i < len(digits); i++ {
		d := digits[i] - '0'
		if d > 9 {
			return 0, false
		}
		v = v*10 + int64(d)
	}
	if v > 1<<53 {
		return 0, false
	}
	f = float64(v)
	if len(digits) < len(s) {
		f = -f
	}
	return f, true
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
