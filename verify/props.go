package verify

import (
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/rlctl/rlctl/algorithms"
)

// Property names, as reports show them.
const (
	PropErrors      = "errors"
	PropLimit       = "limit"
	PropRetryAfter  = "retry-after"
	PropDenials     = "denials"
	PropRemaining   = "remaining"
	PropPartial     = "partial"
	PropResetAfter  = "reset-after"
	PropSkew        = "client clocks"
	PropAtomicity   = "atomicity"
	PropExpiry      = "expiry"
	PropDeterminism = "determinism"
	PropRace        = "race"
	PropRaceCluster = "race (cluster)"
	PropRaceCommand = "race (redis.call)"
	PropBox         = "penalty box"
	PropOverride    = "override"
	PropLists       = "lists"
)

// Statements of the properties, as Results carry them. The limit property's statement
// depends on the algorithm; see spec.statement.
const (
	stmtErrors = "every request gets a reply: no request, whatever came before it, makes the script raise an error (a Lua runtime error, a Redis command that fails)"
	stmtRetry  = "a denied request's retry-after r is sound (the same request is denied at every instant before r has passed) and sufficient (it is allowed once r has passed), with no other request in between; it is -1 exactly when the cost exceeds the limit, and 0 for an allowed request"
	stmtDenial = "an exact guarantee is a promise to admit too: a request is denied only when admitting it would break the limit statement, given what was admitted before"
	stmtRemain = "remaining is what is left: never negative nor above the limit; a request of that cost at the same instant passes and one of a unit more does not; the limit a reply reports is the guarantee's amount"
	stmtPart   = "a partial admission (engine.AllowAtMost) of more than remaining, at the same instant, is granted exactly remaining: the check that first denies it writes nothing and reports the remaining a peek does"
	stmtReset  = "reset-after is when the key is back to empty: a peek then answers as for a fresh key, and a peek before then does not (it may be late by the declared precision, never early)"
	stmtAtom1  = "a denied request, and a peek (cost 0), changes nothing a later request can tell: every later answer is what it would be without them (a rewrite no answer shows, such as a purge of what no longer counts, is a note)"
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

// checkLimit checks the limit statements on a single-rule trace, each as a hard ceiling
// (its declared bound) and then as its exact figure: a trace within the declared bound but
// beyond the exact statement is a warning, the algorithm doing what it says it does by
// design (fixed_window's boundary burst). The worst breach of any statement is reported.
func checkLimit(s *subject, steps []step, res []result) *violation {
	if s.spec.shape == algorithms.ShapeNone {
		return nil
	}
	gs := grants(steps, res)
	var w *violation
	for _, sp := range s.spec.statements() {
		var v *violation
		if e := sp.worst(gs, sp.bound); e != nil {
			v = limitViolation(sp, gs, e, Fail)
		} else if !sp.exact() {
			if e := sp.worst(gs, algorithms.Exact); e != nil {
				v = limitViolation(sp, gs, e, Warn)
			}
		}
		if v != nil && worse(v, w) {
			w = v
		}
	}
	return w
}

func limitViolation(sp spec, gs []grant, e *excess, st Status) *violation {
	v := &violation{status: st, score: float64(e.allowed) / float64(max(e.bound, 1)), span: e.span}
	for k := e.from; k <= e.to; k++ {
		v.mark = append(v.mark, gs[k].step)
	}
	exactBound := e.bound
	if !sp.exact() && st == Fail {
		// e.bound is the declared bound's figure; quote the limit's own apart from it.
		exactBound = sp.worstBoundExact(gs, e)
	}
	switch sp.shape {
	case algorithms.ShapeWindow:
		v.msg = fmt.Sprintf("%d allowed within %s (less than the %s window) against a limit of %d", e.allowed, fmtUS(e.span), fmtUS(sp.window-sp.widen()), sp.limit)
	case algorithms.ShapeRate:
		v.msg = fmt.Sprintf("%d allowed within %s against a burst of %d", e.allowed, fmtUS(e.span), sp.limit)
		if exactBound != sp.limit {
			v.msg += fmt.Sprintf(", where at most %d may pass (the burst and what the rate earns in %s)", exactBound, fmtUS(e.span+sp.widen()))
		}
	case algorithms.ShapeInFlight:
		v.msg = fmt.Sprintf("%d held at once against a limit of %d", e.allowed, sp.limit)
	}
	switch {
	case st == Fail && !sp.exact():
		v.msg += fmt.Sprintf(": %s the limit, beyond even the declared bound of %s× (%d)", times(e.allowed, exactBound), sp.bound, e.bound)
	case st == Warn:
		v.msg += fmt.Sprintf(": %s the limit, within the declared bound of %s×, by design", times(e.allowed, e.bound), sp.bound)
	}
	return v
}

// worstBoundExact is the exact statement's figure for the breach e found against the
// declared bound: what may pass over e's span.
func (s spec) worstBoundExact(gs []grant, e *excess) int64 {
	if s.shape != algorithms.ShapeRate {
		return s.limit
	}
	b := new(big.Int).Mul(big.NewInt(e.span+s.widen()), big.NewInt(s.rate))
	b.Add(b, new(big.Int).Mul(big.NewInt(s.limit), big.NewInt(s.period)))
	return b.Quo(b, big.NewInt(s.period)).Int64()
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
		case rr.RetryAfter < 0 || rr.RetryAfter == 0 && s.spec.res == 0:
			// With a declared resolution a retry-after of 0 may be a tick early, as any
			// other: it is judged below.
			return &violation{status: Fail, mark: []int{i}, msg: fmt.Sprintf("a denied request got retry-after %d", rr.RetryAfter)}
		}
		// With a declared resolution the advice may be a tick early or late: the request
		// must pass a tick after it, and may pass a tick (plus the precision) before.
		due, tick := st.at+rr.RetryAfter, s.spec.res
		for j := i + 1; j < len(steps); j++ {
			sj := steps[j]
			if sj.release || sj.at > due+tick {
				break
			}
			// With client clocks the advice is for the client that got it, on its own
			// clock: another client's requests only end the wait when they are charged.
			if sj.cost == st.cost && sj.skew == st.skew {
				switch {
				case sj.at < due-s.spec.prec.RetryAfter-tick && res[j].allowed:
					msg := fmt.Sprintf("unsound: told to retry after %s, the same request passed after only %s", fmtUS(rr.RetryAfter), fmtUS(sj.at-st.at))
					if p := s.spec.prec.RetryAfter; p > 0 || tick > 0 {
						msg += fmt.Sprintf(", earlier than the declared precision (%s late at most) and resolution (a tick of %s either way) allow", fmtUS(p), fmtUS(max(tick, 1)))
					}
					return &violation{status: Fail, mark: []int{i, j}, msg: msg}
				case sj.at == due+tick && !res[j].allowed:
					when := "then"
					if tick > 0 {
						when = fmt.Sprintf("a tick (%s) after it", fmtUS(tick))
					}
					return &violation{status: Fail, mark: []int{i, j}, msg: fmt.Sprintf("insufficient: told to retry after %s, the same request retried %s was denied again (retry-after %s more)", fmtUS(rr.RetryAfter), when, retryText(res[j].rr.RetryAfter))}
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

// checkAtomic1 checks, on a single-rule trace run on g, that denied requests and peeks
// change nothing a later request can tell: a step that rewrote the key is taken out and
// the trace run again, and the later answers compared (allowed, remaining, retry-after,
// reset-after). A rewrite that changes a later answer fails; one that changes none on
// the trace (a trim, a purge of what no longer counts) is a note. g's keys and clock are
// as the trace left them afterwards.
func checkAtomic1(s *subject, g *rig, steps []step, res []result) *violation {
	var rewrote []int
	for i, st := range steps {
		if !st.release && !(res[i].allowed && st.cost > 0) && res[i].before != res[i].after {
			rewrote = append(rewrote, i)
		}
	}
	if len(rewrote) == 0 {
		return nil
	}
	what := func(i int) string {
		if res[i].allowed {
			return "a peek (cost 0)"
		}
		return "a denied request"
	}
	fail := func(i, j int, without result) *violation {
		msg := fmt.Sprintf("%s changed the key: %s", what(i), stateDiff(res[i].before, res[i].after))
		if j < 0 {
			return &violation{status: Fail, mark: []int{i}, msg: msg}
		}
		return &violation{status: Fail, mark: []int{i, j}, msg: fmt.Sprintf("%s; request %d then answered %s, where without it the answer is %s", msg, j+1, answerText(res[j]), answerText(without))}
	}
	// One run without every rewrite settles the usual cases: none shows (a note), or the
	// trace has one rewrite. Only when several together show is each tried alone, to name
	// the one to blame.
	j, without, err := s.observed(g, steps, res, rewrote)
	switch {
	case err != nil:
		return fail(rewrote[0], -1, result{})
	case j < 0:
		i := rewrote[0]
		return &violation{status: Note, mark: []int{i}, msg: fmt.Sprintf("%s rewrote the key (%s), which changed no later answer of the trace", what(i), stateDiff(res[i].before, res[i].after))}
	case len(rewrote) == 1:
		return fail(rewrote[0], j, without)
	}
	for _, i := range rewrote {
		if j1, without1, err := s.observed(g, steps, res, []int{i}); err != nil || j1 >= 0 {
			return fail(i, j1, without1)
		}
	}
	return fail(rewrote[0], j, without) // they show only together
}

// observed runs steps again on g without the steps drop (ascending indexes) and returns
// the first later step whose answer differs from res's, with its answer there (-1 when
// none does). g's keys and step counts are restored.
func (s *subject) observed(g *rig, steps []step, res []result, drop []int) (int, result, error) {
	snap := g.h.Snapshot()
	calls, probeCalls := g.calls, g.probeCalls
	defer func() {
		g.h.Restore(snap)
		g.calls, g.probeCalls = calls, probeCalls
	}()
	var without []step
	var kept []int // kept[k]: the index in steps of without[k]
	for i, st := range steps {
		if slices.Contains(drop, i) {
			continue
		}
		st.probe = false
		without = append(without, st)
		kept = append(kept, i)
	}
	other, _, err := s.run(g, without)
	if err != nil {
		return -1, result{}, err
	}
	for k, j := range kept {
		a, b := res[j], other[k]
		if j < drop[0] || steps[j].release {
			continue
		}
		if a.allowed != b.allowed || a.rr.Remaining != b.rr.Remaining || a.rr.RetryAfter != b.rr.RetryAfter || a.rr.ResetAfter != b.rr.ResetAfter {
			return j, b, nil
		}
	}
	return -1, result{}, nil
}

// answerText is a step's answer in a finding.
func answerText(r result) string {
	verdict := "denied"
	if r.allowed {
		verdict = "allowed"
	}
	retry := "never"
	if r.rr.RetryAfter >= 0 {
		retry = fmtUS(r.rr.RetryAfter)
	}
	return fmt.Sprintf("%s, remaining %d, retry-after %s, reset-after %s", verdict, r.rr.Remaining, retry, fmtUS(r.rr.ResetAfter))
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
	gap := expiryGap + s.spec.prec.TTL + s.spec.res + s.slack
	g.at(horizon + gap)
	if n := g.h.Len(); n > 0 {
		keys := g.h.Keys()
		mark := []int{len(steps) - 1}
		if last >= 0 {
			mark = []int{last}
		}
		dump := g.dump(keys[0])
		msg := fmt.Sprintf("%d key(s) left %s after the last reset-after ended (at %s): %s = %s", n, fmtUS(gap), traceTime(horizon), keys[0], stateText(dump))
		if st, ok := parseState(dump); ok && st.expireAt < 0 {
			msg += ", so it never expires"
		} else if s.spec.prec.TTL == 0 {
			msg += `; if the algorithm's TTLs are coarser than its answers on purpose (EXPIRE in whole seconds), declare it in its guarantee: precision { ttl = "1s" }`
		}
		return &violation{status: Fail, mark: mark, msg: msg}
	}
	return nil
}

// checkDenial checks, for an exact guarantee, that each denial was needed: admitting the
// request would have broken the statement over what was admitted before it. An algorithm
// stricter than it says (a refill slower than its rate, a release that frees nothing)
// breaks no upper bound; this is what catches it.
func checkDenial(s *subject, steps []step, res []result) *violation {
	if s.spec.shape == algorithms.ShapeNone || !s.spec.exactAll() {
		return nil
	}
	// The algorithm's clock may be a tick off: a denial is needed when admitting would
	// break a statement judged a tick the other way (a window a tick longer).
	needed := func(gs []grant) bool {
		for _, sp := range s.spec.statements() {
			if st := sp.worstWidened(gs, algorithms.Exact, sp.skew-sp.res); st != nil {
				return true
			}
		}
		return false
	}
	for i, st := range steps {
		if st.release || res[i].allowed || st.cost == 0 || st.cost > s.spec.limit {
			continue
		}
		gs := append(grants(steps[:i], res[:i]), grant{step: i, at: st.at, cost: st.cost, endStep: -1})
		if !needed(gs) {
			var mark []int
			for _, g := range gs {
				mark = append(mark, g.step)
			}
			return &violation{status: Fail, mark: mark[max(0, len(mark)-8):], msg: fmt.Sprintf("a request of cost %d was denied that the guarantee admits: with it, every interval keeps to the statement; the algorithm is stricter than its exact guarantee says", st.cost)}
		}
	}
	return nil
}

// checkRemaining checks each reply's remaining and limit on a single-rule trace, with the
// probes of the steps that took them.
func checkRemaining(s *subject, steps []step, res []result) *violation {
	for i, st := range steps {
		if st.release {
			continue
		}
		rr := res[i].rr
		at := func(format string, args ...any) *violation {
			return &violation{status: Fail, mark: []int{i}, msg: fmt.Sprintf(format, args...)}
		}
		switch {
		case rr.Remaining < 0:
			return at("remaining %d is negative", rr.Remaining)
		case s.spec.shape != algorithms.ShapeNone && rr.Limit != s.spec.limit:
			return at("the reply reports a limit of %d; the guarantee's amount is %d", rr.Limit, s.spec.limit)
		case s.spec.shape != algorithms.ShapeNone && rr.Remaining > s.spec.limit:
			return at("remaining %d is above the limit of %d", rr.Remaining, s.spec.limit)
		}
		p := res[i].probes
		if !p.done {
			continue
		}
		switch {
		case rr.Remaining > p.fresh:
			return at("remaining %d is more than an empty key has (%d)", rr.Remaining, p.fresh)
		case rr.Remaining > 0 && !p.fits && !(p.unprobed && rr.Remaining > s.alg.MaxCost):
			return at("remaining %d, yet a request of cost %d at the same instant was denied", rr.Remaining, rr.Remaining)
		case p.over:
			return at("remaining %d, yet a request of cost %d at the same instant was allowed", rr.Remaining, rr.Remaining+1)
		}
	}
	return nil
}

// checkPartial checks, on each probed reply of a single-rule trace whose remaining holds
// (the remaining property's), what a partial admission of a unit more than remaining at
// the same instant was granted: exactly remaining.
func checkPartial(s *subject, steps []step, res []result) *violation {
	for i, st := range steps {
		p, rr := res[i].probes, res[i].rr
		if st.release || !p.done || p.unprobed || p.late || rr.Remaining < 0 || p.over || (rr.Remaining > 0 && !p.fits) {
			continue
		}
		if p.granted != rr.Remaining {
			return &violation{status: Fail, mark: []int{i}, msg: fmt.Sprintf("remaining %d, and a request of that cost at the same instant passes, yet a partial admission of %d then (engine.AllowAtMost) was granted %d: the check that denies it first must write nothing and report the remaining a peek does", rr.Remaining, rr.Remaining+1, p.granted)}
		}
	}
	return nil
}

// checkReset checks each probed reply's reset-after on a single-rule trace: the key is
// back to empty then, and not before (less the declared precision).
func checkReset(s *subject, steps []step, res []result) *violation {
	for i, st := range steps {
		p := res[i].probes
		if st.release || !p.done {
			continue
		}
		rr := res[i].rr
		at := func(format string, args ...any) *violation {
			return &violation{status: Fail, mark: []int{i}, msg: fmt.Sprintf(format, args...)}
		}
		switch {
		case rr.ResetAfter < 0:
			return at("reset-after %d is negative", rr.ResetAfter)
		case rr.ResetAfter >= maxProbeAhead:
			continue
		case !p.liveAfter && rr.Remaining < p.fresh && !(res[i].allowed && st.cost > 0):
			// Nothing was charged, so there is no key to outlive: a remaining below an empty
			// key's is the remaining property's finding, not a TTL's.
			continue
		case !p.liveAfter && rr.Remaining < p.fresh:
			return at("the request left no key, yet its reply counts state (remaining %d of an empty key's %d, reset-after %s): the key was deleted as it was written, as a TTL of 0 does", rr.Remaining, p.fresh, fmtUS(rr.ResetAfter))
		case p.atReset != p.fresh:
			return at("reset-after %s, yet a peek then reports remaining %d, not the %d of an empty key: reset-after is too early", fmtUS(rr.ResetAfter), p.atReset, p.fresh)
		case p.atResetAfter > 0:
			// An empty key has nothing to reset: a peek then must say so too (a limit
			// of several periods can show a full remaining while a longer one counts).
			return at("reset-after %s, yet a peek then reports reset-after %s more, where an empty key reports 0: reset-after is too early", fmtUS(rr.ResetAfter), fmtUS(p.atResetAfter))
		case p.earlyAt > 0 && rr.Remaining < p.fresh && p.early == p.fresh && p.earlyReset == 0:
			// Back to empty before reset-after: the key expired early, or the answer is late.
			if p.lostState {
				return at("reset-after %s, yet the key expired %s after the request, while its state still counted: its TTL is shorter than what the state means, so the limit forgets requests early", fmtUS(rr.ResetAfter), fmtUS(p.expiredAt-st.at))
			}
			late := "too late"
			if d := s.spec.prec.ResetAfter; d > 0 {
				late = fmt.Sprintf("later than its declared precision (%s) allows", fmtUS(d))
			}
			return at("reset-after %s, yet the key was back to empty %s after the request: reset-after is %s", fmtUS(rr.ResetAfter), fmtUS(p.earlyAt-st.at), late)
		}
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
