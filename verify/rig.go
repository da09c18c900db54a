package verify

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/calendar"
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
	calls  int   // script calls of the trace's own requests
	// probeCalls are the calls probes made (see probes), apart from calls: a budget counts
	// requests, and probes only look.
	probeCalls int
	// tick, when set, is called after every script call.
	tick func()
	// fcall is h.FCall, or h.FCallBounded for a script of built-ins only (see fcaller).
	fcall func(ctx context.Context, function string, keys, args []string) (any, error)
	// calendars holds the calendar of each compiled calendar rule (dsl.Rule.Calendar):
	// do sends such a rule's calls the periods around their clock, as the engine does.
	calendars map[*algorithms.Compiled]*calendar.Period
}

// fcaller returns how verify calls script on h: a script of built-in algorithms only is
// bounded (algorithms.Script.Bounded) and runs unwatched between its Redis commands; a
// plugin's runs under the instruction limit (scriptSteps), which its runaway calls meet.
func fcaller(h *luahost.Host, script *algorithms.Script) func(ctx context.Context, function string, keys, args []string) (any, error) {
	if script.Bounded() {
		return h.FCallBounded
	}
	return h.FCall
}

// scriptSteps is the most Lua instructions one script call may run in verify and
// simulate. A call past it fails with an error reply, which the errors property reports
// with the request that caused it, and the run goes on. Counted, not timed, so a slow or
// loaded machine never changes a finding. A million instructions is about 5 ms of Lua on
// Redis, past which one script stalls every client of the server (the default work budget,
// 2000 steps, is the same few milliseconds); the built-ins take a few thousand.
const scriptSteps = 1_000_000

// newHost returns the luahost verify and simulate run the engine script on.
func newHost(clock luahost.Clock, commands []string) *luahost.Host {
	return luahost.New(luahost.WithClock(clock), luahost.WithCommands(commands...),
		luahost.WithTimeout(0), luahost.WithInstructionLimit(scriptSteps))
}

// base is the instant traces start at: midnight, so windows that divide a day align with
// the trace.
var base = Epoch.UnixMicro()

func newRig(s *algorithms.Script) (*rig, error) {
	clock := luahost.NewManualClock(Epoch)
	h := newHost(clock, s.Commands())
	if _, err := h.FunctionLoad(s.Library, true); err != nil {
		return nil, fmt.Errorf("verify: loading the engine script: %w", err)
	}
	return &rig{script: s, clock: clock, h: h, base: base, fcall: fcaller(h, s)}, nil
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
	g.calls, g.probeCalls = 0, 0
	return nil
}

// at moves the clock to trace time t (µs).
func (g *rig) at(t int64) { g.clock.Set(time.UnixMicro(g.base + t)) }

// do runs one call at trace time t, told the client's clock reads t+skew, and decodes its
// reply (a refund's reply has no rules).
func (g *rig) do(t, skew int64, c *algorithms.Call) (algorithms.Reply, error) {
	g.at(t)
	c.Now = g.base + t + skew
	// A call the wire refuses counts too: a trace whose every call is refused still
	// spends the budget, and ends.
	g.calls++
	for i := range c.Rules {
		if r := &c.Rules[i]; r.Calendar && r.Compiled != nil && g.calendars[r.Compiled] != nil {
			r.Span = algorithms.SpanAround(*g.calendars[r.Compiled], time.UnixMicro(c.Now))
		}
	}
	argv, err := c.Argv()
	if err != nil {
		return algorithms.Reply{}, err
	}
	v, err := g.fcall(context.Background(), g.script.Function, c.Keys(), argv)
	if g.tick != nil {
		g.tick()
	}
	if err != nil {
		return algorithms.Reply{}, err
	}
	if c.Op == algorithms.OpRefund {
		return algorithms.Reply{Allowed: true}, nil
	}
	return algorithms.DecodeCallReply(c, v)
}

// dump returns key's canonical state ("" when absent), and with further (an algorithm's
// further keys, algorithms.Algorithm.Keys) the state of each of those too, each named
// (see stateOf).
func (g *rig) dump(key string, further ...string) string {
	s, _ := g.h.Dump(key)
	if len(further) == 0 {
		return s
	}
	parts := []string{s}
	for _, name := range further {
		d, _ := g.h.Dump(key + ":" + name)
		parts = append(parts, name+keyNameSep+d)
	}
	return strings.Join(parts, keySep)
}

