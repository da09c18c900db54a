package dsl

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/rlctl/rlctl/luahost"
)

// This file reads a scenario's fault and engine blocks: the Redis failures a simulation
// injects, and the engine options that decide what a failure does.

var faultSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "kind"},
		{Name: "at"},
		{Name: "for"},
		{Name: "reply"},
	},
}

var engineSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "deadline"},
		{Name: "breaker_failures"},
		{Name: "breaker_cooldown"},
		{Name: "deny_cache"},
		{Name: "max_memory"},
		{Name: "eviction"},
		{Name: "instances"},
	},
}

var faultKinds = []string{FaultStall, FaultRefuse, FaultError, FaultFlush, FaultRestart}

const faultKindsExplained = `"stall" stops answering (calls time out at the engine's deadline and run when it ends), "refuse" refuses connections, "error" answers every call with an error reply, "flush" loses every key at one instant, "restart" refuses connections for a while and comes back with no keys.`

// maxBreakerFailures and maxDenyCache bound the engine block's counts to what a service
// would configure; beyond them a typo is likelier than intent.
const (
	maxBreakerFailures = 1_000_000
	maxDenyCache       = 100_000_000
	maxInstances       = 64
)

// placedFault is a fault with the ranges its diagnostics point at.
type placedFault struct {
	f      *Fault
	at     hcl.Range // the at expression
	forRng hcl.Range // the for expression, or the block when for is absent
}

// decodeFaults reads the scenario's fault blocks into s.Faults, in time order, and reports
// faults outside the scenario and faults that overlap.
func (l *loader) decodeFaults(blocks hcl.Blocks, s *Scenario) {
	var placed []placedFault
	for _, b := range blocks {
		if b.Type != "fault" {
			continue
		}
		if p, ok := l.decodeFault(b, s); ok {
			placed = append(placed, p)
		}
	}
	slices.SortStableFunc(placed, func(a, b placedFault) int { return cmp.Compare(a.f.At, b.f.At) })
	for _, p := range placed {
		f := p.f
		if s.Duration > 0 {
			switch {
			case f.At >= s.Duration:
				l.add(errorf(p.at, "Fault after the scenario", "at is %s but scenario %q lasts %s, so the fault never happens. Start it before %s, or lengthen the scenario's duration.", fmtUS(f.At), s.Name, fmtUS(s.Duration), fmtUS(s.Duration)))
				continue
			case f.End() > s.Duration:
				l.add(errorf(p.forRng, "Fault outlasts the scenario", "The %s lasts until %s but scenario %q ends at %s, so the run would never see Redis recover. Set for to at most %s, or lengthen the scenario's duration.", f.Kind, fmtUS(f.End()), s.Name, fmtUS(s.Duration), fmtUS(s.Duration-f.At)))
				continue
			}
		}
		if n := len(s.Faults); n > 0 {
			prev := s.Faults[n-1]
			if f.At < prev.End() || f.At == prev.At {
				other := fmt.Sprintf("the %s declared at %s lasts until %s", prev.Kind, where(prev.DeclRange), fmtUS(prev.End()))
				free := prev.End()
				if prev.For == 0 {
					other = fmt.Sprintf("the %s declared at %s happens then", prev.Kind, where(prev.DeclRange))
					free = prev.At + time.Millisecond
				}
				l.add(errorf(p.at, "Faults overlap", "This %s starts at %s, while %s: Redis fails one way at a time. Start this fault at %s or later, or move the other one.", f.Kind, fmtUS(f.At), other, fmtUS(free)))
				continue
			}
		}
		s.Faults = append(s.Faults, f)
	}
}

