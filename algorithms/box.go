package algorithms

import "fmt"

// Box is a rule's penalty box (a policy's block_for): once the rule denies a key, every
// request of that key is denied until the block ends.
//
//   - An offence is a denial by the rule of a cost above 0 that can fit (retry-after not
//     Never), by an enforcing or a shadow rule, in a call that is decided (a partial
//     admission offends only when it grants nothing). It starts a block of For
//     microseconds at the call's instant t: the key's requests at instants in [t, t+For)
//     are denied by the rule, with remaining 0 and retry-after and reset-after at least
//     until t+For (retry-after exactly that, unless the rule itself needs longer), and the
//     rule is not charged. At t+For the rule decides alone again.
//   - A block is never extended by the requests it refuses: they are not offences.
//   - With Max above For, repeat offenders wait longer: an offence before Max has passed
//     since the key's last block ended starts a block of twice that block's length, at
//     least For and at most Max. Without (Max 0), every block is For long.
//
// The block lives in Redis beside the rule's key (dispatch.lua's boxed), read and written
// in the same script call that decides the rule.
type Box struct {
	For int64 // block length in microseconds; 0: no box
	Max int64 // escalation ceiling in microseconds; 0 (or at most For): none
}

// Escalates reports whether repeat offences get longer blocks.
func (b Box) Escalates() bool { return b.Max > b.For }

// check reports a Box the script refuses.
func (b Box) check() error {
	if b.For < 0 || b.For > MaxInt || b.Max < 0 || b.Max > MaxInt || b.For == 0 && b.Max != 0 {
		return fmt.Errorf("penalty box {%d µs, ceiling %d µs} out of range: want a length in [1, 2^53] µs and a ceiling of 0 or up to 2^53", b.For, b.Max)
	}
	return nil
}

// boxRecord is the reference model's record of a key's last block.
type boxRecord struct{ end, length int64 }

// apply is the reference verdict of box b on its rule's verdict r of cost at now, given
// the key's last block rec (zero: none): the verdict as the script reports it, whether
// the rule's charge is dropped (blocked), and the length of the block a denial starts (0:
// none). See Box.
func (b Box) apply(r RuleResult, rec boxRecord, now, cost int64) (out RuleResult, blocked bool, length int64) {
	if now < rec.end {
		wait := rec.end - now
		r.Allowed, r.Remaining = false, 0
		if r.RetryAfter != Never {
			r.RetryAfter = max(r.RetryAfter, wait)
		}
		r.ResetAfter = max(r.ResetAfter, wait)
		return r, true, 0
	}
	if r.Allowed || cost == 0 || r.RetryAfter == Never {
		return r, false, 0
	}
	return r, false, b.Length(rec.end, rec.length, now)
}

// Length is the length of the block an offence at now starts, for a key whose last block
// ended at lastEnd and lasted lastLength (0, 0: none): For, or when the box escalates and
// now is before lastEnd+Max, twice lastLength, at least For and at most Max.
func (b Box) Length(lastEnd, lastLength, now int64) int64 {
	if b.Escalates() && lastEnd > 0 && now < lastEnd+b.Max {
		return min(max(2*lastLength, b.For), b.Max)
	}
	return b.For
}

// offend is what a block of length starting now does to the rule's reported verdict.
func offend(r RuleResult, length int64) RuleResult {
	r.Remaining = 0
	r.RetryAfter = max(r.RetryAfter, length)
	r.ResetAfter = max(r.ResetAfter, length)
	return r
}

// boxSuffix ends the key of a boxed rule's block: the rule's key, then this (prelude.lua's
// BOX).
const boxSuffix = ":!box"

// BoxKey returns the key that holds the block of the boxed rule whose key is ruleKey:
// deleting it unblocks the key and forgets its last block.
func BoxKey(ruleKey string) string { return ruleKey + boxSuffix }
