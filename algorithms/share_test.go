package algorithms

import (
	"errors"
	"testing"
)

// Every built-in's Share scales exactly the figures its guarantee states: the amount to
// max(1, floor(amount/n)), a rate to 1/n (its period × n), the interval unchanged. This
// holds the declared slots to the declared terms.
func TestShareScalesTheGuarantee(t *testing.T) {
	wires := map[string][]int64{
		"fixed_window":   {50, 60_000_000},
		"sliding_log":    {50, 60_000_000},
		"sliding_window": {50, 60_000_000},
		"token_bucket":   {600, 10, 1_000_000},
		"leaky_bucket":   {600, 10, 1_000_000},
		"gcra":           {10, 1_000_000, 100},
		"concurrency":    {3, 30_000_000, 0},
	}
	for _, a := range Builtin() {
		w, ok := wires[a.Name]
		if !ok {
			t.Fatalf("no wire for %s", a.Name)
		}
		if !a.CanShare() {
			t.Errorf("%s cannot share its limit", a.Name)
			continue
		}
		full, _, err := a.TermsOf(w)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int64{1, 2, 3, 7, 1000} {
			out, err := a.Share(w, n)
			if err != nil {
				t.Errorf("%s among %d: %v", a.Name, n, err)
				continue
			}
			got, _, err := a.TermsOf(out)
			if err != nil {
				t.Fatalf("%s among %d: %v", a.Name, n, err)
			}
			want := full
			want.Amount = max(1, full.Amount/n)
			if a.Guarantee.Shape == ShapeRate {
				want.Period = full.Period * n
			}
			if got != want {
				t.Errorf("%s among %d: terms %+v, want %+v", a.Name, n, got, want)
			}
			if full.Amount >= n && n*got.Amount > full.Amount {
				t.Errorf("%s among %d: %d instances of %d pass the limit %d", a.Name, n, n, got.Amount, full.Amount)
			}
		}
	}
}

// A limit smaller than the instances is 1 each: the least an instance can admit.
func TestShareRoundsDownToOne(t *testing.T) {
	a, _ := Lookup("sliding_log")
	out, err := a.Share([]int64{2, 60_000_000}, 3)
	if err != nil || out[0] != 1 || out[1] != 60_000_000 {
		t.Fatalf("2 among 3: %v %v, want [1 60000000]", out, err)
	}
	out, err = a.Share([]int64{10, 60_000_000}, 3)
	if err != nil || out[0] != 3 {
		t.Fatalf("10 among 3: %v %v, want 3", out, err)
	}
}

func TestShareRefuses(t *testing.T) {
	gcra, _ := Lookup("gcra")
	plugin := &Algorithm{Name: "quota", Params: []Param{{Name: "limit", Kind: Count}, {Name: "window", Kind: Duration}},
		Guarantee: Guarantee{Shape: ShapeWindow, Terms: windowTerms(0, 1)}}
	none := &Algorithm{Name: "counter", Params: []Param{{Name: "limit", Kind: Count}}, Guarantee: Guarantee{Shape: ShapeNone, Share: &Slots{Amount: 0, Rate: -1}}}
	for _, c := range []struct {
		name string
		a    *Algorithm
		w    []int64
		n    int64
		is   error
	}{
		{"no instances", gcra, []int64{10, 1_000_000, 100}, 0, nil},
		{"negative", gcra, []int64{10, 1_000_000, 100}, -3, nil},
		{"undeclared slots", plugin, []int64{10, 1_000_000}, 3, ErrNoShare},
		{"no limit stated", none, []int64{10}, 3, ErrNoShare},
		{"period past 2^53", gcra, []int64{1, MaxInt / 2, 1}, 3, ErrRange},
		{"past the range Validate checks", gcra, []int64{1, 1_000_000_000, 10_000_000}, 1000, ErrRange},
		{"short wire", gcra, []int64{10, 1_000_000}, 3, nil},
	} {
		_, err := c.a.Share(c.w, c.n)
		if err == nil || c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.is)
		}
	}
}
