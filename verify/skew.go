package verify

import (
	"errors"
	"fmt"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

// clientClocks is the client clocks property of a rule of a client-clock policy: clients
// whose clocks are up to the policy's ClockSkew apart, each stepping back and forth
// within it, each request decided at its client's time. The limit is judged on the true
// clock, its statement widened by the skew (see spec.skew); retry-after, remaining and
// reset-after are each client's, on its own clock. An algorithm that lets a clock running
// behind move its state back in time lets clients that take turns get more through, and
// one that leaves the skew out of its answers misleads the clients behind: this finds
// both. Half the budget's requests go to it.
func (c *checker) clientClocks(p *dsl.Policy, ru *dsl.Rule, sub *subject, params string) (Result, error) {
	sk := *sub
	sk.spec.skew = p.ClockSkew
	r := Result{Policy: p.Name, Rule: ru.Name, Algorithm: sub.alg.Name, Params: params, Property: PropSkew,
		Statement: sk.spec.statement() + "; and each client's retry-after, remaining and reset-after hold on its own clock, as stated for the properties above"}
	switch {
	case sk.spec.shape == algorithms.ShapeNone:
		r.Status, r.Detail = Skip, sk.spec.noLimit()
		return r, nil
	case sk.spec.shape != algorithms.ShapeRate && sk.spec.window <= sk.spec.skew:
		r.Status = Skip
		r.Detail = fmt.Sprintf("the %s %s is no longer than the clock skew of %s, so client clocks that far apart promise nothing; set a smaller clock_skew, or use clock = \"server\"", map[bool]string{true: "window", false: "lease ttl"}[sk.spec.shape == algorithms.ShapeWindow], fmtUS(sk.spec.window), fmtUS(sk.spec.skew))
		return r, nil
	}
	rng := c.rng(p.Name, ru.Name, params, "clocks")
	budget := max(c.o.budget/2, 1)
	var worst *violation
	var worstSteps []step
	calls, traces := 0, 0
	for calls < budget {
		g, err := c.rig()
		if err != nil {
			return r, err
		}
		steps, res, err := genRule(rng, &sk, g, c.span(&sk), c.steps(budget-calls), newClocks(rng, sk.spec.skew))
		calls += g.calls
		c.calls += g.calls
		traces++
		var ce *callError
		if errors.As(err, &ce) { // the errors property reports it; check what came before
			steps = steps[:ce.step]
			if res, g, err = sk.run(g, steps); err != nil {
				return r, err
			}
			c.calls += g.calls
		} else if err != nil {
			return r, err
		}
		if v := checkClocks(&sk, steps, res); v != nil && worse(v, worst) {
			worst, worstSteps = v, steps
		}
		if worst != nil && worst.status == Fail {
			break
		}
	}
	r.Calls = calls
	if worst == nil {
		r.Status = Pass
		r.Detail = fmt.Sprintf("held on %d traces, %d requests from clients up to %s apart", traces, calls, fmtUS(sk.spec.skew))
		return r, nil
	}
	v, ce, err := c.shrink(&sk, worstSteps, worst, func(_ *rig, steps []step, res []result) *violation {
		return checkClocks(&sk, steps, res)
	})
	if err != nil {
		return r, err
	}
	r.Status, r.Detail, r.Counterexample = v.status, v.msg, ce
	return r, nil
}

// checkClocks checks a client-clock trace: the limit on the true clock, and retry-after,
// remaining and reset-after per client; the worst breach, named by what it breaks.
func checkClocks(s *subject, steps []step, res []result) *violation {
	var worst *violation
	for _, c := range []struct {
		prop  string
		check func(*subject, []step, []result) *violation
	}{{PropLimit, checkLimit}, {PropRetryAfter, checkRetry}, {PropRemaining, checkRemaining}, {PropResetAfter, checkReset}} {
		v := c.check(s, steps, res)
		if v == nil {
			continue
		}
		if c.prop != PropLimit {
			v.msg = c.prop + ": " + v.msg
		}
		if worse(v, worst) {
			worst = v
		}
	}
	return worst
}
