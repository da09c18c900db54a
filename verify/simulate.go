package verify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
)

// Epoch is the virtual instant a simulation starts at when it replays no trace with
// absolute timestamps: midnight UTC, so windows of any length that divides a day start
// with the scenario.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Option configures Simulate and Check; each ignores the options that do not concern it.
type Option func(*options)

type options struct {
	seed     int64
	seedSet  bool
	trace    *Trace
	progress func(done, total time.Duration)
	budget   int
	duration time.Duration
	clients  int
	observe  func(at time.Time, source string, attrs map[string]string, d *engine.Decision)
	// workers is Check's and Simulate's (WithWorkers), checkProgress Check's.
	workers       int
	checkProgress func(CheckProgress)
}

// WithSeed replaces the scenario's seed (Simulate) or DefaultSeed (Check).
func WithSeed(seed int64) Option { return func(o *options) { o.seed, o.seedSet = seed, true } }

// WithTrace makes Simulate replay t instead of the scenario's traffic.
func WithTrace(t *Trace) Option { return func(o *options) { o.trace = t } }

// WithProgress makes Simulate call f now and then with the virtual time simulated so far
// and the total; f runs on Simulate's goroutine.
func WithProgress(f func(done, total time.Duration)) Option {
	return func(o *options) { o.progress = f }
}

// WithObserver makes Simulate call f with every decision of a request, in the order they
// are made (probes and releases excluded). f must not modify d or attrs.
func WithObserver(f func(at time.Time, source string, attrs map[string]string, d *engine.Decision)) Option {
	return func(o *options) { o.observe = f }
}

// Simulate runs a scenario's traffic through the real engine on luahost under a virtual
// clock and reports what happened. The engine script runs unchanged: TIME answers the
// virtual clock, TTLs expire by it, client-clock policies read it. Only the scenario's
// policy (and the configuration's plugins) is in the plan, so other policies in the same
// files do not interfere.
//
// Arrivals are generated per client and merged in time order (see dsl.Traffic for the
// patterns); random choices draw from the scenario's seed, so the same configuration and
// seed give the same report, byte for byte. A request with a hold releases what it holds
// (concurrency leases) hold after it was allowed. Every denial with a finite retry-after
// is probed at the advised instant with a peek (which charges nothing), to measure whether
// retrying then would have passed; the probes run on other goroutines (WithWorkers), each
// on a copy of the keys it reads, and count as they would in line.
//
// With WithTrace the trace's records are the traffic, each counted under its source; the
// scenario, when not nil, selects the policy and supplies the expectations. With a trace
// and a nil scenario, every policy of cfg applies, as in production.
//
// A scenario's faults (dsl.Fault) make the simulated Redis fail on the virtual clock, and
// the engine runs as the scenario's engine block configures it (dsl.EngineSettings): its
// decision deadline, circuit breaker and deny cache, with each policy's on_error deciding
// while Redis fails. The Report then says, per fault and traffic source, how requests were
// decided (Decisions), how long after each fault requests were still decided without
// Redis, and what the calls a stall held back did when the server ran them late
// (LateCalls). Probes of retry-after read Redis's state directly and do not count as
// traffic.
//
// Simulate fails on a request the policy cannot evaluate, on a script error, and on any
// backend failure outside the scenario's faults (without faults, a simulation never
// degrades to an on_error mode). The error names the request (its traffic, client and
// attributes) and gives a script error at the plugin's (or algorithm's) own file and
// line; it wraps the engine's error (engine.ErrScript for a script error).
func Simulate(cfg *dsl.Config, s *dsl.Scenario, opts ...Option) (*Report, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if s == nil && o.trace == nil {
		return nil, errors.New("verify: Simulate needs a scenario or a trace")
	}
	if o.trace != nil && len(o.trace.Arrivals) == 0 {
		return nil, errors.New("verify: the trace has no requests")
	}
	sub := cfg
	r := &Report{allowedAt: map[string][]int64{}, Expect: []ExpectResult{}}
	if s != nil {
		p, ok := cfg.Policy(s.Policy)
		if !ok {
			return nil, fmt.Errorf("verify: scenario %q: no policy %q", s.Name, s.Policy)
		}
		sub = &dsl.Config{Policies: []*dsl.Policy{p}, Plugins: cfg.Plugins, Files: cfg.Files}
		r.Scenario, r.Seed = s.Name, s.Seed
	}
	if o.seedSet {
		r.Seed = o.seed
	}
	for _, p := range sub.Policies {
		r.Policies = append(r.Policies, p.Name)
	}
	plan, err := engine.Compile(sub)
	if err != nil {
		return nil, err
	}
	sm, err := newSim(plan, sub, r)
	if err != nil {
		return nil, err
	}
	sm.observe = o.observe
	if s != nil {
		sm.policy = sub.Policies[0]
	}
	if o.trace != nil {
		err = sm.addTrace(o.trace)
	} else {
		err = sm.addScenario(s)
	}
	if err != nil {
		return nil, err
	}
	sm.startEngine(plan, s)
	sm.startProbes(plan, s, o.workerCount()-1)
	if err := sm.run(o.progress); err != nil {
		return nil, err
	}
	sm.finish()
	if s != nil {
		for _, x := range s.Expect {
			r.Expect = append(r.Expect, checkExpect(cfg, x, r))
		}
	}
	return r, nil
}

