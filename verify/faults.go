package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
)

// This file injects a scenario's Redis faults (dsl.Fault) into a simulation and measures
// what the engine made of them.

// FaultReport is what happened during one fault.
type FaultReport struct {
	Kind  string        `json:"kind"`
	At    time.Duration `json:"at_ns"`  // since the start
	For   time.Duration `json:"for_ns"` // 0 for a flush
	Reply string        `json:"reply,omitempty"`
	// Traffic has, per traffic source, the requests sent while the fault was in force
	// (none for a flush) and how long after its end they were still decided without Redis.
	Traffic []*FaultTraffic `json:"traffic"`
	// Late is what the server did with the calls a stall held back; nil for other kinds.
	Late *LateCalls `json:"late_calls,omitempty"`
	// KeysLost is the number of keys a flush or restart deleted.
	KeysLost int `json:"keys_lost,omitempty"`
}

// FaultTraffic is one traffic source's requests during a fault.
type FaultTraffic struct {
	Name     string    `json:"name"`
	Requests int64     `json:"requests"`
	Allowed  int64     `json:"allowed"`
	Decided  Decisions `json:"decided"`
	// DegradedAfter counts the source's requests decided without Redis after the fault
	// ended (before the next one): the breaker was still open, or Redis still failing.
	DegradedAfter int64 `json:"degraded_after"`
	// Recovery is how long after the fault's end the latest of those came.
	Recovery time.Duration `json:"recovery_ns"`
}

// Decisions counts requests by how the engine decided them (engine.Decision.Source) and,
// for those decided without Redis, why Redis was not used (engine.Decision.Err).
type Decisions struct {
	Redis    int64 `json:"redis"`           // the script on Redis
	Local    int64 `json:"local"`           // the script on the in-process fallback (on_error = "local")
	FailOpen int64 `json:"fail_open"`       // allowed unchecked (on_error = "allow")
	FailDeny int64 `json:"fail_deny"`       // denied unchecked (on_error = "deny")
	Cache    int64 `json:"cache"`           // denied by the deny cache, without a call
	Lease    int64 `json:"lease,omitempty"` // decided from quota leases held in process, without a call
	// Of Local, FailOpen and FailDeny:
	TimedOut    int64 `json:"timed_out"`    // the call outlasted the deadline
	Failed      int64 `json:"failed"`       // the call failed at once: refused, or an error reply
	BreakerOpen int64 `json:"breaker_open"` // the open circuit breaker made no call
	// Errors counts requests the engine answered with an error instead of a decision
	// (counted as denied).
	Errors int64 `json:"errors"`
}

// LateCalls are the calls a stalled server received and ran when the stall ended, after
// their callers had given up at the deadline.
type LateCalls struct {
	Ran int64 `json:"ran"`
	// Charged counts the calls that were allowed and so charged their rules: phantom
	// charges, which nobody was told about. The engine's script refuses a call past its
	// deadline, so this is 0 unless that protection is missing.
	Charged int64 `json:"charged"`
	// Refused counts the calls the script refused with an error reply (its deadline had
	// passed): they wrote nothing.
	Refused int64 `json:"refused"`
	// Denied counts the checks that were denied, which writes nothing either.
	Denied int64 `json:"denied"`
	// Released counts the releases of concurrency leases (refunds), which the engine sends
	// without a deadline: run late, they give back what the lease's TTL would have.
	Released int64 `json:"released"`
}

// EngineReport is the engine configuration a simulation ran with.
type EngineReport struct {
	Deadline        time.Duration `json:"deadline_ns"`
	BreakerFailures int           `json:"breaker_failures"`
	BreakerCooldown time.Duration `json:"breaker_cooldown_ns"`
	DenyCache       int           `json:"deny_cache"`
	// MaxMemory is the simulated Redis's maxmemory (0: none), Eviction its policy, Evicted
	// the keys it evicted during the run and Memory the bytes its keys held at the end.
	MaxMemory int64  `json:"max_memory,omitempty"`
	Eviction  string `json:"eviction,omitempty"`
	Evicted   uint64 `json:"evicted,omitempty"`
	Memory    int64  `json:"memory,omitempty"`
	// Instances is the number of instances of the service that shared the simulated
	// Redis, requests going to them in turn (omitted: 1).
	Instances int `json:"instances,omitempty"`
}

// errStalled is what a client whose deadline passed without an answer returns.
var errStalled = fmt.Errorf("redis stalled: %w", context.DeadlineExceeded)

// errRefused is what dialling a server that is not listening returns.
func errRefused() error { return &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED} }

// replyError is an error reply of the server as go-redis returns one: it satisfies
// redis.Error, by which the engine tells server replies from network failures.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError marks the error as a server reply (go-redis's redis.Error interface).
func (replyError) RedisError() {}

