package main

import (
	"bufio"
	"fmt"
	"runtime"

	"github.com/rlctl/rlctl/internal/cli"
	"github.com/rlctl/rlctl/internal/progress"
	"github.com/rlctl/rlctl/verify"
)

var cmdVerify = &command{
	name:  "verify",
	args:  "[-duration D] [-seed N] [-budget N] [-clients N] [-j N] [-strict] [-json] [-v] FILE|DIR...",
	short: "prove every rule's properties on adversarial traffic",
	long: `Verify proves the properties of every rule of every policy, built-in algorithms and
plugins alike, by running the engine's real Lua script in process on a virtual clock
against generated adversarial traffic: bursts at one instant and straddling window
boundaries, retries exactly at (and just before) the advised retry-after, costs of 0, 1,
the capacity and more, idle gaps past every TTL, and concurrent clients.

Per rule (for each parameter value its expressions take in the files' scenarios):
  errors             no request makes the script raise an error (a plugin's Lua runtime
                     error): the request that does, at the plugin's file:line; the other
                     properties are checked on the requests before it
  limit              the algorithm's guarantee in every interval (sliding_log: at most
                     limit in any window; buckets and gcra: capacity plus what refills;
                     leases: at most max held). A plugin is held to the guarantee block it
                     declares, exact unless it declares a bound; nothing is inferred from
                     parameter names. Beyond the exact statement but within a declared
                     bound (fixed_window's and sliding_window's 2×) is a WARN, or a note
                     when the rule says accept_bound = true; beyond the bound fails.
  retry-after        sound (nothing passes earlier) and sufficient (the same request
                     passes then), -1 exactly when the cost can never fit
  denials            an exact guarantee admits too: nothing is denied that the statement
                     allows
  remaining          what is left: a request of that cost passes now, one unit more does not
  partial            a partial admission (engine.AllowAtMost) of more is granted exactly
                     remaining
  reset-after        when the key is back to empty, late only by the declared precision
  atomicity          a denied request and a peek change nothing
  expiry             no key outlives the last reset-after
  determinism        a trace run twice gives identical replies and state
  client clocks      with clock = "client": clients whose clocks are up to the policy's
                     clock_skew apart and step back and forth; the limit holds on the true
                     clock (widened by the skew), each client's advice on its own
  race (redis.call)  the algorithm's commands run as separate commands by concurrent
                     clients: the interleaving that breaks the limit (a note: this is why
                     each request is one script call)
  penalty box        with block_for: a denial blocks the key exactly until the block ends
                     (never a microsecond short or long), retry-after the block's end,
                     repeat offences escalating as block_max says (docs/runtime.md); the
                     rule's other properties are checked without its box
Per policy:
  atomicity          allowed exactly when every enforcing rule allows; a denied request
                     changes no rule's key
  race               concurrent clients' requests, each one atomic call, in random and
                     adversarial orders, never exceed any rule's limit
  race (cluster)     the same when each rule is its own call with refunds on a later
                     denial (Redis Cluster without a shard key)

See 'rlctl help plugins' and docs/plugins.md for writing a plugin that passes.

Every failure comes with a shrunk counterexample: the few requests, with their exact
times, that break the property. A script error is a failure of the property that met it,
and verify goes on with the other rules and policies. The same files, seed and budget
give the same output, whatever -j is.

On a terminal, a run that takes more than two seconds shows how far it has got on one
line of stderr (checks done of all, script calls so far), erased when it ends.

With -json the findings are one JSON object, "schema": 1 (see the verify package's
documentation): seed, budget, calls, and results, each with policy, rule, algorithm,
params, limit (in words: "20/h, burst 5"), property, status (pass, skip, note, warn, fail), statement, detail, calls, error
(a script error at its file:line) and counterexample {original, unit, steps: [{at_ns,
client, request, result, mark}]}. If verify cannot run at all, the object has "error"
and no results; for invalid policies, "diagnostics" too, as 'rlctl validate -json' gives
them.

Flags:
  -budget N     requests generated per rule, and again for its races (default 3000)
  -duration D   virtual time each generated trace covers, such as 10m (default: eight
                of the rule's windows)
  -seed N       the seed of the generated traffic (default 1)
  -clients N    the most concurrent clients in a race (default 6)
  -j N          checks run at once, each on its own in-process hosts (default: the
                cores Go may use, GOMAXPROCS); the output is the same for every N
  -strict       treat warnings (documented weaknesses) as failures; a rule with
                accept_bound = true reports its algorithm's declared bound as a note
  -json         print the findings as JSON
  -v            print the statement of every property checked

Exit status: 0 every property holds (warnings and notes allowed), 1 a property fails
(or, with -strict, a warning), or invalid policies, 2 usage error.
`,
	run: runVerify,
}

