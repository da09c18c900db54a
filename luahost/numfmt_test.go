package luahost

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestFormatCG(t *testing.T) {
	// Expected values are C's printf("%.17g") and printf("%.14g") on glibc.
	for _, tc := range []struct {
		f        float64
		g17, g14 string
	}{
		{0, "0", "0"},
		{math.Copysign(0, -1), "-0", "-0"},
		{3, "3", "3"},
		{-5, "-5", "-5"},
		{0.5, "0.5", "0.5"},
		{0.1, "0.10000000000000001", "0.1"},
		{1.0 / 3, "0.33333333333333331", "0.33333333333333"},
		{1e14, "100000000000000", "1e+14"},
		{123456789012345, "123456789012345", "1.2345678901234e+14"},
		{1e15, "1000000000000000", "1e+15"},
		{1764472786000000, "1764472786000000", "1.764472786e+15"},
		{1e16, "10000000000000000", "1e+16"},
		{1 << 53, "9007199254740992", "9.007199254741e+15"},
		{-(1 << 53), "-9007199254740992", "-9.007199254741e+15"},
		{1<<53 - 1, "9007199254740991", "9.007199254741e+15"},
		{1<<53 + 2, "9007199254740994", "9.007199254741e+15"},
		{1e17, "1e+17", "1e+17"},
		{1e20, "1e+20", "1e+20"},
		{math.Pow(2, 63), "9.2233720368547758e+18", "9.2233720368548e+18"},
		{1e-5, "1.0000000000000001e-05", "1e-05"},
		{0.0001234, "0.00012339999999999999", "0.0001234"},
		{0.30000000000000004, "0.30000000000000004", "0.3"},
		{5e-324, "4.9406564584124654e-324", "4.9406564584125e-324"},
		{math.Inf(1), "inf", "inf"},
		{math.Inf(-1), "-inf", "-inf"},
		{math.Copysign(math.NaN(), -1), "-nan", "-nan"},
	} {
		if got := formatG17(tc.f); got != tc.g17 {
			t.Errorf("formatG17(%v) = %q, want %q", tc.f, got, tc.g17)
		}
		if got := formatG14(tc.f); got != tc.g14 {
			t.Errorf("formatG14(%v) = %q, want %q", tc.f, got, tc.g14)
		}
	}
	// The integers' fast path is the general %.17g for every integer up to 2^53.
	r := rand.New(rand.NewPCG(1, 17))
	for range 10000 {
		f := math.Trunc((r.Float64()*2 - 1) * math.Ldexp(1, 40+r.IntN(14)))
		if got, want := formatG17(f), strconv.FormatFloat(f, 'g', 17, 64); got != want {
			t.Fatalf("formatG17(%v) = %q, want %q", f, got, want)
		}
	}
}

func TestParseInt(t *testing.T) {
	for _, tc := range []struct {
		s  string
		n  int64
		ok bool
	}{
		{"0", 0, true},
		{"-1", -1, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"-9223372036854775808", math.MinInt64, true},
		{"9223372036854775808", 0, false},
		{"-0", 0, false},
		{"007", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"1.0", 0, false},
		{"123456789012345678901", 0, false},
	} {
		n, ok := parseInt(tc.s)
		if ok != tc.ok || n != tc.n {
			t.Errorf("parseInt(%q) = %d, %v; want %d, %v", tc.s, n, ok, tc.n, tc.ok)
		}
	}
}