// checkExpect evaluates one expectation against the report.
func checkExpect(cfg *dsl.Config, x *dsl.Expect, r *Report) ExpectResult {
	res := ExpectResult{Name: x.Name, Expr: sourceText(cfg, x.Expr.Range())}
	ok, err := x.Check(r.Outcome())
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.Pass = ok
	return res
}

// sourceText returns the source text of rg on one line, or "" when the file is not at
// hand.
func sourceText(cfg *dsl.Config, rg hcl.Range) string {
	f := cfg.Files[rg.Filename]
	if f == nil || rg.Start.Byte < 0 || rg.End.Byte > len(f.Bytes) || rg.Start.Byte > rg.End.Byte {
		return ""
	}
	return strings.Join(strings.Fields(string(f.Bytes[rg.Start.Byte:rg.End.Byte])), " ")
}

// sim is one simulation run.
type sim struct {
	r      *Report
	calls  atomic.Int64 // the instances' calls to Redis, when rules are leased
	clock  *luahost.ManualClock
	host   *luahost.Host
	engs   []*engine.Engine // the instances of the service, requests going to them in turn
	turn   int              // the instance the next request goes to
	peek   *engine.Engine   // probes: the engine on Redis itself, without faults
	probes *probeWorkers    // nil: probes run in line
	faults *faultBackend    // nil when the scenario declares no fault
	capped bool             // the scenario gives the simulated Redis a maxmemory
	origin int64            // µs since the epoch of virtual time 0
	end    int64            // µs: the duration, for progress and the timeline
	sched  scheduler

	sources []*source
	traffic map[string]*trafficState
	tlist   []*trafficState
	rules   map[ruleID]*ruleState
	leases  bool // some rule holds leases: allowed requests must be released
	bucket  int64
	observe func(at time.Time, source string, attrs map[string]string, d *engine.Decision)
	policy  *dsl.Policy        // the scenario's
	script  *algorithms.Script // the engine script, its lines mapped to their files
	// overridden holds the rule keys a scenario's override changed: their figures are not
	// the rule's, so the rules' worst keys leave them out.
	overridden map[string]bool
}

// source is one client of a traffic block (or the replayed trace).
type source struct {
	tr     *trafficState
	t      *dsl.Traffic // nil for a trace
	client int
	g      gen
	attrs  engine.Attrs // cached rendering of the client's request
	trace  []Arrival
	next   int // trace: the next record
	hold   time.Duration
	// settled counts the requests that settled (Traffic.Actual): the next takes the
	// next true cost, in turn.
	settled int
}

type ruleID struct{ policy, rule string }

type trafficState struct {
	rep   *TrafficReport
	times []int64 // allowed instants, for MaxAllowedIn
	tl    *Series
	keys  map[*ruleState]*KeySeries // per rule: its busiest key at this source's requests
}

// count samples, at one of the source's requests in bucket b, the key kt of rule rs: the
// bucket keeps the key whose count is the largest share of its limit.
func (ts *trafficState) count(rs *ruleState, b int64, kt *keyTrack) {
	if b < 0 || int(b) >= len(ts.tl.Allowed) || kt.limit <= 0 {
		return
	}
	ks := ts.keys[rs]
	if ks == nil {
		n := len(ts.tl.Allowed)
		ks = &KeySeries{Policy: rs.rep.Policy, Rule: rs.rep.Rule, Counted: make([]int64, n), Limit: make([]int64, n), Bound: make([]int64, n)}
		if ts.keys == nil {
			ts.keys = map[*ruleState]*KeySeries{}
		}
		ts.keys[rs] = ks
	}
	if ks.Limit[b] == 0 || kt.sum*ks.Limit[b] > ks.Counted[b]*kt.limit {
		bound := kt.limit // a calendar period counts exactly
		if rs.rule.Calendar == nil {
			bound = max(rs.bound(kt.limit), kt.limit)
		}
		ks.Counted[b], ks.Limit[b], ks.Bound[b] = kt.sum, kt.limit, bound
	}
}

type ruleState struct {
	rep   *RuleReport
	rule  *dsl.Rule
	keys  map[string]*keyTrack
	bound func(limit int64) int64 // what the algorithm allows in a window by design
	lease bool
	seen  map[[2]int64]bool // the (limit, window) pairs whose terms rep.Terms has
}

// terms adds to the rule's Terms the limit request attrs was checked against, when its
// limit and window are new: the rule's parameters are evaluated only then.
func (rs *ruleState) terms(rr *engine.RuleResult, attrs engine.Attrs) {
	k := [2]int64{rr.Limit, int64(rr.Window)}
	if rs.seen[k] {
		return
	}
	if rs.seen == nil {
		rs.seen = map[[2]int64]bool{}
	}
	rs.seen[k] = true
	w, err := rs.rule.Wire(attrs)
	if err != nil {
		return
	}
	if t := rs.rule.Describe(w); !slices.Contains(rs.rep.Terms, t) {
		rs.rep.Terms = append(rs.rep.Terms, t)
	}
}

// pendingReq is a request in flight: released after its hold, probed after its denial.
type pendingReq struct {
	tr    *trafficState
	attrs engine.Attrs
	n     int64
	d     *engine.Decision
	eng   *engine.Engine // release: the instance that decided d
	// res and actual: a reservation (Traffic.Actual) that settles with the true cost
	// actual when the request finishes, rather than releasing.
	res    *engine.Reservation
	actual int64
	rule   *ruleState // probe: the deciding rule
	keys   []string   // probe beside the run (probeWorkers): the keys the denial read
}