// emptyState is what dump gives for a rule none of whose keys exists.
func (s *subject) emptyState() string {
	if len(s.alg.Keys) == 0 {
		return ""
	}
	parts := []string{""}
	for _, name := range s.alg.Keys {
		parts = append(parts, name+keyNameSep)
	}
	return strings.Join(parts, keySep)
}

// live reports whether any of the rule's keys exists.
func (s *subject) live(g *rig) bool {
	for _, k := range s.keys() {
		if _, ok := g.h.Dump(k); ok {
			return true
		}
	}
	return false
}

// keys are the Redis keys of s: its key, then each further key its algorithm declares.
func (s *subject) keys() []string {
	out := []string{s.key}
	for _, name := range s.alg.Keys {
		out = append(out, s.key+":"+name)
	}
	return out
}

// subject is what a single-rule trace exercises: one algorithm with fixed parameters on
// one key.
type subject struct {
	alg    *algorithms.Algorithm
	params []int64
	key    string
	spec   spec
	lease  int // the wire slot of the lease parameter, or -1
	// compiled is the rule's compiled form in the plan's script, which its calls name;
	// nil: they write the rule out.
	compiled *algorithms.Compiled
	// slack is the clock skew its calls carry (algorithms.Call.Skew): a client-clock
	// policy's, so that its keys outlive a clock running behind, as in production.
	slack int64
	// fresh is what a peek at an empty key reports as remaining, once a probe has asked.
	fresh      int64
	freshKnown bool
}

// costAtMost returns c, or the algorithm's max_cost when c is above it: verify sends no
// request an algorithm says it does not take (the engine refuses those).
func (s *subject) costAtMost(c int64) int64 {
	if m := s.alg.MaxCost; m > 0 && c > m {
		return m
	}
	return c
}

func newSubject(a *algorithms.Algorithm, params []int64, key string) *subject {
	s := &subject{alg: a, params: params, key: key, spec: specOf(a, params), lease: -1}
	for i := range params {
		if a.IsLeaseSlot(i) {
			s.lease = i
		}
	}
	return s
}

// step is one request of a single-rule trace.
type step struct {
	at   int64 // µs since the trace's start, on the true clock (the server's)
	cost int64
	// release makes the step give back lease `lease` (refund) instead of asking.
	release bool
	lease   int
	// skew is how far the client's clock is from the true clock (µs; client-clock
	// traces): the script is told now = at + skew.
	skew int64
	// probe asks, after the step, what the answer claims: see probes.
	probe bool
}

// result is what one step did.
type result struct {
	allowed bool
	rr      algorithms.RuleResult
	before  string // the key's state before a step that charged nothing (exec)
	after   string // and after it
	probes  probes // when the step asked for them
}

// probes are what the state a step left answered to requests that test its reply, each
// run on a copy of the state and then forgotten: the trace goes on as if nobody asked.
type probes struct {
	done bool
	// fits: a request of cost remaining at the same instant was allowed (remaining > 0).
	fits bool
	// over: a request of cost remaining+1 at the same instant was allowed.
	over bool
	// granted is what a partial admission of remaining+1 (algorithms.OpMost) at the same
	// instant granted.
	granted int64
	// unprobed: remaining+1 is above the algorithm's max_cost, so over and granted were
	// not asked (nor fits, when remaining is above it too).
	unprobed bool
	// late: remaining was right a tick (the declared resolution) before or after the step,
	// not at it; over and fits say what held then.
	late bool
	// fresh is the remaining a peek reports for an empty key.
	fresh int64
	// atReset is the remaining a peek reports once reset-after has passed, and
	// atResetAfter its reset-after: an empty key's peek reports fresh and 0.
	atReset, atResetAfter int64
	// early is the remaining a peek reports just before reset-after (less its declared
	// precision), earlyReset its reset-after, and earlyLive whether the key still existed
	// then; earlyAt is that instant (µs, trace time), 0 when reset-after is too short to
	// probe before it.
	early, earlyReset int64
	earlyLive         bool
	earlyAt           int64
	// liveAfter: the key existed right after the step.
	liveAfter bool
	// lostState: the key expired while its state still meant something (a peek at the
	// last instant it lived did not answer as for a fresh key), before reset-after.
	lostState bool
	expiredAt int64 // the first instant the key was gone (trace µs), when lostState
}

