package verify

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
)

// PropLease is the lease property of a rule served from quota leases (dsl.Rule.LeaseSize).
const PropLease = "lease"

const stmtLease = "instances serving the rule from quota leases (2 to 8 engines on one Redis, the rule stacked on an unleased rule that denies some clients) never admit above the limit in a window: after every request, what Redis counts in the window is exactly what the instances admitted in it plus what they hold unspent (a request the other rule denies gives its leased units back), and no instance holds more than lease_size units, so one denied by the rule finds each other holding at most that"

// maxInstances is the most instances a lease trace runs.
const maxInstances = 8

// leaseStep is one request of a lease trace: at trace µs at, to instance inst, of cost
// units, from client client (the unleased rule's key).
type leaseStep struct {
	at     int64
	inst   int
	cost   int64
	client int
}

// leaseClients is how many clients a lease trace's requests come from; the unleased rule
// beside the leased one admits each a third of the limit.
const leaseClients = 4

// leaseOut is what a lease step got.
type leaseOut struct {
	allowed bool
	rr      engine.RuleResult
	source  engine.Source
}

// leaseRun runs lease traces of one rule: the rule in a policy of its own (its limit,
// window, clock and lease as written) beside an unleased rule per client, on instances
// of the engine sharing one luahost on the virtual clock.
type leaseRun struct {
	plan  *engine.Plan
	rule  *dsl.Rule
	limit int64
	lease int64
}

// leasePlan compiles rule ru of policy p, keyed by one constant key so that every request
// of a trace is the key's, stacked on an unleased fixed_window rule of the same window
// per client (request.client) that admits a third of the limit.
func leasePlan(p *dsl.Policy, ru *dsl.Rule, w []int64) (*engine.Plan, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "policy \"lease\" {\n")
	if p.Clock == dsl.ClockClient {
		fmt.Fprintf(&b, "  clock = \"client\"\n")
	}
	window := fmt.Sprintf("    window = %q\n", algorithms.FormatDuration(w[1]))
	if c := ru.Calendar; c != nil {
		name, zone, _ := strings.Cut(c.String(), " (")
		window = fmt.Sprintf("    window = %q\n    time_zone = %q\n", name, strings.TrimSuffix(zone, ")"))
	}
	fmt.Fprintf(&b, "  rule \"other\" {\n    algorithm = \"fixed_window\"\n    key = request.client\n    limit = %d\n%s  }\n", max(w[0]/3, 1), window)
	fmt.Fprintf(&b, "  rule \"r\" {\n    algorithm = \"fixed_window\"\n    key = \"k\"\n    limit = %d\n%s", w[0], window)
	fmt.Fprintf(&b, "    lease_size = %d\n", ru.LeaseSize)
	if ru.LeaseFor > 0 {
		fmt.Fprintf(&b, "    lease_for = %q\n", algorithms.FormatDuration(ru.LeaseFor))
	}
	b.WriteString("  }\n}\n")
	cfg, diags := dsl.Parse(map[string][]byte{"lease.hcl": []byte(b.String())})
	if diags.HasErrors() {
		return nil, fmt.Errorf("verify: the leased rule alone does not load: %v", diags)
	}
	return engine.Compile(cfg)
}

// end returns the end of the rule's window that holds trace instant at (µs after Epoch),
// as trace µs.
func (r *leaseRun) end(at int64) int64 {
	t := Epoch.Add(time.Duration(at) * time.Microsecond)
	if c := r.rule.Calendar; c != nil {
		_, end := c.Bounds(t)
		return end.Sub(Epoch).Microseconds()
	}
	w := r.rule.Params[1].Const[0]
	us := t.UnixMicro()
	return at + (us/w+1)*w - us
}

// gen draws a trace of n requests to 2 to 8 instances: bursts at one instant, small
// steps, steps to 1µs before and at a window's end and past lease_for, and costs of a
// unit, up to the lease, the lease, and above it (decided on Redis, unleased).
func (r *leaseRun) gen(rng *rand.Rand, n int, _ int64) []leaseStep {
	insts := 2 + rng.IntN(maxInstances-1)
	window := r.end(0)
	if r.rule.Calendar == nil {
		window = r.rule.Params[1].Const[0]
	}
	steps := make([]leaseStep, 0, n)
	at := int64(0)
	for range n {
		switch k := rng.IntN(100); {
		case k < 55:
		case k < 80:
			at += rng.Int64N(max(window/max(r.limit, 1), 1) + 1)
		case k < 88:
			at = r.end(at) - 1
		case k < 93:
			at = r.end(at)
		case k < 97 && r.rule.LeaseFor > 0:
			at += r.rule.LeaseFor
		default:
			at += rng.Int64N(window)
		}
		cost := int64(1)
		switch k := rng.IntN(20); {
		case k < 12:
		case k < 17:
			cost = 1 + rng.Int64N(r.lease)
		case k < 19:
			cost = r.lease
		default:
			cost = min(r.lease+1, r.limit)
		}
		// Half the requests are one client's, whom the unleased rule denies while the
		// leased one still admits: its denials give leased units back.
		client := 0
		if rng.IntN(2) == 0 {
			client = rng.IntN(leaseClients)
		}
		steps = append(steps, leaseStep{at: at, inst: rng.IntN(insts), cost: cost, client: client})
	}
	return steps
}