func newSim(plan *engine.Plan, cfg *dsl.Config, r *Report) (*sim, error) {
	s := &sim{r: r, traffic: map[string]*trafficState{}, rules: map[ruleID]*ruleState{}}
	script := locatedScript(plan.Script(), cfg)
	s.script = script
	s.clock = luahost.NewManualClock(Epoch)
	host := newHost(s.clock, script.Commands())
	if _, err := host.FunctionLoad(script.Library, true); err != nil { // the form engine.Local runs
		return nil, fmt.Errorf("verify: loading the engine script: %w", err)
	}
	s.host = host
	for _, p := range cfg.Policies {
		for _, ru := range p.Rules {
			rs := &ruleState{
				rep:   &RuleReport{Policy: p.Name, Rule: ru.Name, Algorithm: ru.Algorithm.Name, Shadow: ru.Shadow},
				rule:  ru,
				keys:  map[string]*keyTrack{},
				bound: designBound(ru.Algorithm),
				lease: ru.Algorithm.HasLease(),
			}
			s.leases = s.leases || rs.lease
			s.rules[ruleID{p.Name, ru.Name}] = rs
			r.Rules = append(r.Rules, rs.rep)
		}
	}
	return s, nil
}

// startEngine creates the engine the run decides with: on luahost directly, or, when sc
// declares faults, through a faultBackend with sc's deadline and breaker; with sc's deny
// cache either way.
func (s *sim) startEngine(plan *engine.Plan, sc *dsl.Scenario) {
	settings := engineSettings(sc)
	if settings.MaxMemory > 0 {
		// The simulated Redis with a maxmemory: a host of its own, the script loaded.
		policy, _ := luahost.ParseEvictionPolicy(settings.Eviction) // dsl validated it
		host := luahost.New(luahost.WithClock(s.clock), luahost.WithCommands(s.script.Commands()...),
			luahost.WithTimeout(0), luahost.WithInstructionLimit(scriptSteps), luahost.WithMaxMemory(settings.MaxMemory, policy))
		if _, err := host.FunctionLoad(s.script.Library, true); err == nil {
			s.host = host
		}
		s.capped = true
	}
	redis := engine.NewLocal(s.host)
	// A request that waits (a traffic's max_delay) goes on at its slot, which record
	// counts; the virtual clock does not wait for it.
	opts := []engine.Option{engine.WithClock(s.clock.Now), engine.WithSleep(func(context.Context, time.Duration) error { return nil })}
	if settings.DenyCache > 0 {
		opts = append(opts, engine.WithDenyCache(settings.DenyCache))
	}
	if plan.Leased() {
		// The instances' calls, beside what their leases decided in process; peeks go
		// through an engine of their own, whose calls are the simulation's.
		s.r.Leases = &LeaseReport{}
		opts = append(opts, engine.WithHooks(engine.Hooks{Called: func(engine.CallStats) { s.calls.Add(1) }}))
	}
	if sc == nil || len(sc.Faults) == 0 {
		direct := append(opts, engine.WithTimeout(0))
		s.newInstances(settings, func() *engine.Engine { return engine.New(redis, plan, direct...) })
		s.peek = s.engs[0]
		if plan.Leased() {
			s.peek = engine.New(redis, plan, engine.WithClock(s.clock.Now), engine.WithTimeout(0))
		}
		if settings.DenyCache > 0 || s.capped || settings.Instances > 1 {
			s.r.Engine = engineReport(settings)
		}
		return
	}
	s.faults = newFaultBackend(redis, s.host, s.clock, s.origin, sc.Faults)
	opts = append(opts, engine.WithTimeout(settings.Deadline), engine.WithBreaker(settings.BreakerFailures, settings.BreakerCooldown))
	s.newInstances(settings, func() *engine.Engine { return engine.New(s.faults, plan, opts...) })
	s.peek = engine.New(redis, plan, engine.WithClock(s.clock.Now), engine.WithTimeout(0))
	s.r.Engine = engineReport(settings)
	for _, f := range s.faults.faults {
		if f.f.For > 0 {
			for _, ts := range s.tlist {
				f.traffic(ts.rep.Name)
			}
		}
		s.r.Faults = append(s.r.Faults, f.rep)
	}
}

// newInstances creates the run's instances of the service (EngineSettings.Instances,
// at least one), each an engine of its own made by newEngine.
func (s *sim) newInstances(settings dsl.EngineSettings, newEngine func() *engine.Engine) {
	for range max(settings.Instances, 1) {
		s.engs = append(s.engs, newEngine())
	}
}

// engineSettings returns sc's engine block, or the defaults for a trace without a scenario.
func engineSettings(sc *dsl.Scenario) dsl.EngineSettings {
	if sc == nil {
		return dsl.DefaultEngine
	}
	return sc.Engine
}

func engineReport(e dsl.EngineSettings) *EngineReport {
	r := &EngineReport{Deadline: e.Deadline, BreakerFailures: e.BreakerFailures, BreakerCooldown: e.BreakerCooldown, DenyCache: e.DenyCache}
	if e.Instances > 1 {
		r.Instances = e.Instances
	}
	if e.MaxMemory > 0 {
		r.MaxMemory, r.Eviction = e.MaxMemory, e.Eviction
	}
	return r
}