// faultBackend is an engine.Backend that makes the simulation's Redis (an engine.Local on
// luahost) fail as a scenario's faults say, on the virtual clock. Outside a fault it runs
// every call on the inner backend without the caller's cancellation: the engine's deadline
// is a wall-clock timer, and a simulation must never depend on how fast it runs. During a
// stall it fails each call at once with an error wrapping context.DeadlineExceeded, as a
// client whose deadline passed does, and keeps the call; the server runs the kept calls,
// in order, when the clock passes the stall's end (settle), at that instant.
type faultBackend struct {
	inner  engine.Backend
	host   *luahost.Host // the inner backend's keyspace, for flushes
	clock  *luahost.ManualClock
	faults []*faultRun // in time order
}

// faultRun is one fault of a run.
type faultRun struct {
	f          *dsl.Fault
	start, end int64 // µs since the Unix epoch
	rep        *FaultReport
	queue      []heldCall // a stall's calls, in arrival order
	flushed    bool       // a flush or restart has deleted the keys
}

// heldCall is a call a stalled server received.
type heldCall struct {
	script     *algorithms.Script
	keys, argv []string
	del        bool // a DEL of keys
}

func newFaultBackend(inner engine.Backend, host *luahost.Host, clock *luahost.ManualClock, origin int64, faults []*dsl.Fault) *faultBackend {
	b := &faultBackend{inner: inner, host: host, clock: clock}
	for _, f := range faults {
		fr := &faultRun{f: f, start: origin + f.At.Microseconds(), end: origin + f.End().Microseconds(),
			rep: &FaultReport{Kind: f.Kind, At: f.At, For: f.For, Reply: f.Reply, Traffic: []*FaultTraffic{}}}
		if f.Kind == dsl.FaultStall {
			fr.rep.Late = &LateCalls{}
		}
		b.faults = append(b.faults, fr)
	}
	return b
}

// active returns the fault in force at now (µs), or nil.
func (b *faultBackend) active(now int64) *faultRun {
	for _, f := range b.faults {
		if f.start <= now && now < f.end {
			return f
		}
	}
	return nil
}

// Eval implements engine.Backend.
func (b *faultBackend) Eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error) {
	now := b.clock.Now()
	b.settle(now)
	f := b.active(now.UnixMicro())
	if f == nil {
		return b.inner.Eval(context.WithoutCancel(ctx), s, keys, argv)
	}
	if f.f.Kind == dsl.FaultStall {
		f.queue = append(f.queue, heldCall{script: s, keys: slices.Clone(keys), argv: slices.Clone(argv)})
	}
	return nil, f.err()
}

// Del implements engine.Backend.
func (b *faultBackend) Del(ctx context.Context, keys ...string) error {
	now := b.clock.Now()
	b.settle(now)
	f := b.active(now.UnixMicro())
	if f == nil {
		return b.inner.Del(context.WithoutCancel(ctx), keys...)
	}
	if f.f.Kind == dsl.FaultStall {
		f.queue = append(f.queue, heldCall{keys: slices.Clone(keys), del: true})
	}
	return f.err()
}

// err is what a call gets during the fault.
func (f *faultRun) err() error {
	switch f.f.Kind {
	case dsl.FaultStall:
		return errStalled
	case dsl.FaultError:
		return replyError(f.f.Reply)
	}
	return errRefused()
}

// settle carries out what the faults did up to now, each at its own instant: a flush or
// restart deletes every key when it starts; a stall's server runs the calls it held when
// it ends. The clock reads now afterwards.
func (b *faultBackend) settle(now time.Time) {
	t := now.UnixMicro()
	moved := false
	at := func(us int64) {
		b.clock.Set(time.UnixMicro(us))
		moved = true
	}
	for _, f := range b.faults {
		switch {
		case (f.f.Kind == dsl.FaultFlush || f.f.Kind == dsl.FaultRestart) && !f.flushed && f.start <= t:
			at(f.start)
			f.flushed = true
			f.rep.KeysLost = b.flush()
		case f.f.Kind == dsl.FaultStall && len(f.queue) > 0 && f.end <= t:
			at(f.end)
			b.runHeld(f)
		}
	}
	if moved {
		b.clock.Set(now)
	}
}

// flush deletes every key of the server and returns how many there were.
func (b *faultBackend) flush() int {
	keys := b.host.Keys()
	if len(keys) > 0 {
		_, _ = b.host.Do(context.Background(), append([]string{"DEL"}, keys...)...)
	}
	return len(keys)
}

