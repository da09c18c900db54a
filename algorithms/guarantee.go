package algorithms

import (
	"fmt"
	"math"
	"math/big"
)

// Shape is the form of the limit an algorithm guarantees.
type Shape int

const (
	// ShapeNone: the algorithm states no limit (it only counts, or limits something verify
	// cannot express); verify skips the limit property and says so.
	ShapeNone Shape = iota
	// ShapeWindow: in every interval shorter than Terms.Interval, the cost allowed is at
	// most Terms.Amount.
	ShapeWindow
	// ShapeRate: in every interval of length T, the cost allowed is at most
	// Terms.Amount + T × Terms.Rate / Terms.Period (a burst and a sustained rate).
	ShapeRate
	// ShapeInFlight: at every instant, the cost of leases held (acquired, not released and
	// younger than Terms.Interval) is at most Terms.Amount.
	ShapeInFlight
)

// String is the shape's name as a policy's guarantee block labels it.
func (s Shape) String() string {
	switch s {
	case ShapeWindow:
		return "window"
	case ShapeRate:
		return "rate"
	case ShapeInFlight:
		return "in_flight"
	}
	return "none"
}

// Shapes are the shapes a guarantee block may name, in the order the docs list them.
var Shapes = []Shape{ShapeWindow, ShapeRate, ShapeInFlight, ShapeNone}

// Terms are a guarantee's figures for one rule's parameters.
type Terms struct {
	// Amount is the cost allowed per interval (window), the burst (rate) or the most held
	// at once (in-flight). A request whose cost exceeds it never passes, and the script
	// reports it as the rule's limit.
	Amount int64
	// Interval is the window (window) or the lease lifetime (in-flight), in µs.
	Interval int64
	// Rate per Period µs is the sustained rate (rate).
	Rate, Period int64
}

// Refill is the time a rate guarantee takes to earn Amount back, rounded up (µs); the
// interval of the other shapes. It is the time scale of the limit.
func (t Terms) Refill() int64 {
	if t.Rate <= 0 {
		return t.Interval
	}
	if t.Amount >= 0 && t.Period >= 0 && t.Amount <= math.MaxInt64/max(t.Period, 1) {
		if n := t.Amount * t.Period; n <= math.MaxInt64-t.Rate {
			return (n + t.Rate - 1) / t.Rate // exact in int64: no allocation
		}
	}
	v := new(big.Int).Mul(big.NewInt(t.Amount), big.NewInt(t.Period))
	r := big.NewInt(t.Rate)
	v.Add(v, r).Sub(v, big.NewInt(1)).Quo(v, r)
	if !v.IsInt64() {
		return MaxInt
	}
	return v.Int64()
}

// Ratio is an exact positive fraction.
type Ratio struct{ Num, Den int64 }

// Exact is the bound of an algorithm that meets its statement exactly.
var Exact = Ratio{1, 1}

// IsExact reports whether r is 1 (or unset).
func (r Ratio) IsExact() bool { return r.Den == 0 || r.Num == r.Den }

// Of returns floor(n × r).
func (r Ratio) Of(n int64) int64 {
	if r.IsExact() {
		return n
	}
	v := new(big.Int).Mul(big.NewInt(n), big.NewInt(r.Num))
	v.Quo(v, big.NewInt(r.Den))
	if !v.IsInt64() {
		return MaxInt
	}
	return v.Int64()
}

// Rat returns r as a big.Rat (1 when unset).
func (r Ratio) Rat() *big.Rat {
	if r.Den == 0 {
		return big.NewRat(1, 1)
	}
	return big.NewRat(r.Num, r.Den)
}

// String prints r as a decimal: "2", "1.5", "1.333".
func (r Ratio) String() string {
	s := r.Rat().FloatString(3)
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}

// Precision is how far an algorithm's answers may be from exact, in µs: a retry-after or
// reset-after may be up to RetryAfter or ResetAfter late (never early), and a key may
// outlive its reset-after by up to TTL (besides Redis's millisecond rounding). Zero is
// exact, the default.
//
// Resolution is the algorithm's clock tick: it sees time only to Resolution µs (a
// millisecond or second clock), or with an error below it (float seconds). Its limit is
// then judged at that tick, as if its clock could be off the true one by up to a tick
// (a window looks up to a tick shorter; a rate's interval a tick longer), and each
// retry-after and reset-after may be early or late by up to a tick besides RetryAfter and
// ResetAfter. Zero (the default) is 1 µs, the engine's own clock.
type Precision struct {
	RetryAfter, ResetAfter, TTL int64
	Resolution                  int64
}

