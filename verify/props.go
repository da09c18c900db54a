package verify

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rlctl/rlctl/algorithms"
)

// Property names, as reports show them.
const (
	PropErrors      = "errors"
	PropLimit       = "limit"
	PropRetryAfter  = "retry-after"
	PropAtomicity   = "atomicity"
	PropExpiry      = "expiry"
	PropDeterminism = "determinism"
	PropRace        = "race"
	PropRaceCluster = "race (cluster)"
	PropRaceCommand = "race (redis.call)"
)

// Statements of the properties, as Results carry them. The limit property's statement
// depends on the algorithm; see spec.statement.
const (
	stmtErrors = "every request gets a reply: no request, whatever came before it, makes the script raise an error (a Lua runtime error, a Redis command that fails)"
	stmtRetry  = "a denied request's retry-after r is sound (the same request is denied at every instant before r has passed) and sufficient (it is allowed once r has passed), with no other request in between; it is -1 exactly when the cost exceeds the limit, and 0 for an allowed request"
	stmtAtom1  = "a denied request, and a peek (cost 0), changes nothing: the key's value and expiry are identical before and after"
	stmtAtomN  = "a request is allowed exactly when every enforcing rule allows it (the first enforcing rule that denies decides), and a denied request changes none of its rules' keys"
	stmtExp    = "after the traffic stops, once every reset-after the rule reported has passed, no key is left: idle state expires and memory stays bounded by the active keys"
	stmtDet    = "the same trace run twice, each time on a fresh host, gives identical replies and identical state"
	stmtRace   = "N clients at the same instant, their requests each one atomic script call in seeded random and adversarial orders, never get more through than the limit property allows"
	stmtRaceC  = "in cluster mode without a shard key each rule is its own call and a request denied by a later rule refunds the earlier ones; N clients interleaving those calls at one instant never get more through than the limit property allows"
	stmtRaceR  = "the same algorithm with its steps run as separate commands (no script atomicity), N clients interleaved at redis.call granularity: does the limit still hold? (it should not: this is why every rule runs in one script)"
)

// violation is a property broken by a trace.
type violation struct {
	status Status // Fail or Warn
	msg    string
	mark   []int   // steps to point at in the counterexample
	score  float64 // how bad, to prefer the worst breach: allowed/bound for limits
	span   int64   // for equal scores, the shorter breach is the clearer: µs it took
}

// grants collects the allowed charges of a single-rule trace; a lease's end is set from
// the step that released it.
func grants(steps []step, res []result) []grant {
	var gs []grant
	for i, st := range steps {
		if st.release || !res[i].allowed || st.cost <= 0 {
			continue
		}
		g := grant{step: i, at: st.at, cost: st.cost, endStep: -1}
		for j := i + 1; j < len(steps); j++ {
			if steps[j].release && steps[j].lease == st.lease {
				g.endStep = j
				break
			}
		}
		gs = append(gs, g)
	}
	return gs
}

// checkLimit checks the limit statement on a single-rule trace. A trace within the
// documented bound but beyond the exact one is a warning (fixed_window's boundary burst).
func checkLimit(s *subject, steps []step, res []result) *violation {
	if s.spec.kind == boundNone {
		return nil
	}
	gs := grants(steps, res)
	if e := s.spec.worst(gs, s.spec.documented); e != nil {
		return limitViolation(s.spec, gs, e, Fail)
	}
	if s.spec.documented > 1 {
		if e := s.spec.worst(gs, 1); e != nil {
			return limitViolation(s.spec, gs, e, Warn)
		}
	}
	return nil
}

func limitViolation(sp spec, gs []grant, e *excess, st Status) *violation {
	v := &violation{status: st, score: float64(e.allowed) / float64(max(e.bound, 1)), span: e.span}
	for k := e.from; k <= e.to; k++ {
		v.mark = append(v.mark, gs[k].step)
	}
	switch sp.kind {
	case boundWindow:
		v.msg = fmt.Sprintf("%d allowed within %s (less than the %s window) against a limit of %d", e.allowed, fmtUS(e.span), fmtUS(sp.window), sp.limit)
	case boundRate:
		v.msg = fmt.Sprintf("%d allowed within %s against a limit of %d", e.allowed, fmtUS(e.span), sp.limit)
		if e.bound != sp.limit {
			v.msg += fmt.Sprintf(", where at most %d may pass (the limit and what refills in %s)", e.bound, fmtUS(e.span))
		}
	case boundInFlight:
		v.msg = fmt.Sprintf("%d held at once against a limit of %d", e.allowed, sp.limit)
	}
	if st == Fail && sp.documented > 1 {
		v.msg += fmt.Sprintf(": %s the limit, more than even the documented %d×limit (%d)", times(e.allowed, sp.limit), sp.documented, sp.limit*sp.documented)
	}
	if st == Warn {
		v.msg += fmt.Sprintf(": %s the limit (%s)", times(e.allowed, sp.limit), sp.note)
	}
	return v
}

