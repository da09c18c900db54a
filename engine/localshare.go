package engine

import "github.com/rlctl/rlctl/algorithms"

// shareLocal rewrites the rules at positions local of call (a check of group g of
// rules, which its backend failed) for the on_error = "local" fallback: the rule of a
// policy with a local_share runs at its share of the limit (algorithms.Algorithm.Share:
// the amount divided by the share, rounded down, never below 1, and a rate's period
// multiplied by it), so that local_share instances falling back at once admit together
// at most what the rule's guarantee states. The rules are rewritten in call, so what the
// fallback charges is refunded, and its leases released, with the same parameters; a
// rewritten rule sends all of them (no compiled rule holds the share).
//
// A share that cannot be computed (parameters known only per request whose share leaves
// the exact-arithmetic range; validation refuses what it can know) leaves the rule at its
// whole limit, and is logged.
func (e *Engine) shareLocal(call *algorithms.Call, rules []pending, g group, local []int) {
	for _, k := range local {
		n := rules[g.idx[k]].policy.LocalShare
		if n <= 1 {
			continue
		}
		r := &call.Rules[k]
		w, err := r.Algorithm.Share(r.Params, n)
		if err != nil {
			e.logs.log(e, "share", "rlctl: the local fallback runs a rule at its whole limit: its share cannot be computed", "policy", rules[g.idx[k]].policy.Name, "rule", rules[g.idx[k]].rule.Name, "err", err)
			continue
		}
		r.Params, r.Compiled = w, nil
	}
}
