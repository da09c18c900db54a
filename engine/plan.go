package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

// Plan is a compiled policy set: the engine script that runs it, with every rule compiled
// into it, and the policies in the order requests are matched against them. A Plan is
// immutable and safe for concurrent use.
type Plan struct {
	script *algorithms.Script
	// scriptArgs are script's names as command arguments (see Redis.call).
	scriptArgs scriptArgs
	policies   []*dsl.Policy
	// compiled is each rule's compiled form in script.
	compiled map[*dsl.Rule]*algorithms.Compiled
	// tags is each rule's AlgorithmTag, the part of its keys naming its algorithm.
	tags map[*dsl.Rule]string
	// windows holds RuleResult.Window of the rules whose parameters are constant, so a
	// decision does not evaluate a guarantee (for a plugin, HCL expressions) per request.
	windows map[*dsl.Rule]time.Duration
	// spans holds each calendar rule's latest periods (dsl.Rule.Calendar).
	spans map[*dsl.Rule]*spans
	// rules is the number of rules of all policies.
	rules int
	// leased: some rule serves its keys from quota leases (dsl.Rule.LeaseSize).
	leased bool
	// replaces: some rule or unlimited block replaces rules (dsl.Rule.Replaces,
	// dsl.Unlimited.Replaces).
	replaces bool
}

// Compile turns a loaded, validated configuration into a Plan: it assembles the engine
// script from the built-in algorithms, the configuration's plugins and every rule, each
// compiled in with its algorithm, shadow flag and constant parameters, so a call sends only
// what varies per request (see algorithms.Compiled).
func Compile(cfg *dsl.Config) (*Plan, error) {
	algs := append(append([]*algorithms.Algorithm(nil), algorithms.Builtin()...), cfg.Plugins...)
	var rules []*algorithms.Compiled
	var of []*dsl.Rule
	replaces, leased := false, false
	for _, p := range cfg.Policies {
		for _, r := range p.Rules {
			if !slices.Contains(algs, r.Algorithm) {
				return nil, fmt.Errorf("engine: policy %q rule %q: algorithm %q is not in the script", p.Name, r.Name, r.Algorithm.Name)
			}
			rules = append(rules, compiledRule(r))
			of = append(of, r)
			replaces = replaces || len(r.Replaces) > 0
			leased = leased || r.LeaseSize > 0
		}
		for _, u := range p.Unlimited {
			replaces = replaces || len(u.Replaces) > 0
		}
	}
	s, err := algorithms.Assemble(algs, rules...)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	p := &Plan{script: s, scriptArgs: argsOf(s), policies: cfg.Policies, compiled: map[*dsl.Rule]*algorithms.Compiled{}, tags: map[*dsl.Rule]string{}, windows: map[*dsl.Rule]time.Duration{}, spans: map[*dsl.Rule]*spans{}, rules: len(of), replaces: replaces, leased: leased}
	for i, r := range of {
		p.compiled[r] = s.Rules[i]
		p.tags[r] = AlgorithmTag(r.Algorithm)
		if r.Calendar != nil {
			// A calendar window's key holds a period's first instant where a window of a
			// duration holds its index: a layout of its own (see AlgorithmTag).
			p.tags[r] += "_" + r.Calendar.Unit.String()
			p.spans[r] = &spans{period: *r.Calendar}
		}
		if w, ok := constWire(r); ok {
			p.windows[r] = window(&algorithms.Rule{Algorithm: r.Algorithm, Params: w})
		}
	}
	return p, nil
}

// compiledRule returns r as a rule to compile: its constants, and its per-request
// parameters and lease left to each call.
func compiledRule(r *dsl.Rule) *algorithms.Compiled {
	c := &algorithms.Compiled{Algorithm: r.Algorithm, Shadow: r.Shadow, Box: r.Box, Overridable: r.Overridable, Lists: r.Lists, Calendar: r.Calendar != nil}
	for _, prm := range r.Params {
		if prm.Const != nil && prm.Kind != algorithms.Lease {
			c.Params = append(c.Params, prm.Const...)
			continue
		}
		slots := 1
		if prm.Kind == algorithms.Rate {
			slots = 2
		}
		for range slots {
			c.Vary = append(c.Vary, len(c.Params))
			c.Params = append(c.Params, 0)
		}
	}
	return c
}

// Compiled returns the compiled form of rule r, one of the plan's rules, in the plan's
// script; nil for a rule of another configuration. Calls made for r with it run exactly
// what the engine sends for r.
func (p *Plan) Compiled(r *dsl.Rule) *algorithms.Compiled { return p.compiled[r] }

// constWire returns r's wire parameters when every one is a constant.
func constWire(r *dsl.Rule) ([]int64, bool) {
	var w []int64
	for _, prm := range r.Params {
		if prm.Const == nil {
			return nil, false
		}
		w = append(w, prm.Const...)
	}
	return w, len(w) == r.Algorithm.WireLen()
}

// Leased reports whether some rule of the plan serves its keys from quota leases
// (dsl.Rule.LeaseSize).
func (p *Plan) Leased() bool { return p.leased }

// Script returns the engine script the plan runs.
func (p *Plan) Script() *algorithms.Script { return p.script }

// Policies returns the plan's policies in match order. The slice is shared: do not modify.
func (p *Plan) Policies() []*dsl.Policy { return p.policies }
