package algorithms

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Override is one key's override of an overridable rule (Rule.Overridable): the
// parameters the rule takes for that key instead of its own, until an instant.
//
// The key's state is in the figures in force when it was written, and every change
// converts it, atomically with the change (each algorithm's retune in lua/):
//   - fixed_window, sliding_window and sliding_log keep what they counted, against the
//     new limit; their window is the key's clock and cannot be overridden.
//   - gcra, token_bucket and leaky_bucket carry the amount the key has used (cells, tokens
//     taken, the level), rounded up to a whole unit and at most the new burst or capacity:
//     a key that used 10 of 10 and is raised to 200 has 190 left, one lowered below what
//     it used is empty, not in debt.
//   - concurrency keeps the leases held, against the new max; a new ttl applies to leases
//     taken from then on.
//
// Setting, changing and clearing convert at the call's instant. An override whose Until
// has come ends at the key's next decision (or change), which converts the state as it
// was at Until back to the rule's own figures, so the end takes effect at Until exactly.
type Override struct {
	// Until is the instant (µs since the Unix epoch, on the clock of the calls that
	// decide the key) the override ends; 0: until cleared.
	Until int64
	// Params holds Algorithm.WireLen() values; a Lease slot's is ignored.
	Params []int64
}

// overrideSuffix ends the key of an overridable rule's override: the rule's key, then this
// (prelude.lua's OVR).
const overrideSuffix = ":!ovr"

// OverrideKey returns the key that holds the override of the overridable rule whose key is
// ruleKey.
func OverrideKey(ruleKey string) string { return ruleKey + overrideSuffix }

// RuleKeyOfOverride returns the rule key whose override key is k, and whether k is one.
func RuleKeyOfOverride(k string) (string, bool) { return strings.CutSuffix(k, overrideSuffix) }

// Overridable reports whether a rule of a takes overrides: the built-ins do (each has a
// retune); plugins do not.
func (a *Algorithm) Overridable() bool { return IsBuiltin(a) }

// windowed is the built-ins whose window (wire value 2) an override keeps.
var windowed = []string{"fixed_window", "sliding_window", "sliding_log"}

// CheckOverride reports why a rule of a whose parameters are base cannot take the
// parameters q for a key, or nil: q must be valid for a, and a window algorithm keeps its
// window.
func (a *Algorithm) CheckOverride(base, q []int64) error {
	if !a.Overridable() {
		return fmt.Errorf("%s takes no overrides (only the built-in algorithms do)", a.Name)
	}
	if len(q) != a.WireLen() || len(base) != a.WireLen() {
		return fmt.Errorf("%s takes %d parameter values", a.Name, a.WireLen())
	}
	if err := a.Validate(q); err != nil {
		return err
	}
	if slices.Contains(windowed, a.Name) && q[1] != base[1] {
		return fmt.Errorf("an override of %s keeps its window (%d µs): the window is the key's clock; change the policy to change it", a.Name, base[1])
	}
	return nil
}

// Encode returns the override of a rule of a whose own parameters are base as the script
// stores it (prelude.lua's OVR): "<until> <keep> <v1> … <vm>", keep the longest any state
// of the key lives under either figures when the override ends and the end converts the
// key's state (see lifetime; else 0), then
// the values of a's parameters other than a lease, in order.
func (o Override) Encode(a *Algorithm, base []int64) string {
	var keep int64
	if o.Until > 0 {
		keep = max(lifetime(a, base), lifetime(a, o.Params))
	}
	var b strings.Builder
	b.WriteString(strconv.FormatInt(o.Until, 10))
	b.WriteByte(' ')
	b.WriteString(strconv.FormatInt(keep, 10))
	for i, v := range o.Params {
		if a.IsLeaseSlot(i) {
			continue
		}
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(v, 10))
	}
	return b.String()
}

// DecodeOverride reads an override of a rule of a as Encode writes it; lease slots are 0.
func DecodeOverride(a *Algorithm, s string) (Override, error) {
	f := strings.Fields(s)
	o := Override{Params: make([]int64, a.WireLen())}
	n := 0
	for i := range o.Params {
		if !a.IsLeaseSlot(i) {
			n++
		}
	}
	if len(f) != n+2 || strings.Join(f, " ") != s {
		return Override{}, fmt.Errorf("override %q: want an instant, a keep and %d values", s, n)
	}
	var err error
	if o.Until, err = strconv.ParseInt(f[0], 10, 64); err != nil || o.Until < 0 {
		return Override{}, fmt.Errorf("override %q: bad instant", s)
	}
	j := 2
	for i := range o.Params {
		if a.IsLeaseSlot(i) {
			continue
		}
		if o.Params[i], err = strconv.ParseInt(f[j], 10, 64); err != nil {
			return Override{}, fmt.Errorf("override %q: bad value %q", s, f[j])
		}
		j++
	}
	if err := a.Validate(o.Params); err != nil {
		return Override{}, fmt.Errorf("override %q: %w", s, err)
	}
	return o, nil
}

// lifetime bounds how long (µs) a key of an algorithm a whose retune converts its state
// (gcra, the buckets) holds state after its last write with parameters w: its time to
// refill or drain whole. 0 for the others, whose state an override's end does not convert
// (the windows and concurrency keep theirs as it is), so an override's end needs nothing
// of it.
func lifetime(a *Algorithm, w []int64) int64 {
	switch a.Name {
	case "gcra":
		return ceilDiv(w[2]*w[1], w[0])
	case "token_bucket", "leaky_bucket":
		return ceilDiv(w[0]*w[2], w[1])
	}
	return 0
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
