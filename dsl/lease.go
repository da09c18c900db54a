package dsl

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// maxLease bounds lease_size: the units one instance may hold of a key is capacity that
// every other instance may be denied (see Rule.LeaseSize), so a lease is a slice of a
// limit, not the limit of a fleet.
const maxLease = 1_000_000

// lease decodes a rule's quota lease: lease_size (the most units an instance takes from the
// rule's key at once) and lease_for (the longest it may hold them). It runs once the
// rule's parameters are decoded: a lease needs them constant.
func (l *loader) lease(r *Rule, content *hcl.BodyContent) {
	a, hold := content.Attributes["lease_size"], content.Attributes["lease_for"]
	if a == nil {
		if hold != nil {
			l.add(errorf(hold.NameRange, "lease_for without lease", "lease_for is how long an instance may hold the units it leased, so it needs the lease itself: add lease_size, such as lease_size = 100, or remove lease_for."))
		}
		return
	}
	n, ok := l.countIn(a, 1, maxLease, "lease_size is the most units an instance takes from the rule's key at once")
	if !ok {
		return
	}
	why := ""
	switch {
	case r.Algorithm.Name != "fixed_window":
		why = fmt.Sprintf("rule %q uses %s. A lease is spent where it was taken and must end when the units it holds stop counting: a fixed_window's window (or calendar period) does, and then what an instance spent counted in the window it was spent in. A bucket's or a sliding window's charge keeps counting past any instant, so units spent later than they were charged would let an interval see more than the limit. Use algorithm = \"fixed_window\", or remove lease_size", r.Name, r.Algorithm.Name)
	case r.Shadow:
		why = fmt.Sprintf("rule %q is a shadow rule, which denies nothing: there is no hot path to serve from a lease. Remove lease_size or shadow", r.Name)
	case r.Box.For > 0:
		why = fmt.Sprintf("rule %q has a penalty box, which a denial starts on Redis; a denial served from a lease never reaches Redis. Remove lease_size or block_for", r.Name)
	case r.wire == nil:
		why = fmt.Sprintf("rule %q has parameters known only per request; a lease is taken once and spent by many requests, so its limit and window must be constants", r.Name)
	case n > r.wire[0]:
		why = fmt.Sprintf("the lease size (%d) is above the rule's limit (%d): an instance would hold the whole limit. A lease is a slice of the limit, such as a twentieth of it or less, times the instances that share it", n, r.wire[0])
	}
	if why != "" {
		l.add(errorf(a.Expr.Range(), "Rule cannot be leased", "lease_size = %d lets an instance take up to %d units of a key at once and spend them in process, but %s.", n, n, why))
		return
	}
	r.LeaseSize = n
	if hold == nil {
		return
	}
	us, ok := l.duration(hold, false)
	if !ok {
		return
	}
	r.LeaseFor = us
}