// run runs steps on a fresh luahost and instances of the rule's plan, and holds each
// step to the statement: Redis's count of the window (peeked) equals what the instances
// admitted in it plus what they hold, and a denial by the rule finds no other instance
// holding more than the lease.
func (r *leaseRun) run(g *rig, steps []leaseStep) ([]leaseOut, int, string, error) {
	clock := luahost.NewManualClock(Epoch)
	backend := engine.NewLocal(newHost(clock, r.plan.Script().Commands()))
	calls := 0
	opts := []engine.Option{engine.WithClock(clock.Now), engine.WithTimeout(0), engine.WithHooks(engine.Hooks{Called: func(engine.CallStats) { calls++ }})}
	var insts [maxInstances]*engine.Engine
	for i := range insts {
		insts[i] = engine.New(backend, r.plan, opts...)
	}
	peek := engine.New(backend, r.plan, opts...)
	defer func() { g.calls += calls }()
	ctx := context.Background()
	admitted := map[int64]int64{} // by window end
	reqs := make([]engine.Attrs, leaseClients)
	for i := range reqs {
		reqs[i] = engine.Attrs{"client": fmt.Sprint("c", i)}
	}
	outs := make([]leaseOut, 0, len(steps))
	key := ""
	for k, st := range steps {
		clock.Set(Epoch.Add(time.Duration(st.at) * time.Microsecond))
		d, err := insts[st.inst].AllowN(ctx, reqs[st.client], st.cost)
		if err != nil {
			return outs, -1, "", err
		}
		if d.Err != nil {
			return outs, -1, "", fmt.Errorf("verify: the simulated Redis failed: %w", d.Err)
		}
		o := leaseOut{allowed: d.Allowed, source: d.Source}
		for _, rr := range d.Rules {
			if rr.Rule == "r" {
				o.rr = rr
			}
		}
		if k := o.rr.Key; k != "" {
			key = k
		}
		outs = append(outs, o)
		win := r.end(st.at)
		if d.Allowed {
			admitted[win] += st.cost
		}
		var held [maxInstances]int64
		total := int64(0)
		for i, e := range insts {
			held[i] = e.Leased(key)
			total += held[i]
		}
		for i, h := range held {
			if h > r.lease {
				return outs, k, fmt.Sprintf("instance %d holds %d units, above the lease of %d", i+1, h, r.lease), nil
			}
		}
		p, err := peek.Peek(ctx, reqs[st.client])
		if err != nil {
			return outs, -1, "", err
		}
		count := int64(0)
		for _, rr := range p.Rules {
			if rr.Rule == "r" {
				count = rr.Limit - rr.Remaining
			}
		}
		switch {
		case admitted[win] > r.limit:
			return outs, k, fmt.Sprintf("the instances admitted %d in the window, above the limit of %d", admitted[win], r.limit), nil
		case count > admitted[win]+total:
			return outs, k, fmt.Sprintf("Redis counts %d in the window, but the instances admitted %d and hold %d: %d units were lost", count, admitted[win], total, count-admitted[win]-total), nil
		case count < admitted[win]+total:
			return outs, k, fmt.Sprintf("Redis counts %d in the window, but the instances admitted %d and hold %d: %d units were spent that Redis never counted", count, admitted[win], total, admitted[win]+total-count), nil
		}
	}
	return outs, -1, "", nil
}

// leaseProp checks the lease property (PropLease) of leased rule ru with wire parameters
// w on traces of its own, within the verify budget, and shrinks a breach to the fewest
// requests.
func (c *checker) leaseProp(p *dsl.Policy, ru *dsl.Rule, w []int64, params string) (Result, error) {
	res := Result{Policy: p.Name, Rule: ru.Name, Algorithm: ru.Algorithm.Name, Params: params, Property: PropLease, Statement: stmtLease}
	plan, err := leasePlan(p, ru, w)
	if err != nil {
		return res, err
	}
	r := &leaseRun{plan: plan, rule: ru, limit: w[0], lease: ru.LeaseSize}
	t := stepTrace[leaseStep, leaseOut]{
		per:   3, // a request, its takes and returns, the peek
		gen:   r.gen,
		run:   r.run,
		limit: func(o leaseOut) int64 { return o.rr.Limit },
		at:    func(st leaseStep) int64 { return st.at },
		step: func(st leaseStep) string {
			return fmt.Sprintf("instance %d, client %d, cost %d", st.inst+1, st.client+1, st.cost)
		},
		result: func(o leaseOut) string {
			if o.allowed {
				return fmt.Sprintf("allowed (%s), remaining %d", o.source, o.rr.Remaining)
			}
			return fmt.Sprintf("denied (%s), retry-after %s", o.source, o.rr.RetryAfter)
		},
		unit: "requests",
	}
	return t.check(c, c.rng(p.Name, ru.Name, params, PropLease), res, func(traces, steps, calls int) string {
		return fmt.Sprintf("held on %d traces of 2 to %d instances, %d requests, %d calls to Redis", traces, maxInstances, steps, calls)
	})
}
