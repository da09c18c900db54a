package verify

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/luahost"
)

// rig is a fresh luahost running the engine script under a manual clock: one trace's
// world. Calls run in client-clock mode at the step's instant, with the host's clock set to
// it too, so TTLs expire on the trace's time.
type rig struct {
	script *algorithms.Script
	clock  *luahost.ManualClock
	h      *luahost.Host
	base   int64 // µs since the epoch of a trace's time 0
	calls  int
}

// base is the instant traces start at: midnight, so windows that divide a day align with
// the trace.
var base = Epoch.UnixMicro()

func newRig(s *algorithms.Script) (*rig, error) {
	clock := luahost.NewManualClock(Epoch)
	h := luahost.New(luahost.WithClock(clock), luahost.WithCommands(s.Commands()...))
	if _, err := h.Load(s.Source); err != nil {
		return nil, fmt.Errorf("verify: loading the engine script: %w", err)
	}
	return &rig{script: s, clock: clock, h: h, base: base}, nil
}

// reset empties g for the next trace: no keys, the clock at the trace's start. Loading the
// engine script costs more than a trace, so checks reuse one host; what a host carries
// from one script to the next besides its keys is math.random's state, which the built-in
// algorithms do not use (the determinism property runs on fresh hosts).
func (g *rig) reset() error {
	g.at(0)
	for _, k := range g.h.Keys() {
		if _, err := g.h.Do(context.Background(), "DEL", k); err != nil {
			return err
		}
	}
	g.calls = 0
	return nil
}

// at moves the clock to trace time t (µs).
func (g *rig) at(t int64) { g.clock.Set(time.UnixMicro(g.base + t)) }

// do runs one call at trace time t and decodes its reply (a refund's reply has no rules).
func (g *rig) do(t int64, c *algorithms.Call) (algorithms.Reply, error) {
	g.at(t)
	c.Now = g.base + t
	argv, err := c.Argv()
	if err != nil {
		return algorithms.Reply{}, err
	}
	g.calls++
	v, err := g.h.EvalSHA(context.Background(), g.script.SHA1, c.Keys(), argv)
	if err != nil {
		return algorithms.Reply{}, err
	}
	if c.Op == algorithms.OpRefund {
		return algorithms.Reply{Allowed: true}, nil
	}
	return algorithms.DecodeReply(v, len(c.Rules))
}

// dump returns key's canonical state ("" when absent).
func (g *rig) dump(key string) string {
	s, _ := g.h.Dump(key)
	return s
}

// subject is what a single-rule trace exercises: one algorithm with fixed parameters on
// one key.
type subject struct {
	alg    *algorithms.Algorithm
	params []int64
	key    string
	spec   spec
	lease  int // the wire slot of the lease parameter, or -1
}

func newSubject(a *algorithms.Algorithm, params []int64, key string) *subject {
	s := &subject{alg: a, params: params, key: key, spec: specOf(a, params), lease: -1}
	for i := range params {
		if isLeaseSlot(a, i) {
			s.lease = i
		}
	}
	return s
}

func isLeaseSlot(a *algorithms.Algorithm, i int) bool {
	for _, p := range a.Params {
		n := 1
		if p.Kind == algorithms.Rate {
			n = 2
		}
		if i < n {
			return p.Kind == algorithms.Lease
		}
		i -= n
	}
	return false
}

// step is one request of a single-rule trace.
type step struct {
	at   int64 // µs since the trace's start
	cost int64
	// release makes the step give back lease `lease` (refund) instead of asking.
	release bool
	lease   int
}

// result is what one step did.
type result struct {
	allowed bool
	rr      algorithms.RuleResult
	before  string // the key's state before the step
	after   string // and after
}

func leaseID(n int) string { return "lease-" + strconv.Itoa(n) }

// rule returns the wire rule of a step.
func (s *subject) rule(st step) algorithms.Rule {
	r := algorithms.Rule{Key: s.key, Algorithm: s.alg, Cost: st.cost, Params: s.params}
	if s.lease >= 0 {
		r.Lease = leaseID(st.lease)
	}
	return r
}

// exec runs one step on g.
func (s *subject) exec(g *rig, st step) (result, error) {
	c := algorithms.Call{Op: algorithms.OpCheck, Rules: []algorithms.Rule{s.rule(st)}}
	if st.release {
		c.Op = algorithms.OpRefund
	}
	g.at(st.at)
	res := result{before: g.dump(s.key)}
	rep, err := g.do(st.at, &c)
	if err != nil {
		return result{}, err
	}
	res.after = g.dump(s.key)
	res.allowed = rep.Allowed
	if !st.release {
		res.rr = rep.Rules[0]
	}
	return res, nil
}

// run executes steps on g, emptied first. A step whose call fails ends the run: the
// results of the steps before it come back with a *callError naming it.
func (s *subject) run(g *rig, steps []step) ([]result, *rig, error) {
	if err := g.reset(); err != nil {
		return nil, nil, err
	}
	out := make([]result, 0, len(steps))
	for i, st := range steps {
		res, err := s.exec(g, st)
		if err != nil {
			return out, g, &callError{step: i, err: err}
		}
		out = append(out, res)
	}
	return out, g, nil
}
