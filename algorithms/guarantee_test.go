package algorithms

import (
	"math/big"
	"strings"
	"testing"
)

// Every built-in declares a guarantee whose terms come from its wire parameters, and
// only fixed_window and sliding_window declare a bound (2, with why).
func TestBuiltinGuarantees(t *testing.T) {
	cases := map[string]struct {
		w    []int64
		want Terms
	}{
		"fixed_window":   {[]int64{5, 60_000_000}, Terms{Amount: 5, Interval: 60_000_000}},
		"sliding_log":    {[]int64{5, 60_000_000}, Terms{Amount: 5, Interval: 60_000_000}},
		"sliding_window": {[]int64{5, 60_000_000}, Terms{Amount: 5, Interval: 60_000_000}},
		"token_bucket":   {[]int64{600, 10, 1_000_000}, Terms{Amount: 600, Rate: 10, Period: 1_000_000}},
		"leaky_bucket":   {[]int64{600, 10, 1_000_000}, Terms{Amount: 600, Rate: 10, Period: 1_000_000}},
		"gcra":           {[]int64{10, 1_000_000, 100}, Terms{Amount: 100, Rate: 10, Period: 1_000_000}},
		"concurrency":    {[]int64{3, 30_000_000, 0}, Terms{Amount: 3, Interval: 30_000_000}},
	}
	for _, a := range Builtin() {
		c, ok := cases[a.Name]
		if !ok {
			t.Fatalf("no case for %s", a.Name)
		}
		got, ok, err := a.TermsOf(c.w)
		if !ok || err != nil || got != c.want {
			t.Errorf("%s: terms %+v %v %v, want %+v", a.Name, got, ok, err, c.want)
		}
		bounded := a.Name == "fixed_window" || a.Name == "sliding_window"
		if a.Guarantee.Bound.IsExact() == bounded || (bounded && a.Guarantee.Why == "") {
			t.Errorf("%s: bound %v (%q)", a.Name, a.Guarantee.Bound, a.Guarantee.Why)
		}
		if _, _, err := a.TermsOf(c.w[:1]); err == nil {
			t.Errorf("%s: terms of a short wire", a.Name)
		}
	}
}

func TestRatioAndRefill(t *testing.T) {
	for _, c := range []struct {
		r    Ratio
		n    int64
		of   int64
		text string
	}{
		{Exact, 7, 7, "1"}, {Ratio{}, 7, 7, "1"}, {Ratio{2, 1}, 7, 14, "2"},
		{Ratio{3, 2}, 7, 10, "1.5"}, {Ratio{4, 3}, 3, 4, "1.333"},
	} {
		if got := c.r.Of(c.n); got != c.of {
			t.Errorf("%v.Of(%d) = %d, want %d", c.r, c.n, got, c.of)
		}
		if got := c.r.String(); got != c.text {
			t.Errorf("%+v prints %q, want %q", c.r, got, c.text)
		}
	}
	// 5 tokens at 2 per 3µs take ceil(5·3/2) = 8µs to earn back.
	if got := (Terms{Amount: 5, Rate: 2, Period: 3}).Refill(); got != 8 {
		t.Errorf("refill %d, want 8", got)
	}
	if got := (Terms{Amount: 5, Interval: 9}).Refill(); got != 9 {
		t.Errorf("refill of a window %d, want its interval", got)
	}
	bad := &Algorithm{Name: "neg", Params: []Param{{Name: "n", Kind: Count}}, Guarantee: Guarantee{Shape: ShapeWindow,
		Terms: func(w []int64) (Terms, error) { return Terms{Amount: w[0] - 5, Interval: 1}, nil }}}
	if _, ok, err := bad.TermsOf([]int64{3}); ok || err == nil || !strings.Contains(err.Error(), "must be positive") {
		t.Errorf("non-positive terms: %v %v", ok, err)
	}
}

// Refill's integer path agrees with exact big-integer arithmetic, including near the
// int64 limit where it must fall back.
func TestRefillExact(t *testing.T) {
	for _, c := range []Terms{
		{Amount: 7, Rate: 3, Period: 5}, {Amount: 1, Rate: 1, Period: 1}, {Amount: 1 << 40, Rate: 7, Period: 1 << 22},
		{Amount: 1 << 53, Rate: 3, Period: 1 << 20}, {Amount: 1 << 62, Rate: 1 << 62, Period: 3},
	} {
		n := new(big.Int).Mul(big.NewInt(c.Amount), big.NewInt(c.Period))
		n.Add(n, big.NewInt(c.Rate-1)).Quo(n, big.NewInt(c.Rate))
		want := int64(MaxInt)
		if n.IsInt64() {
			want = n.Int64()
		}
		if got := c.Refill(); got != want {
			t.Errorf("%+v: refill %d, want %d", c, got, want)
		}
	}
}
