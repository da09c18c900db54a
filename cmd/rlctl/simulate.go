package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/internal/cli"
	"github.com/rlctl/rlctl/internal/progress"
	"github.com/rlctl/rlctl/verify"
)

var cmdSimulate = &command{
	name:  "simulate",
	args:  "[-scenario NAME] [-seed N] [-trace FILE] [-j N] [-json] [-check] [-plot OUT.svg] FILE|DIR...",
	short: "run a policy's scenarios on a virtual clock and report",
	long: `Simulate runs scenarios through the engine's real Lua script, in process, on a virtual
clock: no Redis, no waiting. Each scenario's traffic is generated from its seed, so the
same files and seed always give the same report.

For each scenario it reports, per traffic source, the requests sent, allowed and denied and
which rule denied them; per rule, its keys, denials, the worst key (the most allowed in
one window, or in flight, against the limit) and how often retrying at the advised
retry-after would have passed; whether each expectation holds; and a timeline of allowed
and denied requests.

A scenario's fault blocks make Redis fail on the virtual clock: "stall" (calls time out
at the engine's deadline; the server runs them when the stall ends), "refuse", "error"
(every call gets an error reply), "flush" (every key lost) or "restart" (refused, then
back with no keys). The engine then runs with the scenario's engine block: deadline,
breaker_failures, breaker_cooldown, deny_cache and instances (defaults 50ms, 5, 1s, none
and 1; instances are engines of their own sharing the simulated Redis, requests going to
them in turn), and each policy's on_error decides while Redis fails. The report adds, per fault and traffic
source, how requests were decided (redis, local, fail-open, fail-deny, cache), how many
timed out or met the open breaker, how long after the fault requests were still decided
without Redis, and what the calls a stalled server ran late did: a late call that charged
is a phantom charge. Expectations assert it with allowed_during_fault, denied_during_fault,
degraded, decided_by, timed_out, breaker_open, recovered_within and phantom_charges (see
the dsl package documentation).

The engine block's max_memory (such as "64MiB") gives the simulated Redis a maxmemory, and
eviction its maxmemory-policy: noeviction (the default: writes past it are refused, and
on_error decides), allkeys-lru, volatile-lru, allkeys-random, volatile-random or
volatile-ttl (keys are evicted: each a client whose history the limiter forgot, so a
botnet of many addresses gets through). The report says how many keys were evicted and
what the keys held at the end.

Flags:
  -scenario NAME  run only this scenario (default: every scenario in the files)
  -seed N         replace the scenarios' seed
  -trace FILE     replay recorded traffic (JSON Lines or CSV, see below) instead of the
                  scenario's; with -scenario, that scenario's policy and expectations
                  apply, otherwise every policy in the files does
  -j N            cores to use (default: the cores Go may use, GOMAXPROCS): up to N
                  scenarios at once; a scenario's requests meet one Redis, one breaker
                  and one deny cache in order, on one core, and the cores its share of
                  N leaves run its retry-after probes beside it; the reports are the
                  same for every N
  -json           print each report as one line of JSON instead of text
  -check          exit 1 when an expectation fails (without it, simulate reports failed
                  expectations, says so on stderr and exits 0: trying a policy whose
                  expectations do not hold yet is its everyday use; CI passes -check)
  -plot OUT.svg   draw allowed and denied over time as an SVG image, and under each
                  source that was denied its busiest key's count against the limit (with
                  several scenarios, OUT-<scenario>.svg each)

A trace has one request per line: JSON Lines such as
  {"t": "2026-03-01T12:00:00.25Z", "source": "bot", "attrs": {"ip": "203.0.113.7"}}
  {"t": "1.5s", "attrs": {"ip": "198.51.100.4", "path": "/login"}}
(t: an RFC 3339 timestamp or an offset; source: the traffic it counts as), or CSV with a
header row, a t, time, timestamp or ts column, and one column per attribute.

On a terminal, a run that takes more than two seconds shows how far it has got on one
line of stderr (virtual time simulated of the scenarios' total), erased when it ends.

Exit status: 0 done, 1 invalid policies, a failed run, or (with -check) a failed
expectation, 2 usage error.
`,
	run: runSimulate,
}

