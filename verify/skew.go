package verify

import (
	"errors"
	"fmt"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

// clientClocks is the limit property of a rule of a client-clock policy against clients
// whose clocks are up to the policy's ClockSkew apart and step back and forth within it:
// a request is decided at its client's time, the statement is judged on the true clock
// and widened by the skew (see spec.skew). An algorithm that lets a clock running behind
// move its state back in time lets clients that alternate get more through: this finds
// it. Half the budget's requests go to it.
func (c *checker) clientClocks(p *dsl.Policy, ru *dsl.Rule, sub *subject, params string) (Result, error) {
	sk := *sub
	sk.spec.skew = p.ClockSkew
	r := Result{Policy: p.Name, Rule: ru.Name, Algorithm: sub.alg.Name, Params: params, Property: PropSkew, Statement: sk.spec.statement()}
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
		if v := checkLimit(&sk, steps, res); v != nil && worse(v, worst) {
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
	want := worst
	small := shrinkSteps(worstSteps, func(try []step) bool {
		res, g, err := sk.run(c.g, try)
		if err != nil {
			return false
		}
		c.calls += g.calls
		v := checkLimit(&sk, try, res)
		return v != nil && !worse(want, v)
	})
	res, g, err := sk.run(c.g, small)
	if err != nil {
		return r, err
	}
	c.calls += g.calls
	v := checkLimit(&sk, small, res)
	r.Status, r.Detail = v.status, v.msg
	r.Counterexample = sk.counterexample(small, res, v.mark, len(worstSteps))
	return r, nil
}
