package playground

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rlctl/rlctl/internal/cli"
	"github.com/rlctl/rlctl/verify"
)

// VerifyOptions are rlctl verify's -seed, -budget and -duration; the zero value is its
// defaults.
type VerifyOptions struct {
	Seed   *int64 `json:"seed"`   // the traffic's seed; nil for verify.DefaultSeed (1)
	Budget int    `json:"budget"` // requests per rule; 0 for verify.DefaultBudget (3000)
	// Duration is the virtual time each trace covers, such as "10m"; "" for eight of the
	// rule's windows.
	Duration string `json:"duration"`
}

// VerifyResult is what Verify found.
type VerifyResult struct {
	// Text is what rlctl verify prints: the diagnostics, the findings
	// (verify.Findings.WriteText) and, when a property fails, "rlctl: error: N properties
	// failed"; or why it could not run.
	Text string `json:"text"`
	// Findings is what rlctl verify -json prints (verify.Findings.JSON: "schema": 1, seed,
	// budget, calls, results); its "error" says why verify could not run. null when the
	// files have errors or the options are wrong.
	Findings    json.RawMessage `json:"findings"`
	Fails       int             `json:"fails"` // properties that fail: rlctl verify exits 1
	Warns       int             `json:"warns"` // documented weaknesses: rlctl verify -strict exits 1
	Diagnostics []Diagnostic    `json:"diagnostics"`
	// Error says why nothing was verified, as rlctl verify says it after "rlctl: error: ":
	// the files have errors ("2 problems"), the options are wrong, or verify cannot check
	// the configuration; "" when the findings are there, failures or not.
	Error string `json:"error,omitempty"`
}

// Verify proves the properties of every rule of every policy in files, as rlctl verify
// does with the same seed, budget and duration (and its default -clients), and gives
// the same findings. It runs every check on one goroutine, after another (as rlctl
// verify -j 1): in a browser, Go has one thread. progress, when not nil, is called now
// and then with the checks done and their total, last with done == total; the calls
// never overlap.
func Verify(files map[string]string, opts VerifyOptions, progress func(done, total int)) (r VerifyResult) {
	r = VerifyResult{Diagnostics: []Diagnostic{}}
	seed, budget := int64(verify.DefaultSeed), verify.DefaultBudget
	if opts.Seed != nil {
		seed = *opts.Seed
	}
	switch {
	case opts.Budget < 0:
		r.Error = fmt.Sprintf("budget %d: want at least 1 request", opts.Budget)
		return r
	case opts.Budget > 0:
		budget = opts.Budget
	}
	vopts := []verify.Option{verify.WithSeed(seed), verify.WithBudget(budget), verify.WithClients(verify.DefaultClients), verify.WithWorkers(1)}
	if opts.Duration != "" {
		d, err := cli.Duration(opts.Duration)
		if err != nil {
			r.Error = "duration " + err.Error()
			return r
		}
		vopts = append(vopts, verify.WithDuration(d))
	}
	if progress != nil {
		vopts = append(vopts, verify.WithCheckProgress(func(p verify.CheckProgress) { progress(p.Done, p.Total) }))
	}
	var text strings.Builder
	// Every return below has written what rlctl prints to text.
	defer func() { r.Text = text.String() }()
	cfg, ds, problems := load(&text, files)
	if r.Diagnostics, r.Error = ds, problems; problems != "" {
		return r
	}
	f, err := verify.Check(cfg, vopts...)
	if err != nil {
		cli.WriteError(&text, err)
		r.Error = err.Error()
		f = cli.ErrorFindings(seed, budget, err)
	} else {
		_ = f.WriteText(&text, false) // a strings.Builder does not fail
	}
	if r.Findings, err = f.JSON(); err != nil {
		r.Error = err.Error()
	}
	r.Fails, r.Warns = f.Count(verify.Fail), f.Count(verify.Warn)
	if msg := cli.Verdict(r.Fails, r.Warns, false); msg != "" {
		cli.WriteError(&text, errors.New(msg))
	}
	return r
}