func runSimulate(e *env, args []string) error {
	batchGC()
	fs := flags("simulate")
	scenario := fs.String("scenario", "", "")
	seed := fs.Int64("seed", 0, "")
	tracePath := fs.String("trace", "", "")
	asJSON := fs.Bool("json", false, "")
	check := fs.Bool("check", false, "")
	plot := fs.String("plot", "", "")
	jobs := fs.Int("j", runtime.GOMAXPROCS(0), "")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errUsage
	}
	if *jobs < 1 {
		fmt.Fprintf(e.stderr, "rlctl: error: -j %d: want at least 1 scenario at once\n", *jobs)
		return errUsage
	}
	var opts []verify.Option
	if isSet(fs, "seed") {
		if *seed < 0 {
			fmt.Fprintf(e.stderr, "rlctl: error: -seed %d is negative\n", *seed)
			return errUsage
		}
		opts = append(opts, verify.WithSeed(*seed))
	}
	cfg, diags := load(e, fs.Args())
	if cfg == nil {
		if *asJSON {
			if err := cli.WriteLoadErrorJSON(e.stdout, diags, nil); err != nil {
				return err
			}
		}
		return errFailed
	}
	if *tracePath != "" {
		tr, err := readTrace(*tracePath)
		if err != nil {
			return err
		}
		opts = append(opts, verify.WithTrace(tr))
	}
	scenarios, err := cli.Scenarios(cfg, *scenario, *tracePath != "")
	if err != nil {
		return err
	}
	var sp *simProgress
	if e.color {
		line := progress.New(e.stderr, e.now)
		stop := line.Run()
		defer stop()
		sp = newSimProgress(line, scenarios)
	}
	var progress func(i int, done, total time.Duration)
	if sp != nil {
		progress = sp.set
	}
	reports, err := cli.SimulateAll(cfg, scenarios, opts, *jobs, progress)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(e.stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for i, r := range reports {
		if *asJSON {
			if err := enc.Encode(r); err != nil {
				return err
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(out)
		}
		if err := r.WriteText(out); err != nil {
			return err
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if *plot != "" {
		for _, r := range reports {
			path := *plot
			if len(reports) > 1 {
				ext := filepath.Ext(path)
				path = strings.TrimSuffix(path, ext) + "-" + r.Scenario + ext
			}
			if err := writeOutput(path, r.WriteSVG); err != nil {
				return err
			}
		}
	}
	failed := 0
	for _, r := range reports {
		failed += len(r.Failed())
	}
	if failed > 0 && *check {
		fmt.Fprintf(e.stderr, "rlctl: error: %d %s failed\n", failed, cli.Plural(failed, "expectation", "expectations"))
		return errFailed
	}
	if failed > 0 {
		// Exploring a policy whose expectations do not hold yet is simulate's everyday
		// use; CI asks with -check.
		fmt.Fprintf(e.stderr, "rlctl: %d %s failed (exit status 0 without -check; use -check to fail on it, as in CI)\n", failed, cli.Plural(failed, "expectation", "expectations"))
	}
	return nil
}

// isSet reports whether flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func readTrace(path string) (*verify.Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return verify.ReadTrace(f, path)
}

// writeOutput writes a file through write, removing it when write fails.
func writeOutput(path string, write func(w io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// simProgress is simulate's progress line: how much virtual time the scenarios have
// simulated of their total.
type simProgress struct {
	line  *progress.Line
	names []string
	mu    sync.Mutex
	done  []time.Duration
	total []time.Duration
}

func newSimProgress(line *progress.Line, scenarios []*dsl.Scenario) *simProgress {
	sp := &simProgress{line: line, done: make([]time.Duration, len(scenarios)), total: make([]time.Duration, len(scenarios))}
	for _, s := range scenarios {
		name := "trace"
		if s != nil {
			name = s.Name
		}
		sp.names = append(sp.names, name)
	}
	return sp
}

// set records that scenario i has simulated done of total, and updates the line.
func (sp *simProgress) set(i int, done, total time.Duration) {
	sp.mu.Lock()
	sp.done[i], sp.total[i] = done, total
	status := simStatus(sp.names, sp.done, sp.total)
	sp.mu.Unlock()
	sp.line.Set(status)
}

// simStatus is the progress line of scenarios that have simulated done of total (a total
// of 0: not started): "rlctl: simulating login_stuffing:  42% of 5m0s", or for several
// "rlctl: simulating 3 scenarios: 1 done,  42% of 15m0s".
func simStatus(names []string, done, total []time.Duration) string {
	var d, t time.Duration
	finished := 0
	for i := range names {
		d, t = d+done[i], t+total[i]
		if total[i] > 0 && done[i] >= total[i] {
			finished++
		}
	}
	p := 100.0
	if t > 0 {
		p = 100 * float64(d) / float64(t)
	}
	if len(names) == 1 {
		return fmt.Sprintf("rlctl: simulating %s: %3.0f%% of %s", names[0], p, t)
	}
	return fmt.Sprintf("rlctl: simulating %d scenarios: %d done, %3.0f%% of %s", len(names), finished, p, t)
}