// decodeFault reads one fault block; ok is false when it is unusable.
func (l *loader) decodeFault(b *hcl.Block, s *Scenario) (placedFault, bool) {
	f := &Fault{DeclRange: b.DefRange}
	p := placedFault{f: f, at: b.DefRange, forRng: b.DefRange}
	content, d := b.Body.Content(faultSchema)
	l.add(d...)
	ok := !d.HasErrors()
	if a := content.Attributes["kind"]; a != nil {
		v, kok := l.oneOf(a, faultKinds, faultKindsExplained)
		f.Kind, ok = v, ok && kok
	} else {
		l.add(errorf(b.DefRange, "Missing fault kind", "A fault needs its kind: kind = %s. %s", quoteList(faultKinds), faultKindsExplained))
		ok = false
	}
	if a := content.Attributes["at"]; a != nil {
		p.at = a.Expr.Range()
		us, aok := l.duration(a, true)
		f.At, ok = time.Duration(us)*time.Microsecond, ok && aok
	} else {
		l.add(errorf(b.DefRange, "Missing fault start", "A fault needs the instant it starts, from the start of the scenario, such as at = \"2m\"."))
		ok = false
	}
	a := content.Attributes["for"]
	switch {
	case a != nil && f.Kind == FaultFlush:
		l.add(errorf(a.NameRange, "A flush has no duration", "A flush loses every key at one instant. Remove for, or use kind = \"restart\" for a server that is down for %s and comes back with no keys.", formatAttrString(l, a)))
		ok = false
	case a != nil:
		p.forRng = a.Expr.Range()
		us, fok := l.duration(a, false)
		f.For, ok = time.Duration(us)*time.Microsecond, ok && fok
	case f.Kind != FaultFlush && f.Kind != "":
		l.add(errorf(b.DefRange, "Missing fault duration", "A %s lasts a while: say how long, such as for = \"30s\".", f.Kind))
		ok = false
	}
	if a := content.Attributes["reply"]; a != nil {
		if f.Kind != FaultError && f.Kind != "" {
			l.add(errorf(a.NameRange, "reply without kind = \"error\"", "reply is the error reply of an \"error\" fault; this fault is a %s. Set kind = \"error\" or remove reply.", f.Kind))
			ok = false
		} else if v, rok := l.constString(a); rok {
			switch {
			case strings.TrimSpace(v) == "":
				l.add(errorf(a.Expr.Range(), "Empty reply", "An error reply starts with its code, such as reply = %q or reply = \"READONLY You can't write against a read only replica.\".", DefaultFaultReply))
				ok = false
			case strings.ContainsAny(v, "\r\n"):
				l.add(errorf(a.Expr.Range(), "Reply on several lines", "Redis sends an error reply on one line. Remove the line breaks."))
				ok = false
			default:
				f.Reply = v
			}
		} else {
			ok = false
		}
	} else if f.Kind == FaultError {
		f.Reply = DefaultFaultReply
	}
	return p, ok
}

// formatAttrString returns a constant string attribute's value for a message, or "a while"
// when it is not one.
func formatAttrString(l *loader, a *hcl.Attribute) string {
	v, d := a.Expr.Value(l.env.ctx)
	if d.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
		return "a while"
	}
	return v.AsString()
}