func runVerify(e *env, args []string) error {
	batchGC()
	fs := flags("verify")
	budget := fs.Int("budget", verify.DefaultBudget, "")
	duration := fs.String("duration", "", "")
	seed := fs.Int64("seed", verify.DefaultSeed, "")
	clients := fs.Int("clients", verify.DefaultClients, "")
	jobs := fs.Int("j", runtime.GOMAXPROCS(0), "")
	strict := fs.Bool("strict", false, "")
	asJSON := fs.Bool("json", false, "")
	verbose := fs.Bool("v", false, "")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errUsage
	}
	opts := []verify.Option{verify.WithSeed(*seed), verify.WithBudget(*budget), verify.WithClients(*clients), verify.WithWorkers(*jobs)}
	switch {
	case *jobs < 1:
		fmt.Fprintf(e.stderr, "rlctl: error: -j %d: want at least 1 check at once\n", *jobs)
		return errUsage
	case *budget < 1:
		fmt.Fprintf(e.stderr, "rlctl: error: -budget %d: want at least 1 request\n", *budget)
		return errUsage
	case *clients < 2:
		fmt.Fprintf(e.stderr, "rlctl: error: -clients %d: a race needs at least 2\n", *clients)
		return errUsage
	}
	if *duration != "" {
		d, err := cli.Duration(*duration)
		if err != nil {
			fmt.Fprintf(e.stderr, "rlctl: error: -duration %v\n", err)
			return errUsage
		}
		opts = append(opts, verify.WithDuration(d))
	}
	cfg, diags := load(e, fs.Args())
	if cfg == nil {
		if *asJSON {
			// The JSON reader gets an object of the findings' schema that says why.
			if err := cli.WriteLoadErrorJSON(e.stdout, diags, map[string]any{"schema": verify.Schema, "seed": *seed, "budget": *budget, "results": []any{}}); err != nil {
				return err
			}
		}
		return errFailed
	}
	if e.color {
		line := progress.New(e.stderr, e.now)
		stop := line.Run()
		opts = append(opts, verify.WithCheckProgress(func(p verify.CheckProgress) { line.Set(checkStatus(p)) }))
		defer stop()
	}
	f, err := verify.Check(cfg, opts...)
	if err != nil {
		if !*asJSON {
			return err
		}
		// The JSON reader gets an object of the same schema that says why.
		f = cli.ErrorFindings(*seed, *budget, err)
	}
	out := bufio.NewWriter(e.stdout)
	if *asJSON {
		b, err := f.JSON()
		if err != nil {
			return err
		}
		out.Write(b)
	} else if err := f.WriteText(out, *verbose); err != nil {
		return err
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if f.Error != "" {
		fmt.Fprintf(e.stderr, "rlctl: error: %s\n", f.Error)
		return errFailed
	}
	fails, warns := f.Count(verify.Fail), f.Count(verify.Warn)
	if msg := cli.Verdict(fails, warns, *strict); msg != "" {
		fmt.Fprintf(e.stderr, "rlctl: error: %s\n", msg)
		if *strict && warns > 0 {
			fmt.Fprintln(e.stderr, "rlctl: hint: "+cli.StrictHint)
		}
		return errFailed
	}
	return nil
}

// checkStatus is verify's progress line: "rlctl: verifying: 9 of 28 checks done, 412345
// script calls".
func checkStatus(p verify.CheckProgress) string {
	return fmt.Sprintf("rlctl: verifying: %d of %d checks done, %d script calls", p.Done, p.Total, p.Calls)
}
