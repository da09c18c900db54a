package engine

import (
	"fmt"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

// Plan is a compiled policy set: the engine script that runs it and the policies in the
// order requests are matched against them. A Plan is immutable and safe for concurrent use.
type Plan struct {
	script   *algorithms.Script
	policies []*dsl.Policy
	// windows holds RuleResult.Window of the rules whose parameters are constant, so a
	// decision does not evaluate a guarantee (for a plugin, HCL expressions) per request.
	windows map[*dsl.Rule]time.Duration
}

// Compile turns a loaded, validated configuration into a Plan: it assembles the engine
// script from the built-in algorithms and the configuration's plugins.
func Compile(cfg *dsl.Config) (*Plan, error) {
	s := algorithms.Default()
	if len(cfg.Plugins) > 0 {
		algs := append(append([]*algorithms.Algorithm(nil), algorithms.Builtin()...), cfg.Plugins...)
		var err error
		if s, err = algorithms.Assemble(algs); err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
	}
	for _, p := range cfg.Policies {
		for _, r := range p.Rules {
			if _, ok := s.Algorithm(r.Algorithm.Name); !ok {
				return nil, fmt.Errorf("engine: policy %q rule %q: algorithm %q is not in the script", p.Name, r.Name, r.Algorithm.Name)
			}
		}
	}
	p := &Plan{script: s, policies: cfg.Policies, windows: map[*dsl.Rule]time.Duration{}}
	for _, pol := range cfg.Policies {
		for _, r := range pol.Rules {
			if w, ok := constWire(r); ok {
				p.windows[r] = window(&algorithms.Rule{Algorithm: r.Algorithm, Params: w})
			}
		}
	}
	return p, nil
}

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

// Script returns the engine script the plan runs.
func (p *Plan) Script() *algorithms.Script { return p.script }

// Policies returns the plan's policies in match order. The slice is shared: do not modify.
func (p *Plan) Policies() []*dsl.Policy { return p.policies }