// decodeEngine reads a scenario's engine blocks (at most one) into s.Engine, which starts
// as DefaultEngine.
func (l *loader) decodeEngine(blocks hcl.Blocks, s *Scenario) {
	s.Engine = DefaultEngine
	var first *hcl.Block
	for _, b := range blocks {
		if b.Type != "engine" {
			continue
		}
		if first != nil {
			l.add(errorf(b.DefRange, "Duplicate engine block", "Scenario %q already configures the engine at %s. Merge the two blocks.", s.Name, where(first.DefRange)))
			continue
		}
		first = b
		content, d := b.Body.Content(engineSchema)
		l.add(d...)
		if a := content.Attributes["deadline"]; a != nil {
			if us, ok := l.duration(a, false); ok {
				s.Engine.Deadline = time.Duration(us) * time.Microsecond
			}
		}
		if a := content.Attributes["breaker_cooldown"]; a != nil {
			if us, ok := l.duration(a, false); ok {
				s.Engine.BreakerCooldown = time.Duration(us) * time.Microsecond
			}
		}
		if a := content.Attributes["breaker_failures"]; a != nil {
			if n, ok := l.countIn(a, 1, maxBreakerFailures, "breaker_failures is how many failures in a row open the circuit breaker"); ok {
				s.Engine.BreakerFailures = int(n)
			}
		}
		if a := content.Attributes["deny_cache"]; a != nil {
			if n, ok := l.countIn(a, 0, maxDenyCache, "deny_cache is how many denials the engine remembers (0: none)"); ok {
				s.Engine.DenyCache = int(n)
			}
		}
		if a := content.Attributes["instances"]; a != nil {
			if n, ok := l.countIn(a, 1, maxInstances, "instances is how many instances of the service share the simulated Redis, each with its own breaker, deny cache and on_error = \"local\" fallback, requests going to them in turn"); ok {
				s.Engine.Instances = int(n)
			}
		}
		if a := content.Attributes["max_memory"]; a != nil {
			e, d := l.env.compile(a.Expr, constScope, cty.DynamicPseudoType)
			l.add(d...)
			switch {
			case e == nil:
			case e.kind != kindConst || e.val.IsNull():
				l.add(errorf(a.Expr.Range(), "Invalid max_memory", "max_memory must be a constant: the bytes the simulated Redis may hold, such as max_memory = \"64MiB\"."))
			default:
				if n, err := bytesValue(e.val); err != nil {
					l.add(errorf(a.Expr.Range(), "Invalid max_memory", "%s %s", err, byteForms))
				} else {
					s.Engine.MaxMemory = n
				}
			}
		}
		if a := content.Attributes["eviction"]; a != nil {
			if v, ok := l.constString(a); ok {
				if _, err := luahost.ParseEvictionPolicy(v); err != nil {
					l.add(errorf(a.Expr.Range(), "Invalid eviction", "%s. Use one of Redis's maxmemory policies: %s.", err, strings.Join(evictionPolicies, ", ")))
				} else {
					s.Engine.Eviction = strings.ToLower(v)
				}
				if content.Attributes["max_memory"] == nil {
					l.add(warnf(a.NameRange, "Eviction without max_memory", "eviction only matters once the keys fill max_memory, and scenario %q sets none. Add max_memory = \"64MiB\", or remove eviction.", s.Name))
				}
			}
		}
		if !slices.ContainsFunc(s.Faults, failsCalls) {
			for _, name := range []string{"deadline", "breaker_failures", "breaker_cooldown"} {
				if a := content.Attributes[name]; a != nil {
					l.add(warnf(a.NameRange, "Engine setting without a fault", "%s only matters while Redis fails, and scenario %q declares no fault that fails calls. Add one, such as fault { kind = \"stall\", at = \"1m\", for = \"30s\" }, or remove %s.", name, s.Name, name))
				}
			}
		}
	}
}

// evictionPolicies are the maxmemory policies a scenario's engine block may name.
var evictionPolicies = []string{"noeviction", "allkeys-lru", "volatile-lru", "allkeys-random", "volatile-random", "volatile-ttl"}

// failsCalls reports whether f makes Redis calls fail (every kind but a flush).
func failsCalls(f *Fault) bool { return f.Kind != FaultFlush }

// countIn compiles a constant whole number attribute within [lo, hi].
func (l *loader) countIn(a *hcl.Attribute, lo, hi int64, what string) (int64, bool) {
	e, d := l.env.compile(a.Expr, constScope, cty.Number)
	l.add(d...)
	if e == nil || e.kind != kindConst || e.val.IsNull() {
		return 0, false
	}
	n, err := asInt(e.val)
	if err == nil && (n < lo || n > hi) {
		err = fmt.Errorf("%d is out of range", n)
	}
	if err != nil {
		l.add(errorf(a.Expr.Range(), "Invalid "+a.Name, "%s, from %d to %d: %s.", what, lo, hi, err))
		return 0, false
	}
	return n, true
}

// fmtUS formats a duration as policies write it.
func fmtUS(d time.Duration) string { return formatDuration(d.Microseconds()) }
