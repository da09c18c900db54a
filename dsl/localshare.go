package dsl

import (
	"errors"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
)

// maxLocalShare bounds Policy.LocalShare.
const maxLocalShare = 10_000

// localShare decodes a policy's local_share into p, once on_error is decoded.
func (l *loader) localShare(a *hcl.Attribute, p *Policy) {
	n, ok := l.countIn(a, 1, maxLocalShare, "local_share is the number of instances of the service that may decide in-process at once during an outage (each then keeps 1/local_share of every rule's limit), a whole number")
	if !ok {
		return
	}
	if p.OnError != OnErrorLocal {
		l.add(errorf(a.Range, "local_share without on_error = \"local\"", "local_share divides a rule's limit among the instances that decide in-process while Redis is unavailable, which only on_error = \"local\" does: this policy's on_error is %q. Set on_error = \"local\", or remove local_share.", p.OnError))
		return
	}
	p.LocalShare, p.shareRange = n, a.Range
}

// checkShare checks rule r against its policy's local share: its algorithm must name the
// parameters of its limit, and each combination of its known parameter values (wires, as
// decodeRule collects them) must stay in range once shared, when they were all checked
// unshared (checked). It warns where a share is
// below what a request costs, or a limit below the instances that share it.
func (l *loader) checkShare(r *Rule, p *Policy, wires [][][]int64, checked bool) {
	n := p.LocalShare
	if n <= 1 || r.Algorithm == nil {
		return
	}
	alg := r.Algorithm
	if !alg.CanShare() {
		why := fmt.Sprintf("its guarantee's figures are not parameters as they are: write them as param.NAME (amount = param.limit) in algorithm %q's guarantee block, so the share scales those parameters", alg.Name)
		switch {
		case alg.Guarantee.Shape == algorithms.ShapeNone:
			why = fmt.Sprintf("algorithm %q states no limit (guarantee \"none\"), so there is nothing to share: declare the limit it keeps", alg.Name)
		case len(alg.Guarantee.Also) > 0:
			why = fmt.Sprintf("algorithm %q states several limits (a guarantee block each), and a share scales the parameters of one", alg.Name)
		}
		l.add(errorf(p.shareRange, "Limit cannot be shared", "local_share = %d runs every rule of policy %q at 1/%d of its limit while Redis is unavailable, but rule %q cannot be: %s. Or remove local_share.", n, p.Name, n, r.Name, why))
		return
	}
	if !checked {
		return // values known per request only, or already reported: Share checks them then
	}
	cost := int64(1)
	if r.Cost != nil {
		if r.Cost.kind != kindConst {
			cost = 0 // not known: not compared
		} else if c, err := asInt(r.Cost.val); err == nil {
			cost = c
		}
	}
	idx := make([]int, len(wires))
	for {
		var w []int64
		for i, ws := range wires {
			w = append(w, ws[idx[i]]...)
		}
		shared, err := alg.Share(w, n)
		if err != nil {
			detail := err.Error()
			if errors.Is(err, algorithms.ErrRange) {
				detail += ": a rate's period is multiplied by local_share, so lower local_share or use a shorter period"
			}
			l.add(errorf(p.shareRange, "Share out of range", "Rule %q (%s) shared among %d instances: %s.", r.Name, describeWire(alg, w), n, detail))
			return
		}
		amount, full := shared[alg.Guarantee.Share.Amount], w[alg.Guarantee.Share.Amount]
		switch {
		case full < n:
			l.add(warnf(p.shareRange, "Limit below the share", "Rule %q's limit %d is below local_share = %d: each instance keeps at least 1, so %d instances deciding in-process together admit up to %d, more than the limit. Raise the limit, or lower local_share to %d.", r.Name, full, n, n, n, full))
			return
		case cost > amount:
			l.add(warnf(p.shareRange, "Cost above the share", "A request of rule %q costs %d but its limit shared among %d instances is %d (of %d): while Redis is unavailable such a request is always denied. Lower local_share or the cost.", r.Name, cost, n, amount, full))
			return
		}
		i := len(idx) - 1
		for i >= 0 {
			if idx[i]++; idx[i] < len(wires[i]) {
				break
			}
			idx[i] = 0
			i--
		}
		if i < 0 {
			return
		}
	}
}