func (s *sim) trafficFor(name, pattern string, clients int) *trafficState {
	if ts := s.traffic[name]; ts != nil {
		return ts
	}
	ts := &trafficState{rep: &TrafficReport{Name: name, Pattern: pattern, Clients: clients, Units: 1, DeniedBy: []RuleCount{}}}
	s.traffic[name] = ts
	s.tlist = append(s.tlist, ts)
	s.r.Traffic = append(s.r.Traffic, ts.rep)
	return ts
}

// maxCachedClients bounds the clients whose rendered requests are kept between arrivals.
const maxCachedClients = 4096

func (s *sim) addScenario(sc *dsl.Scenario) error {
	s.origin = Epoch.UnixMicro()
	if !sc.StartTime.IsZero() {
		s.clock.Set(sc.StartTime)
		s.origin = sc.StartTime.UnixMicro()
		s.r.Start = sc.StartTime
	}
	s.end = s.origin + sc.Duration.Microseconds()
	s.r.Duration = sc.Duration
	for _, c := range sc.Changes {
		s.sched.push(&event{at: s.origin + c.At.Microseconds(), kind: evChange, chg: c})
		kind := "override"
		if c.Rule == nil {
			kind = "list"
		}
		s.r.Changes = append(s.r.Changes, ChangeReport{At: c.At, Kind: kind, For: c.For, Change: c.String()})
	}
	for _, t := range sc.Traffic {
		ts := s.trafficFor(t.Name, t.Pattern, t.Clients)
		ts.rep.Units, ts.rep.AtMost = t.Units, t.AtMost
		for c := range t.Clients {
			src := &source{tr: ts, t: t, client: c, g: newGen(t, s.policy, c, s.origin, s.r.Seed), hold: t.Hold}
			s.sources = append(s.sources, src)
			s.schedule(len(s.sources) - 1)
		}
	}
	return nil
}

func (s *sim) addTrace(tr *Trace) error {
	start := Epoch
	if !tr.Start.IsZero() {
		start = tr.Start
	}
	s.clock.Set(start)
	s.origin = start.UnixMicro()
	last := tr.Arrivals[len(tr.Arrivals)-1].At
	s.r.Duration = last
	s.end = s.origin + last.Microseconds() + 1
	s.r.Trace = true
	for _, a := range tr.Arrivals {
		s.trafficFor(a.Source, "", 0)
	}
	s.sources = append(s.sources, &source{trace: tr.Arrivals})
	s.schedule(0)
	return nil
}

// schedule queues source i's next arrival, if any.
func (s *sim) schedule(i int) {
	src := s.sources[i]
	if src.trace != nil {
		if src.next < len(src.trace) {
			s.sched.push(&event{at: s.origin + src.trace[src.next].At.Microseconds(), kind: evArrival, src: i, left: 1})
		}
		return
	}
	if at, n, ok := src.g.next(); ok {
		s.sched.push(&event{at: at, kind: evArrival, src: i, left: n})
	}
}

func (s *sim) run(progress func(done, total time.Duration)) error {
	ctx := context.Background()
	s.setupTimeline()
	total := time.Duration(s.end-s.origin) * time.Microsecond
	for steps := 0; !s.sched.empty(); steps++ {
		ev := s.sched.pop()
		if s.faults != nil {
			s.faults.settle(time.UnixMicro(ev.at))
		}
		s.clock.Set(time.UnixMicro(ev.at))
		if progress != nil && steps%8192 == 0 {
			progress(min(time.Duration(ev.at-s.origin)*time.Microsecond, total), total)
		}
		var err error
		switch ev.kind {
		case evRelease:
			if ev.req.res != nil {
				err = s.settle(ctx, ev.req)
				break
			}
			s.inflight(ev.req.d, ev.req.attrs, ev.req.n, -1)
			err = s.release(ctx, ev.req.eng, ev.req.d)
		case evChange:
			err = s.change(ctx, ev.chg)
		case evProbe:
			err = s.probe(ctx, ev.at, ev.req)
		case evArrival:
			err = s.arrive(ctx, ev)
		}
		if err != nil {
			if s.probes != nil {
				// The probes queued came before this event: the first of them to fail
				// is the run's error.
				if perr := s.probes.finish(s); perr != nil {
					return perr
				}
			}
			return fmt.Errorf("verify: at %s: %w", time.Duration(ev.at-s.origin)*time.Microsecond, err)
		}
	}
	if s.probes != nil {
		if err := s.probes.finish(s); err != nil {
			return err
		}
	}
	if s.faults != nil {
		// A stall that lasts to the end: the server runs what it held.
		s.faults.settle(time.UnixMicro(max(s.end, s.clock.Now().UnixMicro())))
	}
	if s.capped && s.r.Engine != nil {
		s.r.Engine.Evicted, s.r.Engine.Memory = s.host.Evicted(), s.host.MemoryUsage()
	}
	if progress != nil {
		progress(total, total)
	}
	return nil
}