// times is n as a multiple of limit: "2×", "1.25×", "1.67×".
func times(n, limit int64) string {
	x := strconv.FormatFloat(float64(n)/float64(max(limit, 1)), 'f', 2, 64)
	return strings.TrimSuffix(strings.TrimRight(x, "0"), ".") + "×"
}

// checkRetry checks retry-after soundness and sufficiency on a single-rule trace.
func checkRetry(s *subject, steps []step, res []result) *violation {
	for i, st := range steps {
		if st.release {
			continue
		}
		rr := res[i].rr
		if res[i].allowed {
			if rr.RetryAfter != 0 {
				return &violation{status: Fail, mark: []int{i}, msg: fmt.Sprintf("an allowed request got retry-after %d µs (want 0)", rr.RetryAfter)}
			}
			continue
		}
		switch {
		case rr.RetryAfter == algorithms.Never && st.cost <= rr.Limit:
			return &violation{status: Fail, mark: []int{i}, msg: fmt.Sprintf("a request of cost %d, within the limit of %d, was told it can never pass", st.cost, rr.Limit)}
		case rr.RetryAfter == algorithms.Never:
			continue
		case st.cost > rr.Limit:
			return &violation{status: Fail, mark: []int{i}, msg: fmt.Sprintf("a request of cost %d, above the limit of %d, was told to retry after %s (want -1: it can never pass)", st.cost, rr.Limit, fmtUS(rr.RetryAfter))}
		case rr.RetryAfter <= 0:
			return &violation{status: Fail, mark: []int{i}, msg: fmt.Sprintf("a denied request got retry-after %d", rr.RetryAfter)}
		}
		due := st.at + rr.RetryAfter
		for j := i + 1; j < len(steps); j++ {
			sj := steps[j]
			if sj.release || sj.at > due {
				break
			}
			if sj.cost == st.cost {
				switch {
				case sj.at < due && res[j].allowed:
					return &violation{status: Fail, mark: []int{i, j}, msg: fmt.Sprintf("unsound: told to retry after %s, the same request passed after only %s", fmtUS(rr.RetryAfter), fmtUS(sj.at-st.at))}
				case sj.at == due && !res[j].allowed:
					return &violation{status: Fail, mark: []int{i, j}, msg: fmt.Sprintf("insufficient: told to retry after %s, the same request retried then was denied again (retry-after %s more)", fmtUS(rr.RetryAfter), retryText(res[j].rr.RetryAfter))}
				}
			}
			if res[j].allowed && sj.cost > 0 {
				break
			}
		}
	}
	return nil
}

func retryText(us int64) string {
	if us == algorithms.Never {
		return "never"
	}
	return fmtUS(us)
}

// checkAtomic1 checks that denied requests and peeks change nothing on a single-rule trace.
func checkAtomic1(steps []step, res []result) *violation {
	for i, st := range steps {
		if st.release || (res[i].allowed && st.cost > 0) {
			continue
		}
		if res[i].before != res[i].after {
			what := "a denied request"
			if res[i].allowed {
				what = "a peek (cost 0)"
			}
			return &violation{status: Fail, mark: []int{i}, msg: fmt.Sprintf("%s changed the key: %s became %s", what, stateText(res[i].before), stateText(res[i].after))}
		}
	}
	return nil
}

func stateText(s string) string {
	if s == "" {
		return "(no key)"
	}
	return s
}

// expiryGap is how long past a reset-after a key may live: Redis keeps expiry instants in
// milliseconds, so the scripts round TTLs up and add one.
const expiryGap = 3000

// checkExpiry checks, after the trace ran on g, that no key outlives the last reset-after.
func checkExpiry(s *subject, g *rig, steps []step, res []result) *violation {
	var horizon int64
	last := -1
	for i, st := range steps {
		if st.release {
			continue
		}
		if end := st.at + res[i].rr.ResetAfter; end >= horizon {
			horizon, last = end, i
		}
	}
	if len(steps) == 0 {
		return nil
	}
	horizon = max(horizon, steps[len(steps)-1].at)
	g.at(horizon + expiryGap)
	if n := g.h.Len(); n > 0 {
		keys := g.h.Keys()
		mark := []int{len(steps) - 1}
		if last >= 0 {
			mark = []int{last}
		}
		return &violation{status: Fail, mark: mark, msg: fmt.Sprintf("%d key(s) left %s after the last reset-after ended: %s = %s", n, fmtUS(expiryGap), keys[0], g.dump(keys[0]))}
	}
	return nil
}

// sameResults reports the first step at which two runs of one trace differ, or -1.
func sameResults(a, b []result) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