// runHeld runs a stall's held calls on the inner backend and counts what they did.
func (b *faultBackend) runHeld(f *faultRun) {
	late := f.rep.Late
	for _, c := range f.queue {
		if c.del {
			_ = b.inner.Del(context.Background(), c.keys...)
			continue
		}
		late.Ran++
		v, err := b.inner.Eval(context.Background(), c.script, c.keys, c.argv)
		if err != nil {
			late.Refused++
			continue
		}
		switch rep, err := algorithms.DecodeReply(v, len(c.keys)); {
		case err != nil || len(c.argv) > 1 && c.argv[1] == string(algorithms.OpRefund):
			late.Released++
		case rep.Allowed:
			late.Charged++
		default:
			late.Denied++
		}
	}
	f.queue = nil
}

// faultTraffic returns traffic's tally during fault f.
func (f *faultRun) traffic(name string) *FaultTraffic {
	for _, t := range f.rep.Traffic {
		if t.Name == name {
			return t
		}
	}
	t := &FaultTraffic{Name: name}
	f.rep.Traffic = append(f.rep.Traffic, t)
	return t
}

// lastEnded returns the latest fault that fails calls and has ended by now (µs), or nil.
func (b *faultBackend) lastEnded(now int64) *faultRun {
	var last *faultRun
	for _, f := range b.faults {
		if f.f.Kind != dsl.FaultFlush && f.end <= now {
			last = f
		}
	}
	return last
}

// count adds one decision to d; nil is an error the engine returned instead of one.
func (d *Decisions) count(dec *engine.Decision) {
	if dec == nil {
		d.Errors++
		return
	}
	switch dec.Source {
	case engine.FromBackend:
		d.Redis++
	case engine.FromLocal:
		d.Local++
	case engine.FromFailOpen:
		d.FailOpen++
	case engine.FromFailDeny:
		d.FailDeny++
	case engine.FromCache:
		d.Cache++
	case engine.FromLease:
		d.Lease++
	}
	if dec.Err == nil {
		return
	}
	switch {
	case errors.Is(dec.Err, context.DeadlineExceeded):
		d.TimedOut++
	case errors.Is(dec.Err, engine.ErrBreakerOpen):
		d.BreakerOpen++
	default:
		d.Failed++
	}
}

// add adds o's counts to d.
func (d *Decisions) add(o *Decisions) {
	d.Redis += o.Redis
	d.Local += o.Local
	d.FailOpen += o.FailOpen
	d.FailDeny += o.FailDeny
	d.Cache += o.Cache
	d.TimedOut += o.TimedOut
	d.Failed += o.Failed
	d.BreakerOpen += o.BreakerOpen
	d.Errors += o.Errors
}

// label names a fault in a report: "stall 2m for 30s", "flush 3m".
func (f *FaultReport) label() string {
	if f.For == 0 {
		return f.Kind + " " + fmtDur(f.At)
	}
	return fmt.Sprintf("%s %s for %s", f.Kind, fmtDur(f.At), fmtDur(f.For))
}

// cell writes the counts for a table cell: the ways of deciding that occurred, then why
// Redis was not used: "local 590, redis 10: 3 timed out, 587 breaker open". failed names
// the failures that were not timeouts.
func (d *Decisions) cell(failed string) string {
	var ways, why []string
	for _, c := range []struct {
		n    int64
		name string
	}{{d.Redis, "redis"}, {d.Local, "local"}, {d.FailOpen, "fail-open"}, {d.FailDeny, "fail-deny"}, {d.Cache, "cache"}, {d.Lease, "lease"}, {d.Errors, "engine error"}} {
		if c.n > 0 {
			ways = append(ways, fmt.Sprintf("%s %d", c.name, c.n))
		}
	}
	for _, c := range []struct {
		n    int64
		name string
	}{{d.TimedOut, "timed out"}, {d.Failed, failed}, {d.BreakerOpen, "breaker open"}} {
		if c.n > 0 {
			why = append(why, fmt.Sprintf("%d %s", c.n, c.name))
		}
	}
	if len(ways) == 0 {
		return "-"
	}
	out := strings.Join(ways, ", ")
	if len(why) > 0 {
		out += ": " + strings.Join(why, ", ")
	}
	return out
}