// settle settles a reservation with its true cost and counts it. While Redis fails a
// settlement may fail (its estimate then stands, as in production), which is not the
// simulation's error and is not counted as settled.
func (s *sim) settle(ctx context.Context, req *pendingReq) error {
	if err := req.res.Settle(ctx, req.actual); err != nil {
		if s.faults == nil || errors.Is(err, engine.ErrRequest) {
			return fmt.Errorf("traffic %q: settling a reservation of %d units at %d: %w", req.tr.rep.Name, req.n, req.actual, err)
		}
		return nil // not settled: its estimate stands
	}
	tr := req.tr.rep
	tr.Settled++
	tr.SettledCost += req.actual
	if diff := req.actual - req.n; diff > 0 {
		tr.Owed += diff
	} else {
		tr.Returned -= diff
	}
	return nil
}

// release gives back what an allowed request holds. While Redis fails the release fails
// too, and the lease expires by its TTL, as it would in production.
func (s *sim) release(ctx context.Context, eng *engine.Engine, d *engine.Decision) error {
	err := eng.Release(ctx, d)
	if err != nil && s.faults != nil && !errors.Is(err, engine.ErrRequest) {
		return nil
	}
	return err
}

func (s *sim) arrive(ctx context.Context, ev *event) error {
	src := s.sources[ev.src]
	var attrs engine.Attrs
	n := int64(1)
	hold := src.hold
	ts := src.tr
	atMost := false
	var maxDelay time.Duration
	var actual []int64
	if src.trace != nil {
		a := &src.trace[src.next]
		attrs, n, hold, ts = a.Attrs, a.N, a.Hold, s.traffic[a.Source]
		src.next++
		s.schedule(ev.src)
	} else {
		n, atMost, maxDelay, actual = src.t.Units, src.t.AtMost, src.t.MaxDelay, src.t.Actual
		attrs = src.attrs
		if attrs == nil {
			m, err := src.t.Render(src.client)
			if err != nil {
				return err
			}
			attrs = m
			if src.t.Clients <= maxCachedClients {
				src.attrs = attrs
			}
		}
		if ev.left > 1 {
			ev.left--
			s.sched.push(ev)
		} else {
			s.schedule(ev.src)
		}
	}
	eng := s.engs[s.turn]
	s.turn = (s.turn + 1) % len(s.engs)
	var d *engine.Decision
	var res *engine.Reservation
	var err error
	switch {
	case actual != nil:
		if res, err = eng.Reserve(ctx, attrs, n); err == nil {
			d = res.Decision
		}
	case atMost:
		d, err = eng.AllowAtMost(ctx, attrs, n)
	case maxDelay > 0:
		// The engines' sleep returns at once: the request goes on at ev.at + d.Delay,
		// where record counts it.
		d, err = eng.Wait(ctx, attrs, maxDelay)
	default:
		d, err = eng.AllowN(ctx, attrs, n)
	}
	if err != nil {
		// A fault can make the engine fail a request (a server error reply it cannot tell
		// from a script bug): count it. Anywhere else an error is the simulation's.
		if s.faults == nil || s.faults.active(ev.at) == nil || errors.Is(err, engine.ErrRequest) {
			return s.requestError(src, ts, attrs, n, err)
		}
		s.recordError(ts, ev.at)
		return nil
	}
	if s.faults == nil {
		// The one backend failure a scenario without faults may see is its own maxmemory
		// under noeviction (Redis refuses the write; the breaker may open on it), and then
		// on_error decides, as in production; a script error is still the simulation's.
		if err := degraded(d); err != nil && !(s.capped && engine.Classify(d.Err) == engine.ClassBackend) {
			return s.requestError(src, ts, attrs, n, err)
		}
	}
	if atMost {
		// What the request holds and is charged is its grant; a denial's retry-after is
		// the wait for one unit.
		n = max(d.Granted, 1)
	}
	s.record(ts, ev.at, attrs, n, d)
	if s.observe != nil {
		s.observe(time.UnixMicro(ev.at), ts.rep.Name, attrs, d)
	}
	if res != nil && d.Allowed {
		req := &pendingReq{tr: ts, attrs: attrs, n: n, d: d, eng: eng, res: res, actual: actual[src.settled%len(actual)]}
		src.settled++
		if hold <= 0 {
			return s.settle(ctx, req)
		}
		s.sched.push(&event{at: ev.at + hold.Microseconds(), kind: evRelease, req: req})
		return nil
	}
	if d.Allowed && s.leases {
		s.inflight(d, attrs, n, +1)
		if hold <= 0 {
			s.inflight(d, attrs, n, -1)
			return s.release(ctx, eng, d)
		}
		req := &pendingReq{tr: ts, attrs: attrs, n: n, d: d, eng: eng}
		s.sched.push(&event{at: ev.at + hold.Microseconds(), kind: evRelease, req: req})
	}
	return nil
}

// requestError is the error of a request the simulation cannot go on from: which
// traffic sent it, with what attributes, and the error with the engine script's lines
// mapped to their files (a plugin's Lua runtime error at the plugin's file:line).
func (s *sim) requestError(src *source, ts *trafficState, attrs engine.Attrs, n int64, err error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "traffic %q", ts.rep.Name)
	if src.trace == nil {
		fmt.Fprintf(&b, " client %d", src.client+1)
	}
	b.WriteString(" request {")
	for i, k := range slices.Sorted(maps.Keys(attrs)) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = %q", k, attrs[k])
	}
	b.WriteString("}")
	if n != 1 {
		fmt.Fprintf(&b, " × %d", n)
	}
	return &requestErr{what: b.String(), msg: scriptSuffix.ReplaceAllString(s.script.Locate(err.Error()), ""), err: err}
}