// Guarantee is what an algorithm promises, as rlctl verify checks it: the shape of its
// limit and the figures it takes from a rule's parameters, whether it meets that exactly
// or within a declared Bound, and the Precision of its answers. Built-ins declare theirs
// in the registry; a plugin's comes from its HCL guarantee block. Nothing is inferred from
// parameter names.
type Guarantee struct {
	Shape Shape
	// Terms computes the figures from a rule's wire parameters (nil for ShapeNone).
	Terms func(w []int64) (Terms, error)
	// Bound is the factor of the statement the algorithm may reach by design: at most
	// Bound × Amount in a window (or Bound × (Amount + T × rate) for a rate). Exact (1)
	// when zero. Traffic between the exact statement and the bound is reported as a
	// warning by design, beyond the bound as a failure.
	Bound Ratio
	// Why explains a Bound above 1, in one sentence.
	Why       string
	Precision Precision
	// Also are further statements the algorithm keeps at once, each with its own Shape
	// (window or rate), Terms and Bound: a multi-period limit (10 a second and 1000 a day)
	// states each period. The Precision and Share are the first statement's, whose
	// amount the script reports as the limit.
	Also []Guarantee
	// Share names the parameters the figures are, for Algorithm.Share; nil when they are
	// not parameters as they are, and the limit cannot be shared among instances.
	Share *Slots
}

// TermsOf returns a's terms for wire parameters w; ok is false for ShapeNone.
func (a *Algorithm) TermsOf(w []int64) (t Terms, ok bool, err error) {
	g := a.Guarantee
	if g.Shape == ShapeNone || g.Terms == nil {
		return Terms{}, false, nil
	}
	if len(w) != a.WireLen() {
		return Terms{}, false, fmt.Errorf("%s takes %d parameter values, got %d", a.Name, a.WireLen(), len(w))
	}
	t, err = g.Terms(w)
	if err != nil {
		return Terms{}, false, fmt.Errorf("%s's guarantee: %w", a.Name, err)
	}
	if t.Amount < a.amountMin() || (g.Shape != ShapeRate && t.Interval < 1) || (g.Shape == ShapeRate && (t.Rate < 1 || t.Period < 1)) {
		return Terms{}, false, fmt.Errorf("%s's guarantee gives %+v for parameters %v: every figure must be positive", a.Name, t, w)
	}
	return t, true, nil
}

// AlsoTermsOf returns the terms of a's further statements (Guarantee.Also) for wire
// parameters w, in order, with the shape of each.
func (a *Algorithm) AlsoTermsOf(w []int64) ([]Terms, error) {
	var out []Terms
	for i, g := range a.Guarantee.Also {
		if g.Terms == nil {
			return nil, fmt.Errorf("%s's statement %d has no terms", a.Name, i+2)
		}
		t, err := g.Terms(w)
		if err != nil {
			return nil, fmt.Errorf("%s's statement %d: %w", a.Name, i+2, err)
		}
		if t.Amount < a.amountMin() || (g.Shape != ShapeRate && t.Interval < 1) || (g.Shape == ShapeRate && (t.Rate < 1 || t.Period < 1)) {
			return nil, fmt.Errorf("%s's statement %d gives %+v for parameters %v: every figure must be positive", a.Name, i+2, t, w)
		}
		out = append(out, t)
	}
	return out, nil
}

// amountMin is the smallest Terms.Amount a's guarantee may give: the Min of the parameter
// the amount is (Guarantee.Share.Amount), so 0 where a rule may admit nothing (a limit of
// 0: at most 0 in every window); 1 when the guarantee names no parameter.
func (a *Algorithm) amountMin() int64 {
	if s := a.Guarantee.Share; s != nil && s.Amount >= 0 {
		if p, ok := a.paramAt(s.Amount); ok {
			return p.Min()
		}
	}
	return 1
}

// windowTerms and rateTerms read the built-ins' fixed layouts: the wire slots of the
// amount and of the interval or rate (two slots: amount and period).
func windowTerms(amount, interval int) func(w []int64) (Terms, error) {
	return func(w []int64) (Terms, error) { return Terms{Amount: w[amount], Interval: w[interval]}, nil }
}

func rateTerms(amount, rate int) func(w []int64) (Terms, error) {
	return func(w []int64) (Terms, error) {
		return Terms{Amount: w[amount], Rate: w[rate], Period: w[rate+1]}, nil
	}
}