func leaseID(n int) string { return "lease-" + strconv.Itoa(n) }

// rule returns the wire rule of a step.
func (s *subject) rule(st step) algorithms.Rule {
	r := algorithms.Rule{Key: s.key, Algorithm: s.alg, Cost: st.cost, Params: s.params}.Compile(s.compiled)
	if s.lease >= 0 {
		r.Lease = leaseID(st.lease)
	}
	return r
}

// exec runs one step on g.
func (s *subject) exec(g *rig, st step) (result, error) {
	c := algorithms.Call{Op: algorithms.OpCheck, Skew: s.slack, Rules: []algorithms.Rule{s.rule(st)}}
	if st.release {
		c.Op = algorithms.OpRefund
	}
	g.at(st.at)
	// The state before and after a step that charges nothing (a denial, a peek), for
	// atomicity: an allowed charge's and a release's are not kept.
	var res result
	if !st.release {
		res.before = g.dump(s.key, s.alg.Keys...)
	}
	rep, err := g.do(st.at, st.skew, &c)
	if err != nil {
		return result{}, err
	}
	if !st.release && !(rep.Allowed && st.cost > 0) {
		res.after = g.dump(s.key, s.alg.Keys...)
	}
	res.allowed = rep.Allowed
	if !st.release {
		res.rr = rep.Rules[0]
		if st.probe {
			// A probe that raises a script error leaves the step unprobed: the error is
			// the errors property's, found by the trace's own requests, whose
			// counterexample can show them.
			res.probes, _ = s.probe(g, st, res.rr)
		}
	}
	return res, nil
}

// probeLease numbers the leases probes take, apart from the trace's.
const probeLease = 1 << 30

