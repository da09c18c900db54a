package luahost

import (
	"math/big"
	"strings"
)

// INCRBYFLOAT and HINCRBYFLOAT compute in C's long double, which on x86-64
// is the x87 80-bit format: a 64-bit significand, normal numbers from
// 2^-16382 to below 2^16384, subnormals down to 2^-16445. A long double is
// held here as a *big.Float of precision 64 (or less for a subnormal),
// rounded to nearest even as the x87 rounds, so sums and their "%.17Lf"
// text are what Redis computes bit for bit.

const (
	ldPrec   = 64
	ldMaxExp = 16384  // big.Float exponent (mantissa in [0.5, 1)) of the largest finite
	ldMinExp = -16381 // ... of the smallest normal, 2^-16382
	ldTiny   = -16445 // 2^ldTiny is the smallest subnormal
	// ldMaxChars is Redis's MAX_LONG_DOUBLE_CHARS: string2ld refuses
	// longer strings.
	ldMaxChars = 5 * 1024
)

// ldFromRat rounds the exact value r to a long double; ok is false when it
// overflows or underflows to zero (strtold's ERANGE with HUGE_VAL or 0).
func ldFromRat(r *big.Rat) (*big.Float, bool) {
	f := new(big.Float).SetPrec(ldPrec).SetRat(r)
	if f.Sign() == 0 {
		return f, true
	}
	exp := f.MantExp(nil)
	switch {
	case exp > ldMaxExp:
		return nil, false
	case exp >= ldMinExp:
		return f, true
	case exp-ldTiny >= 1:
		// Subnormal: fewer significand bits, rounded once from r.
		return new(big.Float).SetPrec(uint(exp - ldTiny)).SetRat(r), true
	}
	// Below the smallest subnormal: nearest of 0 and 2^ldTiny, ties to 0.
	half := new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), -ldTiny+1))
	if new(big.Rat).Abs(r).Cmp(half) <= 0 {
		return nil, false
	}
	tiny := new(big.Float).SetMantExp(big.NewFloat(1), ldTiny)
	if r.Sign() < 0 {
		tiny.Neg(tiny)
	}
	return tiny, true
}

// ldAdd returns a+b rounded to a long double; ok is false when the sum is
// infinite or NaN (an operand is infinite, or the sum overflows).
func ldAdd(a, b *big.Float) (*big.Float, bool) {
	if a.IsInf() || b.IsInf() {
		return nil, false
	}
	s := new(big.Float).SetPrec(ldPrec).Add(a, b)
	if s.Sign() == 0 {
		return s, true
	}
	if exp := s.MantExp(nil); exp > ldMaxExp {
		return nil, false
	} else if exp >= ldMinExp {
		return s, true
	}
	ra, _ := a.Rat(nil)
	rb, _ := b.Rat(nil)
	return ldFromRat(ra.Add(ra, rb))
}

// parseLongDouble parses s as Redis 7.0's string2ld does: strtold must
// consume the whole string, which must be shorter than ldMaxChars and not
// start with white space; no NaN, no overflow or underflow to zero.
// Infinities parse.
func parseLongDouble(s string) (*big.Float, bool) {
	if len(s) == 0 || len(s) >= ldMaxChars {
		return nil, false
	}
	if cIsSpace(s[0]) {
		return nil, false
	}
	t := scanNumber(s)
	if t.n != len(s) {
		return nil, false
	}
	switch t.kind {
	case 'i':
		return new(big.Float).SetInf(t.neg), true
	case 'n':
		return nil, false
	}
	if f, ok := smallDecimal(t); ok {
		return f, true
	}
	r, ok := exactValue(t)
	if !ok {
		return nil, false
	}
	f, ok := ldFromRat(r)
	if ok && t.neg {
		f.Neg(f)
	}
	return f, ok
}

// pow5 holds 5^0 .. 5^27, each below 2^63.
var pow5 = func() (p [28]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 5
	}
	return p
}()

