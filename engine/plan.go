package engine

import (
	"fmt"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

// Plan is a compiled policy set: the engine script that runs it and the policies in the
// order requests are matched against them. A Plan is immutable and safe for concurrent use.
type Plan struct {
	script   *algorithms.Script
	policies []*dsl.Policy
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
	return &Plan{script: s, policies: cfg.Policies}, nil
}

// Script returns the engine script the plan runs.
func (p *Plan) Script() *algorithms.Script { return p.script }

// Policies returns the plan's policies in match order. The slice is shared: do not modify.
func (p *Plan) Policies() []*dsl.Policy { return p.policies }