// requestErr is an error of one simulated request; it wraps the engine's.
type requestErr struct {
	what, msg string
	err       error
}

func (e *requestErr) Error() string { return e.what + ": " + e.msg }
func (e *requestErr) Unwrap() error { return e.err }

// degraded turns a decision the backend did not make into an error: a simulation must
// never quietly fall back to an on_error mode.
func degraded(d *engine.Decision) error {
	switch d.Source {
	case engine.FromBackend, engine.FromNoRules, engine.FromCache, engine.FromLease:
		return nil
	}
	if d.Err != nil {
		return fmt.Errorf("the backend failed: %w", d.Err)
	}
	return errors.New("the backend failed")
}

// cost returns what rule charges for a request of n units.
func (rs *ruleState) cost(attrs engine.Attrs, n int64) int64 {
	if rs.rule.Cost == nil {
		return n
	}
	c, err := rs.rule.Cost.Int(attrs)
	if err != nil {
		return n
	}
	return c * n
}

func (s *sim) rule(rr *engine.RuleResult) *ruleState {
	return s.rules[ruleID{rr.Policy, rr.Rule}]
}

// recordError accounts a request the engine failed during a fault: it did not get through.
func (s *sim) recordError(ts *trafficState, at int64) {
	s.tally(ts, at, nil)
	ts.rep.Requests++
	ts.rep.Denied++
	s.r.Requests++
	if b := (at - s.origin) / s.bucket; b >= 0 && int(b) < len(ts.tl.Denied) {
		ts.tl.Denied[b]++
	}
}

// leasedIn reports whether a rule of decision d is served from quota leases.
func (s *sim) leasedIn(d *engine.Decision) bool {
	for i := range d.Rules {
		if rs := s.rule(&d.Rules[i]); rs != nil && rs.rule.LeaseSize > 0 {
			return true
		}
	}
	return false
}

// tally counts how a request was decided (d nil: the engine failed it), overall and in the
// fault in force.
func (s *sim) tally(ts *trafficState, at int64, d *engine.Decision) {
	ts.rep.Decided.count(d)
	if s.faults == nil {
		return
	}
	if f := s.faults.active(at); f != nil {
		ft := f.traffic(ts.rep.Name)
		ft.Requests++
		if d != nil && d.Allowed {
			ft.Allowed++
		}
		ft.Decided.count(d)
		return
	}
	if d != nil && d.Err != nil {
		if f := s.faults.lastEnded(at); f != nil {
			ft := f.traffic(ts.rep.Name)
			ft.DegradedAfter++
			ft.Recovery = max(ft.Recovery, time.Duration(at-f.end)*time.Microsecond)
		}
	}
}

