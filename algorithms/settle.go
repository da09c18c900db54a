package algorithms

import "math/big"

// Refundable is how much of want units a settlement may give back to rule r's key,
// elapsed µs after the call that charged them, whose reply gave the key a reset-after of
// resetAfter µs: what that charge still weighs on the key, so that a refund never gives
// back capacity that later requests used (engine.Reservation.Settle).
//
// A window's units (fixed_window, sliding_window, sliding_log) weigh in full until the
// reset-after has passed: a refund at the charge's instant comes out of the window it was
// charged in. A rate's (gcra, token_bucket, leaky_bucket) weigh what the key would still
// owe had it been left alone since: resetAfter − elapsed of refill, at the rate. Any other
// algorithm's, and an overridable rule's rate (whose key may decide with an override the
// caller does not see), weigh nothing that can be told apart.
func (r *Rule) Refundable(want, resetAfter, elapsed int64) int64 {
	left := resetAfter - 1 - elapsed
	if left <= 0 || want <= 0 || !IsBuiltin(r.Algorithm) {
		return 0
	}
	var rate, period int64
	switch r.Algorithm.Name {
	case "fixed_window", "sliding_window", "sliding_log":
		return want
	case "gcra":
		rate, period = r.Params[0], r.Params[1]
	case "token_bucket", "leaky_bucket":
		rate, period = r.Params[1], r.Params[2]
	default:
		return 0
	}
	if r.Overridable || period <= 0 {
		return 0
	}
	// The units still outstanding had the key been left alone since the charge: the
	// charge's are the last of them.
	n := new(big.Int).Mul(big.NewInt(left), big.NewInt(rate))
	n.Quo(n, big.NewInt(period))
	if n.IsInt64() {
		return min(want, n.Int64())
	}
	return want
}