func TestParseFloat(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		s       string
		f       float64
		ok      bool
		rangeOK bool // as a ZCOUNT bound
	}{
		{"1.5", 1.5, true, true},
		{"-inf", -inf, true, true},
		{"+inf", inf, true, true},
		{"Infinity", inf, true, true},
		{"1e400", 0, false, true},
		{"1e-400", 0, false, true},
		{"5e-324", 5e-324, true, true},
		{"0x10", 16, true, true},
		{"0x1p-2", 0.25, true, true},
		{"0x1p99999", 0, false, true},  // overflow, as Redis's ZADD refuses it
		{"0x1p-99999", 0, false, true}, // underflow to zero
		{"0x1p-1074", 5e-324, true, true},
		{"-0x.8", -0.5, true, true},
		{"nan", 0, false, false},
		{" 1", 0, false, true},
		{"1 ", 0, false, false},
		{"", 0, false, true},
		{"1e", 0, false, false},
		{".5", 0.5, true, true},
		{"5.", 5, true, true},
		{".", 0, false, false},
		{"0x", 0, false, false},
	} {
		f, ok := parseFloat(tc.s)
		if ok != tc.ok || (ok && f != tc.f) {
			t.Errorf("parseFloat(%q) = %v, %v; want %v, %v", tc.s, f, ok, tc.f, tc.ok)
		}
		if _, ok := parseRangeFloat(tc.s); ok != tc.rangeOK {
			t.Errorf("parseRangeFloat(%q) ok = %v, want %v", tc.s, ok, tc.rangeOK)
		}
	}
}

func TestCInt64(t *testing.T) {
	for _, tc := range []struct {
		f float64
		n int64
	}{
		{3.99, 3},
		{-3.99, -3},
		{math.Pow(2, 62), 1 << 62},
		{math.Pow(2, 63), math.MinInt64},
		{-math.Pow(2, 63), math.MinInt64},
		{math.Inf(1), math.MinInt64},
		{math.NaN(), math.MinInt64},
	} {
		if got := cInt64(tc.f); got != tc.n {
			t.Errorf("cInt64(%v) = %d, want %d", tc.f, got, tc.n)
		}
	}
}

// TestSweepBoundsMemory checks that keys nobody touches again are freed by
// the amortised sweeps, without Keys or Len being called.
func TestSweepBoundsMemory(t *testing.T) {
	h := New(WithClock(NewManualClock(time.Unix(0, 0))))
	clock := h.clock.(*ManualClock)
	for i := 0; i < 100000; i++ {
		if _, err := h.Do(context.Background(), "SET", "k"+formatG17(float64(i)), "v", "PX", "10"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Millisecond)
	}
	if n := len(h.ks.m); n > 2*minSweepSize {
		t.Errorf("%d keys held for 11 live ones", n)
	}
}

// TestPlainIntegerIsStrtod holds strtod's fast path for plain integers to the general
// scan: the same double, bit for bit, and the same length read, for every text the fast
// path takes, and refusal for every text it must leave to the scan.
func TestPlainIntegerIsStrtod(t *testing.T) {
	texts := []string{"0", "-0", "7", "-7", "000123", "-000", "999999999999999", "-999999999999999",
		"1764472786000000", "123456789012345", "9007199254740992", "-9007199254740992", "9007199254740993",
		"9999999999999999", "-9999999999999999", "0009007199254740", "12345678901234567", "", "-", "+5", " 5", "5 ", "1e3",
		"5.0", "0x10", "--5", "12a", "inf", "nan"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		texts = append(texts, strconv.FormatInt(r.Int64N(1<<53)>>r.IntN(53)*int64(1-2*r.IntN(2)), 10))
	}
	for _, s := range texts {
		want, wn, werange := strtodScan(s)
		got, ok := plainInteger(s)
		if !ok {
			d := strings.TrimPrefix(s, "-")
			if v, err := strconv.ParseInt(d, 10, 64); err == nil && len(d) <= 16 && strings.Trim(d, "0123456789") == "" && v <= 1<<53 {
				t.Errorf("plainInteger(%q) refused a plain integer", s)
			}
			continue
		}
		if math.Float64bits(got) != math.Float64bits(want) || wn != len(s) || werange {
			t.Errorf("plainInteger(%q) = %v; strtod's scan reads %v (%d bytes, erange %t)", s, got, want, wn, werange)
		}
	}
}