// record accounts one decision. Rules count only decisions a script made (on Redis, on
// the local fallback, or remembered by the deny cache); the worst key and the charges
// only Redis's, whose state they describe.
func (s *sim) record(ts *trafficState, at int64, attrs engine.Attrs, n int64, d *engine.Decision) {
	tr := ts.rep
	tr.Requests++
	s.r.Requests++
	s.tally(ts, at, d)
	if d.Allowed && d.Delay > 0 {
		// It waited for its turn: it goes on, and counts, when the wait ends.
		tr.Waited++
		tr.MaxWait = max(tr.MaxWait, d.Delay)
		tr.TotalWait += d.Delay
		at += d.Delay.Microseconds()
	}
	b := (at - s.origin) / s.bucket
	if d.Source == engine.FromNoRules {
		tr.Unlimited++
	}
	if l := s.r.Leases; l != nil && d.Source != engine.FromNoRules {
		l.Decisions++
		if d.Source == engine.FromLease {
			l.InProcess++
		}
	}
	if d.Allowed {
		tr.Allowed++
		tr.Granted += n
		s.r.Allowed++
		ts.times = append(ts.times, at)
		if b >= 0 && int(b) < len(ts.tl.Allowed) {
			ts.tl.Allowed[b]++
		}
	} else {
		tr.Denied++
		if b >= 0 && int(b) < len(ts.tl.Denied) {
			ts.tl.Denied[b]++
		}
	}
	if d.Source == engine.FromFailOpen || d.Source == engine.FromFailDeny {
		return // no rule was checked
	}
	// A decision from leases spent units Redis counted when they were leased.
	onRedis := d.Source == engine.FromBackend || d.Source == engine.FromLease
	for i := range d.Rules {
		rr := &d.Rules[i]
		rs := s.rule(rr)
		if rs == nil {
			continue
		}
		rep := rs.rep
		rep.Checked++
		rep.Limit = max(rep.Limit, rr.Limit)
		rep.Window = max(rep.Window, rr.Window)
		rs.terms(rr, attrs)
		if !rr.Allowed {
			rep.WouldDeny++
		}
		kt := rs.keys[rr.Key]
		if kt == nil {
			kt = &keyTrack{}
			rs.keys[rr.Key] = kt
			rep.Keys++
		}
		kt.limit = rr.Limit
		if i == d.Decider {
			rep.Denied++
			tr.addDeniedBy(rr.Policy, rr.Rule)
			switch {
			case rr.RetryAfter == engine.Never || d.RetryAfter == engine.Never:
				tr.Retry.Never++
				rep.Retry.Never++
			case onRedis && s.denyListed(rs.rule, rr.Key):
				// A deny list's retry-after is a floor it states, not a promise to pass.
				tr.Retry.Listed++
				rep.Retry.Listed++
			case d.RetryAfter > 0 && s.leasedIn(d):
				// The advice of a rule served from leases is its instance's slice's (when
				// the Redis count runs out, the window's end or the hold's), not Redis's
				// state alone: it is not probed.
			case d.RetryAfter > 0 && d.Source != engine.FromLocal:
				// The advice of the local fallback is about its own state, not Redis's.
				tr.Retry.Advised++
				rep.Retry.Advised++
				req := &pendingReq{tr: ts, attrs: attrs, n: n, rule: rs}
				if s.probes != nil {
					req.keys = make([]string, 0, len(d.Rules))
					for j := range d.Rules {
						req.keys = append(req.keys, d.Rules[j].Key)
						if rs := s.rule(&d.Rules[j]); rs != nil {
							req.keys = appendFurtherKeys(req.keys, rs.rule, d.Rules[j].Key)
						}
					}
				}
				s.sched.push(&event{at: at + d.RetryAfter.Microseconds(), kind: evProbe, req: req})
			}
		}
		if !onRedis {
			continue
		}
		if rr.Window > 0 && !rs.lease {
			var c int64
			if d.Allowed {
				c = rs.cost(attrs, n)
				rep.Charged += c
			}
			// A key an override changed is charted against the limit it has now, and left
			// out of the rule's worst key: its figures are the override's.
			peak := c > 0 && !s.overridden[rr.Key]
			if cal := rs.rule.Calendar; cal != nil {
				// A calendar rule's periods count on their own: its worst key is the most
				// one period allowed.
				start, end := cal.Bounds(time.UnixMicro(at))
				if start.UnixMicro() != kt.period {
					kt.period, kt.sum = start.UnixMicro(), 0
				}
				kt.sum += c
				if peak {
					was := rs.rep.Worst
					rs.peak(rr.Key, kt.sum, kt.limit, at-s.origin, PeakPeriod)
					if w := rs.rep.Worst; w != was {
						w.Bound, w.Period = kt.limit, fmt.Sprintf("the %s from %s to %s", cal.Unit, start.In(cal.Loc).Format(time.DateTime+" MST"), end.In(cal.Loc).Format(time.DateTime+" MST"))
					}
				}
			} else {
				kt.add(at, c, rr.Window.Microseconds())
				if peak {
					rs.peak(rr.Key, kt.sum, kt.limit, at-s.origin, PeakWindow)
				}
			}
			ts.count(rs, b, kt)
		} else if d.Allowed {
			rep.Charged += rs.cost(attrs, n)
		}
	}
}

// inflight counts the leases on Redis an allowed request holds (sign +1) or gave back
// (-1). Leases of the local fallback are its own, and fail-open takes none.
func (s *sim) inflight(d *engine.Decision, attrs engine.Attrs, n int64, sign int64) {
	if d.Source != engine.FromBackend {
		return
	}
	for i := range d.Rules {
		rr := &d.Rules[i]
		rs := s.rule(rr)
		if rs == nil || !rs.lease {
			continue
		}
		kt := rs.keys[rr.Key]
		kt.inflight += sign * rs.cost(attrs, n)
		if sign > 0 {
			rs.peak(rr.Key, kt.inflight, kt.limit, s.clock.Now().UnixMicro()-s.origin, PeakInFlight)
		}
	}
}

// probe peeks at a denied request's advised retry instant: would it pass now? With probe
// workers it queues the probe for them (probeWorkers).
func (s *sim) probe(ctx context.Context, at int64, req *pendingReq) error {
	if s.probes != nil {
		s.probes.send(s, at, req)
		return nil
	}
	d, err := s.peek.Peek(ctx, req.attrs)
	ok, err := s.passes(req, d, err)
	if ok {
		req.tr.rep.Retry.Honoured++
		req.rule.rep.Retry.Honoured++
	}
	return err
}

// passes reports whether the denied request req, peeked at as d (or err) at its advised
// instant, would pass then: every enforcing rule has room for its cost. A peek that a
// full, non-evicting Redis refused tells nothing: false, and no error.
func (s *sim) passes(req *pendingReq, d *engine.Decision, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	if err := degraded(d); err != nil {
		if s.capped && engine.Classify(d.Err) == engine.ClassBackend {
			return false, nil
		}
		return false, err
	}
	for i := range d.Rules {
		rr := &d.Rules[i]
		if rr.Shadow {
			continue
		}
		rs := s.rule(rr)
		if rs != nil && rr.Remaining < rs.cost(req.attrs, req.n) {
			return false, nil
		}
	}
	return true, nil
}

func (tr *TrafficReport) addDeniedBy(policy, rule string) {
	for i := range tr.DeniedBy {
		if tr.DeniedBy[i].Policy == policy && tr.DeniedBy[i].Rule == rule {
			tr.DeniedBy[i].Count++
			return
		}
	}
	tr.DeniedBy = append(tr.DeniedBy, RuleCount{Policy: policy, Rule: rule, Count: 1})
}

