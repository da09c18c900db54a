package verify

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
)

// probeWorkers run a simulation's probes beside it, each worker with an engine on a host
// of its own. When a probe's instant comes, the simulation copies the keys the probe reads
// (luahost.CopyKeys: the keys of the denial it probes, which a peek of the same request
// reads again) and goes on; a worker makes that copy its host's whole keyspace, sets its
// clock to the instant and peeks. A probe only counts whether retrying would have passed,
// and counts add up the same whichever worker ran which probe, so the report is the one a
// run of the probes in line gives, byte for byte; so is the error, the first probe's to
// fail in the simulation's order.
//
// Probes run in line instead when a peek could answer from more than the keys: the
// engine's deny cache, or a simulated Redis with a maxmemory (whose peek may be refused).
type probeWorkers struct {
	plan  *engine.Plan
	jobs  chan []*probeJob // in batches, so that handing work over costs little per probe
	batch []*probeJob      // the probes not yet handed over
	wg    sync.WaitGroup
	// tallies[w] is worker w's, the last one the simulation's own as it helps drain the
	// queue (finish): set only by its worker, read once every worker is done.
	tallies []probeTally
	seq     int
}

// probeJob is one probe: the denied request, its instant and a copy of the keys it reads.
type probeJob struct {
	seq  int
	at   int64       // µs since the epoch
	req  *pendingReq // its keys: the denial's
	data *luahost.KeyCopy
}

type probeTally struct {
	passed map[probeCount]int64 // probes that would have passed
	err    error                // the first failed probe's (lowest seq)
	errSeq int
	errAt  int64
}

// probeCount is where a passed probe counts: its traffic and the rule that denied.
type probeCount struct {
	tr   *trafficState
	rule *ruleState
}

// A batch is probeBatch probes; probeQueue batches wait for a worker at most, which
// bounds the copies of keys held.
const (
	probeBatch = 64
	probeQueue = 256
)

// startProbes starts n workers for the simulation's probes, when its probes can run
// beside it (see probeWorkers) and n > 0; otherwise probes run in line.
func (s *sim) startProbes(plan *engine.Plan, sc *dsl.Scenario, n int) {
	if n <= 0 || s.capped || engineSettings(sc).DenyCache > 0 {
		return
	}
	p := &probeWorkers{plan: plan, jobs: make(chan []*probeJob, probeQueue), tallies: make([]probeTally, n+1)}
	for w := range n {
		p.wg.Go(func() { p.work(s, w) })
	}
	s.probes = p
}

// work runs probes as they come, on a host and engine of its own, into tallies[w].
func (p *probeWorkers) work(s *sim, w int) {
	clock := luahost.NewManualClock(Epoch)
	host := newHost(clock, s.script.Commands())
	eng := engine.New(engine.NewLocal(host), p.plan, engine.WithClock(clock.Now), engine.WithTimeout(0))
	t := &p.tallies[w]
	t.passed = map[probeCount]int64{}
	for batch := range p.jobs {
		for _, j := range batch {
			if t.err != nil {
				continue // a later probe's outcome no longer matters
			}
			host.ReplaceKeys(j.data)
			clock.Set(time.UnixMicro(j.at))
			d, err := eng.Peek(context.Background(), j.req.attrs)
			if err == nil {
				err = readOnly(d, j.req.keys)
			}
			pass, err := s.passes(j.req, d, err)
			switch {
			case err != nil:
				t.err, t.errSeq, t.errAt = err, j.seq, j.at
			case pass:
				t.passed[probeCount{j.req.tr, j.req.rule}]++
			}
		}
	}
}

// readOnly checks that the peek d read only keys: the worker's host holds no other.
func readOnly(d *engine.Decision, keys []string) error {
	for i := range d.Rules {
		if !slices.Contains(keys, d.Rules[i].Key) {
			return fmt.Errorf("a probe read key %q, which its denial did not", d.Rules[i].Key)
		}
	}
	return nil
}

// send queues the probe of req at the current instant, with a copy of the keys it reads.
func (p *probeWorkers) send(s *sim, at int64, req *pendingReq) {
	p.seq++
	p.batch = append(p.batch, &probeJob{seq: p.seq, at: at, req: req, data: s.host.CopyKeys(req.keys...)})
	if len(p.batch) == probeBatch {
		p.jobs <- p.batch
		p.batch = make([]*probeJob, 0, probeBatch)
	}
}

// finish runs the probes still queued, on the caller's goroutine too, and adds the ones
// that passed to the report, or returns the error of the first probe that failed, as the
// simulation reports an error at its instant.
func (p *probeWorkers) finish(s *sim) error {
	if len(p.batch) > 0 {
		p.jobs <- p.batch
	}
	close(p.jobs)
	if len(p.jobs) > 0 {
		p.work(s, len(p.tallies)-1)
	}
	p.wg.Wait()
	var first *probeTally
	for i := range p.tallies {
		if t := &p.tallies[i]; t.err != nil && (first == nil || t.errSeq < first.errSeq) {
			first = t
		}
	}
	if first != nil {
		return fmt.Errorf("verify: at %s: %w", time.Duration(first.errAt-s.origin)*time.Microsecond, first.err)
	}
	for i := range p.tallies {
		for c, n := range p.tallies[i].passed {
			c.tr.rep.Retry.Honoured += n
			c.rule.rep.Retry.Honoured += n
		}
	}
	return nil
}
