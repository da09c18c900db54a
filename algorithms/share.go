package algorithms

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Slots name the wire slots a guarantee's figures are read from, where each is a
// parameter as it is: what a limit shared among instances scales (see Algorithm.Share).
// Built-ins declare theirs beside their Terms; a plugin's come from its guarantee block
// when each figure there is a plain param.NAME.
type Slots struct {
	// Amount is the slot of Terms.Amount: the limit, capacity, burst or max.
	Amount int
	// Rate is the slot of a rate guarantee's Terms.Rate, its Terms.Period in the next
	// slot; -1 for the other shapes.
	Rate int
}

// ErrNoShare reports an algorithm whose guarantee does not name the parameters its limit
// is (a plugin whose figures are expressions, or one that states no limit), so the limit
// cannot be shared among instances.
var ErrNoShare = errors.New("the guarantee does not name the parameters of its limit")

// CanShare reports whether a's limit can be shared among instances (Share): its guarantee
// states a limit and names the parameters it is.
func (a *Algorithm) CanShare() bool {
	g := a.Guarantee
	return g.Shape != ShapeNone && g.Share != nil && g.Share.Amount >= 0 && (g.Shape != ShapeRate || g.Share.Rate >= 0)
}

// Share returns wire parameters w with the rule's limit shared among n instances, each of
// which may decide alone (the on_error = "local" fallback during an outage), so that the
// n together keep at most the guarantee of w:
//
//   - the amount (Terms.Amount: a limit, capacity, burst or max) becomes
//     max(1, floor(amount / n)): a limit of 2 among 3 instances is 1 each, 3 in all, the
//     most that 1 per instance can keep; a limit of 0 (a rule that admits nothing) stays 0;
//   - a rate (Terms.Rate per Terms.Period) keeps its amount and has its period multiplied
//     by n, exactly 1/n of it: "10/s" among 3 is 10 per 3s;
//   - a window or a lease's lifetime is unchanged.
//
// n = 1 returns w itself. The result is checked with Validate; it fails when n < 1, when a
// figure would leave the exact-arithmetic range, and with ErrNoShare when a cannot share.
func (a *Algorithm) Share(w []int64, n int64) ([]int64, error) {
	if n < 1 {
		return nil, fmt.Errorf("%s: a limit is shared among at least 1 instance, not %d", a.Name, n)
	}
	if !a.CanShare() {
		return nil, fmt.Errorf("%s: %w", a.Name, ErrNoShare)
	}
	if len(w) != a.WireLen() {
		return nil, fmt.Errorf("%s takes %d parameter values, got %d", a.Name, a.WireLen(), len(w))
	}
	if n == 1 {
		return w, nil
	}
	s := a.Guarantee.Share
	out := slices.Clone(w)
	out[s.Amount] = max(min(w[s.Amount], 1), w[s.Amount]/n)
	if a.Guarantee.Shape == ShapeRate {
		p := w[s.Rate+1]
		if p > math.MaxInt64/n || p*n > MaxInt {
			return nil, fmt.Errorf("%s: %w: a period of %dµs shared among %d instances is above 2^53µs", a.Name, ErrRange, p, n)
		}
		out[s.Rate+1] = p * n
	}
	if err := a.Validate(out); err != nil {
		return nil, fmt.Errorf("shared among %d instances: %w", n, err)
	}
	return out, nil
}