// keyTrack follows one key of a rule: the charges inside the last window and the leases
// in flight.
type keyTrack struct {
	limit    int64
	q        []charge
	head     int
	sum      int64
	inflight int64
	period   int64 // a calendar rule's: the first instant of the period sum counts (µs)
}

type charge struct{ at, cost int64 }

// add records a charge at `at` (none when cost is 0) and forgets those before the window
// that ends there: k.sum is then the cost charged in (at-window, at].
func (k *keyTrack) add(at, cost, window int64) {
	for k.head < len(k.q) && k.q[k.head].at <= at-window {
		k.sum -= k.q[k.head].cost
		k.head++
	}
	if k.head >= 64 && 2*k.head >= len(k.q) {
		k.q = append(k.q[:0], k.q[k.head:]...)
		k.head = 0
	}
	if cost > 0 {
		k.q = append(k.q, charge{at, cost})
		k.sum += cost
	}
}

// peak keeps the rule's worst key: the highest ratio of allowed to limit.
func (rs *ruleState) peak(key string, allowed, limit, at int64, kind string) {
	w := rs.rep.Worst
	if w != nil && (limit <= 0 || allowed*w.Limit <= w.Allowed*limit) {
		return
	}
	rs.rep.Worst = &Peak{Kind: kind, Key: key, Allowed: allowed, Limit: limit, Bound: rs.bound(limit),
		At: time.Duration(at) * time.Microsecond}
}

func (s *sim) finish() {
	if l := s.r.Leases; l != nil {
		l.Calls = s.calls.Load()
	}
	for _, ts := range s.tlist {
		slices.Sort(ts.times) // a request that waited is counted when it went on
		s.r.allowedAt[ts.rep.Name] = ts.times
		if top := ts.rep.topDenier(); top != nil {
			for rs, ks := range ts.keys {
				if rs.rep.Policy == top.Policy && rs.rep.Rule == top.Rule {
					ks.Per = fmtDur(rs.rep.Window)
					if cal := rs.rule.Calendar; cal != nil {
						ks.Per = cal.Unit.String()
					}
					ts.tl.Key = ks
				}
			}
		}
	}
	for _, rep := range s.r.Rules {
		if rep.Worst != nil && rep.Worst.Kind == PeakWindow {
			rep.Worst.Window = rep.Window
		}
	}
}

// designBound returns, from a's guarantee, the most it allows in one window (or in
// flight) given its limit by design: the limit times the declared bound, and for a rate
// twice that over the refill time (a full burst plus what refills); 0 when it declares
// none.
func designBound(a *algorithms.Algorithm) func(int64) int64 {
	g := a.Guarantee
	switch g.Shape {
	case algorithms.ShapeWindow, algorithms.ShapeInFlight:
		return func(l int64) int64 { return g.Bound.Of(l) }
	case algorithms.ShapeRate:
		return func(l int64) int64 { return 2 * g.Bound.Of(l) }
	}
	return func(int64) int64 { return 0 }
}

// change makes a scenario's override or list change on the simulated Redis itself (an
// operator's change does not go through the instances, nor through the scenario's
// faults). A listed key stays in its rule's worst key: what the rule allowed it still
// counts against the rule's figures.
func (s *sim) change(ctx context.Context, c *dsl.Change) error {
	r := engine.Attrs(c.Request)
	if c.Rule == nil {
		var err error
		if c.Remove {
			_, err = s.peek.RemoveFromList(ctx, c.List, r)
		} else {
			_, err = s.peek.AddToList(ctx, c.List, r)
		}
		return err
	}
	d, err := s.peek.Peek(ctx, r)
	if err != nil {
		return err
	}
	for _, rr := range d.Rules {
		if rr.Rule == c.Rule.Name {
			if s.overridden == nil {
				s.overridden = map[string]bool{}
			}
			s.overridden[rr.Key] = true
		}
	}
	if c.Set == nil {
		return s.peek.ClearOverride(ctx, r, s.policy.Name, c.Rule.Name)
	}
	var until time.Time
	if c.For > 0 {
		until = s.clock.Now().Add(c.For)
	}
	return s.peek.SetOverride(ctx, r, s.policy.Name, c.Rule.Name, c.Set, until)
}

// appendFurtherKeys appends the keys rule ru keeps beside its key key (a plugin's keys,
// its block, its override, its list members): a probe beside the run reads them as one
// in line does.
func appendFurtherKeys(keys []string, ru *dsl.Rule, key string) []string {
	for _, name := range ru.Algorithm.Keys {
		keys = append(keys, key+":"+name)
	}
	if ru.Box.For > 0 {
		keys = append(keys, algorithms.BoxKey(key))
	}
	if ru.Overridable {
		keys = append(keys, algorithms.OverrideKey(key))
	}
	for _, l := range []string{ru.Lists.Exempt, ru.Lists.Deny} {
		if l != "" {
			keys = append(keys, algorithms.ListKey(key, l))
		}
	}
	return keys
}

// denyListed reports whether key, rule ru's, is on the rule's deny list on the simulated
// Redis.
func (s *sim) denyListed(ru *dsl.Rule, key string) bool {
	if ru.Lists.Deny == "" {
		return false
	}
	v, err := s.host.Do(context.Background(), "EXISTS", algorithms.ListKey(key, ru.Lists.Deny))
	return err == nil && v == int64(1)
}