// writeFaults writes the engine's configuration, a table of how each traffic source's
// requests were decided during each fault and over the whole run, and a sentence per
// fault on what the deadline, the breaker and the server did.
func (r *Report) writeFaults(w io.Writer) {
	if r.Engine == nil {
		return
	}
	e := r.Engine
	cache := "no deny cache"
	if e.DenyCache > 0 {
		cache = fmt.Sprintf("a deny cache of %d", e.DenyCache)
	}
	fmt.Fprintln(w)
	fleet := ""
	if e.Instances > 1 {
		fleet = fmt.Sprintf("%d instances in turn, each with ", e.Instances)
	}
	if len(r.Faults) == 0 {
		fmt.Fprintf(w, "engine: %s%s\n", fleet, cache)
	} else {
		fmt.Fprintf(w, "engine: %sdeadline %s, breaker opens after %d %s for %s, %s\n", fleet, fmtDur(e.Deadline), e.BreakerFailures, plural(int64(e.BreakerFailures), "failure", "failures"), fmtDur(e.BreakerCooldown), cache)
	}
	if e.MaxMemory > 0 {
		what := fmt.Sprintf("%d %s evicted: each a client whose history the limiter forgot", e.Evicted, plural(int64(e.Evicted), "key", "keys"))
		if e.Eviction == "noeviction" {
			what = "writes past it refused (OOM): those calls failed and on_error decided them"
		}
		fmt.Fprintf(w, "redis: maxmemory %s (%s), %s held at the end; %s\n", algorithms.FormatBytes(e.MaxMemory), e.Eviction, algorithms.FormatBytes(e.Memory), what)
	}
	tb := table{head: []string{"during", "traffic", "requests", "allowed", "denied", "decided by", "recovered"}, left: 2}
	if len(r.Faults) == 0 {
		tb.head = tb.head[:6]
	}
	tb.text = map[int]bool{5: true, 6: true}
	for _, f := range r.Faults {
		label := f.label()
		for _, t := range f.Traffic {
			rec := "at once"
			if t.DegradedAfter > 0 {
				rec = "after " + fmtDur(t.Recovery.Round(time.Millisecond))
			}
			tb.add(label, t.Name, itoa(t.Requests), itoa(t.Allowed), itoa(t.Requests-t.Allowed), t.Decided.cell(f.failure()), rec)
			label = ""
		}
	}
	label := "whole run"
	for _, t := range r.Traffic {
		tb.add(label, t.Name, itoa(t.Requests), itoa(t.Allowed), itoa(t.Denied), t.Decided.cell("failed"))
		label = ""
	}
	tb.write(w)
	for _, f := range r.Faults {
		fmt.Fprintf(w, "  %s:\n", f.label())
		for _, s := range f.sentences(e) {
			fmt.Fprintf(w, "    %s\n", s)
		}
	}
}

// failure names what went wrong with a call during the fault, other than a timeout.
func (f *FaultReport) failure() string {
	switch f.Kind {
	case dsl.FaultError:
		return "error reply"
	case dsl.FaultRefuse, dsl.FaultRestart:
		return "refused"
	}
	return "failed"
}

// sentences say what a fault did beyond the table: the deadline and breaker at work, the
// calls a stall held, the keys a flush lost.
func (f *FaultReport) sentences(e *EngineReport) []string {
	var d Decisions
	for _, t := range f.Traffic {
		d.add(&t.Decided)
	}
	var out []string
	first := ""
	switch f.Kind {
	case dsl.FaultStall:
		first = fmt.Sprintf("%d %s waited for the %s deadline", d.TimedOut, plural(d.TimedOut, "request", "requests"), fmtDur(e.Deadline))
	case dsl.FaultError:
		first = fmt.Sprintf("%d %s got the error reply %q", d.Failed+d.Errors, plural(d.Failed+d.Errors, "request", "requests"), f.Reply)
	case dsl.FaultRefuse, dsl.FaultRestart:
		first = fmt.Sprintf("%d %s refused", d.Failed, plural(d.Failed, "connection", "connections"))
	}
	if d.BreakerOpen > 0 {
		first += fmt.Sprintf(", then the open breaker answered %d without Redis", d.BreakerOpen)
	}
	if first != "" {
		out = append(out, first)
	}
	if d.Errors > 0 {
		out = append(out, fmt.Sprintf("%d %s failed in the engine: the caller got an error", d.Errors, plural(d.Errors, "request", "requests")))
	}
	if l := f.Late; l != nil {
		phantom := "no phantom charges"
		if l.Charged > 0 {
			phantom = fmt.Sprintf("%d PHANTOM %s", l.Charged, plural(l.Charged, "CHARGE", "CHARGES"))
		}
		released := ""
		if l.Released > 0 {
			released = fmt.Sprintf(", %d released %s", l.Released, plural(l.Released, "a lease", "leases"))
		}
		out = append(out, fmt.Sprintf("the server ran the %d %s it held at %s: %d refused past their deadline, %d denied, %d charged%s: %s",
			l.Ran, plural(l.Ran, "call", "calls"), fmtDur(f.At+f.For), l.Refused, l.Denied, l.Charged, released, phantom))
	}
	if f.Kind == dsl.FaultFlush || f.Kind == dsl.FaultRestart {
		out = append(out, fmt.Sprintf("%d %s lost", f.KeysLost, plural(int64(f.KeysLost), "key", "keys")))
	}
	return out
}