// probe runs the probes of a step that answered rr, each on a copy of the state after the
// step, and leaves g as the step left it. On an error the probes are not done.
func (s *subject) probe(g *rig, st step, rr algorithms.RuleResult) (p probes, err error) {
	snap := g.h.Snapshot()
	calls := g.calls
	defer func() {
		g.h.Restore(snap)
		g.at(st.at)
		g.probeCalls += g.calls - calls
		g.calls = calls
	}()
	defer func() {
		p.done = err == nil
	}()
	p.liveAfter = s.live(g)
	// call runs a probe on the state the step left: op at at, of cost (per unit, for
	// OpMost, which asks for up to units).
	call := func(op algorithms.Op, at, cost, units int64) (algorithms.Reply, error) {
		g.h.Restore(snap)
		q := st
		q.at, q.cost, q.lease, q.probe = at, cost, probeLease+st.lease, false
		c := algorithms.Call{Op: op, Units: units, Skew: s.slack, Rules: []algorithms.Rule{s.rule(q)}}
		return g.do(at, st.skew, &c)
	}
	ask := func(at, cost int64) (algorithms.RuleResult, bool, error) {
		rep, err := call(algorithms.OpCheck, at, cost, 0)
		if err != nil {
			return algorithms.RuleResult{}, false, err
		}
		return rep.Rules[0], rep.Allowed, nil
	}
	// One partial admission of remaining+1 asks both whether that cost passes (granted
	// whole) and whether remaining does (granted that), as AllowAtMost would; a grant of
	// less leaves remaining to a request of its own. An algorithm with a max_cost is asked
	// no more than it takes: what it cannot be asked is not probed.
	if m := s.alg.MaxCost; m > 0 && rr.Remaining >= m {
		if rr.Remaining == m {
			if _, p.fits, err = ask(st.at, m); err != nil {
				return p, err
			}
		}
		p.unprobed = true
	} else if rr.Remaining >= 0 && rr.Remaining < algorithms.MaxInt {
		rep, err := call(algorithms.OpMost, st.at, 1, rr.Remaining+1)
		if err != nil {
			return p, err
		}
		p.granted = rep.Granted
		p.over = rep.Granted == rr.Remaining+1
		p.fits = p.over || rep.Granted == rr.Remaining
		if !p.fits && rr.Remaining > 0 {
			if _, p.fits, err = ask(st.at, rr.Remaining); err != nil {
				return p, err
			}
		}
	}
	// A declared resolution lets remaining be a tick off: the truth a tick before (one unit
	// more passes now, as a window the algorithm's clock has just ended allows, but not a
	// tick earlier) or a tick after (remaining does not fit now, but does a tick later).
	if tick := s.spec.res; tick > 0 && (p.over || rr.Remaining > 0 && !p.fits) {
		if p.over && st.at >= tick {
			if _, over, err := ask(st.at-tick, rr.Remaining+1); err != nil {
				return p, err
			} else if !over {
				p.over, p.late = false, true
			}
		}
		if rr.Remaining > 0 && !p.fits {
			if _, fits, err := ask(st.at+tick, rr.Remaining); err != nil {
				return p, err
			} else if fits {
				p.fits, p.late = true, true
			}
		}
	}
	// An empty key's peek, on a key nothing else uses, asked once per subject.
	if !s.freshKnown {
		g.h.Restore(snap)
		fresh := *s
		fresh.key = s.key + ":fresh"
		q := st
		q.cost, q.lease = 0, probeLease
		c := algorithms.Call{Op: algorithms.OpCheck, Skew: s.slack, Rules: []algorithms.Rule{fresh.rule(q)}}
		rep, err := g.do(st.at, st.skew, &c)
		if err != nil {
			return p, err
		}
		s.fresh, s.freshKnown = rep.Rules[0].Remaining, true
	}
	p.fresh = s.fresh
	if rr.ResetAfter >= 0 && rr.ResetAfter < maxProbeAhead {
		// A declared resolution lets reset-after be a tick early or late.
		r, _, err := ask(st.at+rr.ResetAfter+s.spec.res, 0)
		if err != nil {
			return p, err
		}
		p.atReset, p.atResetAfter = r.Remaining, r.ResetAfter
		if u := rr.ResetAfter - s.spec.prec.ResetAfter - s.spec.res - 1; u > 0 {
			p.earlyAt = st.at + u
			g.h.Restore(snap)
			g.at(p.earlyAt)
			p.earlyLive = s.live(g)
			r, _, err := ask(p.earlyAt, 0)
			if err != nil {
				return p, err
			}
			p.early, p.earlyReset = r.Remaining, r.ResetAfter
			if !p.earlyLive {
				if p.lostState, p.expiredAt, err = s.expiredMeaningful(g, snap, st, p.fresh, ask); err != nil {
					return p, err
				}
			}
		}
	}
	return p, nil
}

// expiredMeaningful reports whether one of the rule's keys, as snap holds them, expires
// while a peek at the last instant it lives does not answer as for a fresh key, and when
// the first such is gone.
func (s *subject) expiredMeaningful(g *rig, snap *luahost.Snapshot, st step, fresh int64, ask func(at, cost int64) (algorithms.RuleResult, bool, error)) (bool, int64, error) {
	for _, key := range s.keys() {
		g.h.Restore(snap)
		g.at(st.at)
		v, err := g.h.Do(context.Background(), "PEXPIRETIME", key)
		ms, ok := v.(int64)
		if err != nil {
			return false, 0, err
		}
		if !ok || ms < 0 {
			continue
		}
		// Redis keeps a key while now <= its expire time in ms: it lives up to ms·1000+999 µs.
		last := ms*1000 + 999 - g.base
		if last < st.at {
			continue
		}
		r, _, err := ask(last, 0)
		if err != nil {
			return false, 0, err
		}
		if r.Remaining != fresh || r.ResetAfter > 0 {
			return true, last + 1, nil
		}
	}
	return false, 0, nil
}

// maxProbeAhead is the furthest ahead a probe looks (µs): a reset-after beyond it (a
// century) is not probed.
const maxProbeAhead = 100 * 365 * 86400 * 1_000_000

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