// smallDecimal is parseLongDouble's fast path for the usual decimal: at
// most 19 significant digits and a power of ten within 10^±27, so that
// mantissa and power are exact in 64 bits and one correctly rounded
// multiplication or division gives the long double.
func smallDecimal(t numText) (*big.Float, bool) {
	if t.kind != 'd' || len(t.mant) > 20 || len(t.exp) > 3 {
		return nil, false
	}
	var m uint64
	digits, frac, point := 0, 0, false
	for i := 0; i < len(t.mant); i++ {
		c := t.mant[i]
		if c == '.' {
			point = true
			continue
		}
		if point {
			frac++
		}
		if m == 0 && c == '0' {
			continue
		}
		if digits++; digits > 19 {
			return nil, false
		}
		m = m*10 + uint64(c-'0')
	}
	exp := 0
	if t.exp != "" {
		e := t.exp
		neg := e[0] == '-'
		if e[0] == '+' || e[0] == '-' {
			e = e[1:]
		}
		for i := 0; i < len(e); i++ {
			exp = exp*10 + int(e[i]-'0')
		}
		if neg {
			exp = -exp
		}
	}
	exp -= frac
	if exp < -27 || exp > 27 {
		return nil, false
	}
	f := new(big.Float).SetPrec(ldPrec).SetUint64(m)
	if t.neg {
		f.Neg(f)
	}
	if exp == 0 || m == 0 {
		return f, true
	}
	p := new(big.Float).SetPrec(ldPrec).SetUint64(pow5[abs(exp)])
	p.SetMantExp(p, abs(exp)) // 10^|exp| = 5^|exp| * 2^|exp|, exact
	if exp > 0 {
		return f.Mul(f, p), true
	}
	return f.Quo(f, p), true
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// exactValue returns the value of a decimal or hexadecimal numText without
// its sign, exactly; ok is false when it is certain to overflow or
// underflow a long double.
func exactValue(t numText) (*big.Rat, bool) {
	base, digitBits := 10, 0
	if t.kind == 'x' {
		base, digitBits = 16, 4
	}
	intPart, frac, _ := strings.Cut(t.mant, ".")
	var m big.Int
	if _, ok := m.SetString(intPart+frac, base); !ok {
		return nil, false
	}
	if m.Sign() == 0 {
		return new(big.Rat), true
	}
	// The exponent, saturated: anything past ±1e6 is out of range anyway.
	exp := int64(0)
	if e := t.exp; e != "" {
		neg := e[0] == '-'
		if e[0] == '+' || e[0] == '-' {
			e = e[1:]
		}
		for i := 0; i < len(e); i++ {
			exp = min(exp*10+int64(e[i]-'0'), 1e7)
		}
		if neg {
			exp = -exp
		}
	}
	if t.kind == 'x' {
		exp -= int64(digitBits * len(frac))
		bits := int64(m.BitLen()) + exp
		if bits > ldMaxExp+1 || bits < ldTiny-1 {
			return nil, false
		}
		r := new(big.Rat).SetInt(&m)
		p := new(big.Int).Lsh(big.NewInt(1), uint(abs64(exp)))
		if exp >= 0 {
			return r.Mul(r, new(big.Rat).SetInt(p)), true
		}
		return r.Quo(r, new(big.Rat).SetInt(p)), true
	}
	exp -= int64(len(frac))
	// m*10^exp has about len(m)+exp decimal digits; 2^16384 < 10^4933,
	// 2^-16446 > 10^-4951.
	digits := int64(len(m.String())) + exp
	if digits > 4934 || digits < -4952 {
		return nil, false
	}
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(abs64(exp)), nil)
	r := new(big.Rat).SetInt(&m)
	if exp >= 0 {
		return r.Mul(r, new(big.Rat).SetInt(p)), true
	}
	return r.Quo(r, new(big.Rat).SetInt(p)), true
}

func abs64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// formatLongDoubleHuman is Redis's ld2string in LD_STR_HUMAN mode:
// printf("%.17Lf") with trailing zeros (and a trailing point) removed, and
// "-0" written "0".
func formatLongDoubleHuman(f *big.Float) string {
	s := f.Text('f', 17)
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		return "0"
	}
	return s
}
