package playground

import (
	"fmt"
	"strings"

	"github.com/rlctl/rlctl/internal/cli"
	"github.com/rlctl/rlctl/verify"
)

// SimulateOptions are rlctl simulate's -scenario and -seed.
type SimulateOptions struct {
	Scenario string `json:"scenario"` // the one scenario to run; "" for every scenario
	// Seed, when not nil, replaces every scenario's seed; nil keeps each scenario's own
	// (seed = N in its block, 1 by default), as rlctl simulate does without -seed.
	Seed *int64 `json:"seed"`
}

// ScenarioReport is one scenario's report.
type ScenarioReport struct {
	Scenario string `json:"scenario"`
	Text     string `json:"text"`   // verify.Report.WriteText: what rlctl simulate prints for it
	SVG      string `json:"svg"`    // verify.Report.WriteSVG: what rlctl simulate -plot draws
	Failed   bool   `json:"failed"` // an expectation failed: rlctl simulate -check exits 1
}

// SimulateResult is what Simulate did.
type SimulateResult struct {
	Reports []ScenarioReport `json:"reports"` // in the order of the files' scenarios
	// Text is what rlctl simulate prints: the diagnostics, the reports one after another
	// with a blank line between, or why it could not run.
	Text        string       `json:"text"`
	Diagnostics []Diagnostic `json:"diagnostics"`
	// Error says why nothing was simulated, as rlctl simulate says it after "rlctl:
	// error: ": the files have errors ("2 problems"), there is no such scenario, a
	// request failed, or the options are wrong; "" when the reports are there.
	Error string `json:"error,omitempty"`
}

// Simulate runs the scenarios of files through the engine on a virtual clock, as rlctl
// simulate does: the same files and seed give the same reports, byte for byte.
func Simulate(files map[string]string, opts SimulateOptions) (r SimulateResult) {
	r = SimulateResult{Reports: []ScenarioReport{}, Diagnostics: []Diagnostic{}}
	var vopts []verify.Option
	if opts.Seed != nil {
		if *opts.Seed < 0 {
			r.Error = fmt.Sprintf("seed %d is negative", *opts.Seed)
			return r
		}
		vopts = append(vopts, verify.WithSeed(*opts.Seed))
	}
	var text strings.Builder
	// Every return below has written what rlctl prints to text.
	defer func() { r.Text = text.String() }()
	cfg, ds, problems := load(&text, files)
	if r.Diagnostics, r.Error = ds, problems; problems != "" {
		return r
	}
	scenarios, err := cli.Scenarios(cfg, opts.Scenario, false)
	if err != nil {
		cli.WriteError(&text, err)
		r.Error = err.Error()
		return r
	}
	reports, err := cli.SimulateAll(cfg, scenarios, vopts, 1, nil)
	if err != nil {
		cli.WriteError(&text, err)
		r.Error = err.Error()
		return r
	}
	for i, rep := range reports {
		var t, svg strings.Builder
		_ = rep.WriteText(&t) // a strings.Builder does not fail
		_ = rep.WriteSVG(&svg)
		if i > 0 {
			text.WriteString("\n")
		}
		text.WriteString(t.String())
		r.Reports = append(r.Reports, ScenarioReport{Scenario: rep.Scenario, Text: t.String(), SVG: svg.String(), Failed: len(rep.Failed()) > 0})
	}
	return r
}
