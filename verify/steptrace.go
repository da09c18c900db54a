package verify

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// stepTrace is a property checked on traces of its own (the penalty box, overrides,
// lists): steps of type S, each giving an outcome of type O when run.
type stepTrace[S, O any] struct {
	// per is about how many script calls a step takes: a trace has at most the budget
	// left's steps (checker.steps) over per.
	per int
	// gen draws a trace of n steps; limit is the largest limit the traces' first
	// outcomes have reported.
	gen func(rng *rand.Rand, n int, limit int64) []S
	// run runs steps on a fresh rig and returns the outcomes up to the first step that
	// breaks the statement, that step's index (-1: none) and what it breaks.
	run func(g *rig, steps []S) (outs []O, bad int, msg string, err error)
	// limit is the limit an outcome reports (0: none).
	limit func(O) int64
	// at is a step's instant (trace µs); step and result describe a step and its outcome
	// in a counterexample, whose steps are unit ("requests", "steps").
	at     func(S) int64
	step   func(S) string
	result func(O) string
	unit   string
}

// check runs traces within the verify budget and returns res passed, its detail held's
// (given the traces, steps and calls run), or failed at the first breach, shrunk to the
// fewest steps that still break the statement at the last, as a counterexample.
func (t stepTrace[S, O]) check(c *checker, rng *rand.Rand, res Result, held func(traces, steps, calls int) string) (Result, error) {
	limit := int64(1)
	calls, traces, steps := 0, 0, 0
	var failing []S
	for calls < c.o.budget {
		g, err := c.rig()
		if err != nil {
			return res, err
		}
		trace := t.gen(rng, c.steps(c.o.budget-calls)/t.per+1, limit)
		outs, bad, _, err := t.run(g, trace)
		steps += len(outs)
		calls += g.calls
		c.calls += g.calls
		traces++
		if err != nil {
			return res, err
		}
		if len(outs) > 0 {
			limit = max(limit, t.limit(outs[0]))
		}
		if bad >= 0 {
			failing = trace[:bad+1]
			break
		}
	}
	res.Calls = calls
	if failing == nil {
		res.Status = Pass
		res.Detail = held(traces, steps, calls)
		return res, nil
	}
	// Shrink: drop steps while the statement still breaks at the last one kept.
	breaks := func(steps []S) (bool, error) {
		g, err := c.rig()
		if err != nil {
			return false, err
		}
		_, bad, _, err := t.run(g, steps)
		c.calls += g.calls
		return bad == len(steps)-1, err
	}
	for k := len(failing) - 2; k >= 0; k-- {
		try := append(append([]S(nil), failing[:k]...), failing[k+1:]...)
		ok, err := breaks(try)
		if err != nil {
			return res, err
		}
		if ok {
			failing = try
		}
	}
	g, err := c.rig()
	if err != nil {
		return res, err
	}
	outs, bad, msg, err := t.run(g, failing)
	if err != nil || bad < 0 {
		return res, fmt.Errorf("verify: a breach of %s did not repeat on its shrunk trace (%v)", res.Property, err)
	}
	res.Status = Fail
	res.Detail = fmt.Sprintf("at %s: %s", fmtUS(t.at(failing[bad])), msg)
	ce := &Counterexample{Original: len(failing), Unit: t.unit}
	for k, st := range failing {
		ce.Steps = append(ce.Steps, CounterStep{At: time.Duration(t.at(st)) * time.Microsecond, Request: t.step(st), Result: t.result(outs[k]), Mark: k == bad})
	}
	res.Counterexample = ce
	return res, nil
}
