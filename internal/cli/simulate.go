package cli

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/verify"
)

// Scenarios returns the scenarios rlctl simulate runs: the one called name, or, when name
// is "", every scenario of cfg. With a trace and no name it returns one nil scenario:
// replay against every policy. A name cfg does not declare, or no name and no scenario
// and no trace, is an *Error whose hint says what to do.
func Scenarios(cfg *dsl.Config, name string, trace bool) ([]*dsl.Scenario, error) {
	if name != "" {
		var names []string
		for _, s := range cfg.Scenarios {
			if s.Name == name {
				return []*dsl.Scenario{s}, nil
			}
			names = append(names, s.Name)
		}
		e := &Error{Msg: fmt.Sprintf("no scenario named %q", name)}
		if len(names) > 0 {
			e.Hint = "the scenarios are " + strings.Join(names, ", ")
		}
		return nil, e
	}
	if trace {
		return []*dsl.Scenario{nil}, nil
	}
	if len(cfg.Scenarios) == 0 {
		return nil, &Error{
			Msg:  "the files declare no scenario",
			Hint: "add a scenario block (see 'rlctl help scenario'), or replay recorded traffic with -trace FILE",
		}
	}
	return cfg.Scenarios, nil
}

// SimulateAll runs verify.Simulate on each of scenarios with opts, on up to jobs
// goroutines, and returns their reports in order, or the error of the first scenario, in
// order, that failed: `simulating scenario "x": …` ("the trace" for a nil scenario).
// Each scenario is one Simulate, with its own engine, host and clock, so the reports are
// the same for every jobs; with jobs 1 (or less) they run on the caller's goroutine, one
// after another. progress, when not nil, is called as WithProgress's f with the
// index of the scenario; calls for different scenarios may overlap.
func SimulateAll(cfg *dsl.Config, scenarios []*dsl.Scenario, opts []verify.Option, jobs int, progress func(i int, done, total time.Duration)) ([]*verify.Report, error) {
	reports := make([]*verify.Report, len(scenarios))
	errs := make([]error, len(scenarios))
	// Each scenario's probes share what cores the scenarios running at once leave.
	o := append(opts[:len(opts):len(opts)], verify.WithWorkers(max(1, jobs/max(1, len(scenarios)))))
	simulate := func(i int) {
		o := o
		if progress != nil {
			o = append(o[:len(o):len(o)], verify.WithProgress(func(done, total time.Duration) { progress(i, done, total) }))
		}
		reports[i], errs[i] = verify.Simulate(cfg, scenarios[i], o...)
	}
	if jobs <= 1 {
		for i := range scenarios {
			simulate(i)
		}
	} else {
		next := make(chan int)
		var wg sync.WaitGroup
		for range min(jobs, len(scenarios)) {
			wg.Go(func() {
				for i := range next {
					simulate(i)
				}
			})
		}
		for i := range scenarios {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	for i, err := range errs {
		if err != nil {
			name := "the trace"
			if s := scenarios[i]; s != nil {
				name = fmt.Sprintf("scenario %q", s.Name)
			}
			return nil, fmt.Errorf("simulating %s: %w", name, err)
		}
	}
	return reports, nil
}
