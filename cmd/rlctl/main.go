// Command rlctl checks, formats, explains, simulates, verifies and serves rlctl rate-limit policies,
// and serves a browser playground for them.
//
//	rlctl init [-force] [FILE]
//	rlctl validate [-json] FILE|DIR...
//	rlctl fmt [-check] [-diff] FILE|DIR...
//	rlctl compile [-json] [-from OLD] FILE|DIR...
//	rlctl simulate [-scenario NAME] [-seed N] [-trace FILE] [-j N] [-json] [-check] [-plot OUT.svg] FILE|DIR...
//	rlctl verify [-duration D] [-seed N] [-budget N] [-clients N] [-j N] [-strict] [-json] [-v] FILE|DIR...
//	rlctl bench -redis ADDR [-n N] [-c C] [-duration D] [-keys K] [-policy NAME] [-deadline D] [-attr NAME=VALUE]... FILE|DIR...
//	rlctl override set|get|clear|list -redis ADDR [-redis-type TYPE] [-rule POLICY.RULE] [-attr NAME=VALUE]... [-set NAME=VALUE]... [-for D | -until TIME] FILE|DIR...
//	rlctl list add|remove|get|show -redis ADDR [-redis-type TYPE] [-list NAME] [-attr NAME=VALUE]... FILE|DIR...
//	rlctl inspect -redis ADDR [-redis-type TYPE] -attr NAME=VALUE... FILE|DIR...
//	rlctl serve [-grpc ADDR] [-http ADDR] [-admin ADDR] [-tls-cert FILE -tls-key FILE [-tls-client-ca FILE]] [-auth-tokens FILE] [-max-conns N] [-redis URL [-redis-type TYPE]] [-redis-tls-ca FILE] [-redis-tls-cert FILE -redis-tls-key FILE] [-timeout D] [-max-memory SIZE] [-drain D] [-watch=false] [-allow-removal] [-headers MODE [-legacy-header-names NAMES]] [-no-headers] [-shadow-mode] [-near-limit-ratio F] [-xds HOST:PORT [-xds-node ID] [-xds-tls-ca FILE] [-xds-tls-cert FILE -xds-tls-key FILE] [-merge-domains]] [-log-level LEVEL] [FILE|DIR...]
//	rlctl playground [-http ADDR] [-export DIR]
//	rlctl import [-o FILE] [-merge-domains] FILE.yaml...
//	rlctl version
//	rlctl help [COMMAND|TOPIC]
//
// Flags may come before, between or after the files; -- ends them. rlctl help COMMAND, or
// rlctl COMMAND -h, prints a command's help; rlctl help policy and rlctl help scenario
// summarize the policy language, rlctl help plugins is the guide to plugin algorithms;
// rlctl --version prints the version.
//
// Exit status: 0 success, 1 failure (invalid policies, unformatted files), 2 usage error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/rlctl/rlctl/internal/cli"
)

// command is one rlctl subcommand.
type command struct {
	name  string
	args  string // the usage line after the name
	short string // one line for the command list
	long  string // the help text
	run   func(env *env, args []string) error
}

// env is what a command reads and writes, so tests and main share one path.
type env struct {
	// stdin is what a command given "-" for its file reads (os.Stdin when nil).
	stdin          io.Reader
	stdout, stderr io.Writer
	color          bool // stderr is a terminal
	// now is the clock progress lines read (time.Now when nil).
	now func() time.Time
}

// errUsage makes main exit 2 after printing the command's usage.
var errUsage = errors.New("usage")

// errFailed makes main exit 1; the command has already said why.
var errFailed = errors.New("failed")

// errHelp makes main exit 0; the command's help has been printed (-h or -help).
var errHelp = errors.New("help")

var commands []*command

func init() {
	commands = []*command{cmdInit, cmdValidate, cmdFmt, cmdCompile, cmdSimulate, cmdVerify, cmdBench, cmdOverride, cmdList, cmdInspect, cmdServe, cmdPlayground, cmdImport, cmdVersion, cmdHelp}
}

func main() {
	os.Exit(run(os.Args[1:], &env{stdout: os.Stdout, stderr: os.Stderr, color: isTerminal(os.Stderr)}))
}

func run(args []string, e *env) int {
	if len(args) == 0 {
		usage(e.stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		args = append([]string{"help"}, args[1:]...)
	case "-version", "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(e.stderr, "rlctl: error: unknown command %q\n", args[0])
		if s := closest(args[0], false); s != "" {
			fmt.Fprintf(e.stderr, "rlctl: hint: did you mean %q?\n", s)
		}
		fmt.Fprintf(e.stderr, "rlctl: hint: run 'rlctl help' for the list of commands\n")
		return 2
	}
	err := c.run(e, args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(e.stderr, "usage: rlctl %s %s\nrun 'rlctl help %s' for details\n", c.name, c.args, c.name)
		return 2
	case errors.Is(err, errFailed):
		return 1
	case errors.Is(err, errHelp):
		return 0
	default:
		cli.WriteError(e.stderr, err)
		return 1
	}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// closest returns the command (or, with topicsToo, the command or help topic) name was
// probably meant to be: one it is a prefix of or that is a prefix of it, else the nearest
// within a few edits (a letter added, dropped, changed, or two swapped: "simualte" is
// simulate), or "".
func closest(name string, topicsToo bool) string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	if topicsToo {
		for _, t := range topics {
			names = append(names, t.name)
		}
	}
	for _, n := range names {
		if name != "" && (strings.HasPrefix(n, name) || strings.HasPrefix(name, n)) {
			return n
		}
	}
	best, bestD := "", max(2, len(name)/3)+1
	for _, n := range names {
		if d := edits(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// edits is the optimal string alignment distance between a and b: the fewest insertions,
// deletions, substitutions and swaps of adjacent bytes that turn a into b.
func edits(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "rlctl checks, formats, explains, simulates, verifies and serves rate-limit policies.\n\nusage: rlctl COMMAND [ARGS]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.short)
	}
	fmt.Fprintf(w, "\ntopics:\n")
	for _, t := range topics {
		fmt.Fprintf(w, "  %-10s %s\n", t.name, t.short)
	}
	fmt.Fprintf(w, "\nrun 'rlctl help COMMAND' for a command's flags and arguments, 'rlctl help TOPIC' for a topic\n")
}

// topic is a help text that is not a command's: rlctl help TOPIC prints it.
type topic struct {
	name  string
	short string // one line for the topic list
	text  string
}

var topics = []*topic{topicPolicy, topicScenario, topicPlugins}

var topicPolicy = &topic{
	name:  "policy",
	short: "the policy language: policy, rule, locals, budget, expressions",
	text: `Policies are HCL files (*.hcl, or *.hcl.json in HCL's JSON syntax). A directory
contributes its files, and names are global across the files of one run.

  locals {                         # constants, read as local.NAME
    tiers = { free = 60, pro = 600 }
  }

  budget {                         # optional: what a rule may cost Redis (also in a policy)
    work   = 2000                  # steps per call
    memory = "64KiB"               # bytes per key
  }

  policy "api" {
    match       = startswith(request.path, "/v1/")  # bool; default: every request
    shard       = request.tenant   # Redis Cluster hash tag; default: none
    on_error    = "allow"          # "allow" | "deny" | "local" while Redis fails
    local_share = 3                # with "local": instances that fall back at once
    clock       = "server"         # "server" | "client"
    clock_skew  = "250ms"          # with "client": how far apart the clocks may be

    rule "per_user" {              # checked in order; charged all or nothing
      algorithm    = "gcra"        # a built-in or an algorithm block's name
      key          = request.user  # what the counter is kept per
      when         = request.user != ""   # bool; default: always
      cost         = 1             # whole number >= 0; default 1
      rate         = "10/s"        # the algorithm's parameters: constants
      burst        = lookup(local.tiers, request.plan, 60)  # or expressions
      shadow       = false         # count, never deny
      accept_bound = false         # accept the algorithm's bound by design
      stats_key    = "api.user"    # rlctl serve's statistics name
      replaces     = ["per_ip"]    # rules that do not apply when this one does
      block_for    = "15m"         # penalty box; block_max = "24h" doubles it
      overridable  = false         # per-key overrides at runtime
      exempt       = list("partners")    # keys on it pass, uncharged
      deny         = list("banned")      # keys on it are refused
      deny_retry   = "1h"          # the retry-after of a refusal by deny
    }

    unlimited "internal" {         # requests left unlimited on purpose
      when     = cidrcontains("10.0.0.0/8", request.ip)
      replaces = ["per_user"]
    }
  }

Algorithms and their parameters:
  fixed_window, sliding_log, sliding_window   limit, window
  token_bucket, leaky_bucket                  capacity, rate
  gcra                                        rate, burst
  concurrency                                 max, ttl
  fixed_window's window may be a calendar period: "calendar_day", "calendar_week",
  "calendar_month", "calendar_year", with time_zone = "Europe/Berlin" (default UTC).

Values: durations "250ms", "30s", "1m30s", "1d" (ms, s, m, h, d; at least 1ms); rates
"10/s", "600/m", "5/250ms"; counts up to 2^53.

Expressions read request.NAME (or request["x-api-key"]): strings, "" when absent; and
local.NAME. Operators, conditionals, templates "${request.tenant}:${request.user}", and
HCL's functions (lower, format, regex, lookup, coalesce, try, ...) plus startswith,
endswith, strcontains, glob and cidrcontains.

Plugins (algorithm blocks): rlctl help plugins. Scenarios: rlctl help scenario.
Check a file: rlctl validate FILE.

See docs/policies.md, the reference of every block, attribute and function.
`,
}

var topicScenario = &topic{
	name:  "scenario",
	short: "scenarios: traffic, faults and expectations that rlctl simulate checks",
	text: `A scenario is traffic that rlctl simulate sends a policy on a virtual clock, against
an embedded Redis, and what must hold afterwards (simulate -check fails otherwise).

  scenario "stuffing" {
    policy     = "login"           # the policy it exercises
    duration   = "5m"              # virtual time
    seed       = 1                 # optional; default 1
    start_time = "2027-03-28T00:00:00+01:00"   # optional: the instant time 0 stands for

    traffic "users" {              # at least one
      request   = { ip = "198.51.100.${client % 256}", user = "u${client}" }
      clients   = 500              # default 1; client is 0..clients-1
      rate      = "2/m"            # per client
      pattern   = "poisson"        # constant | poisson | burst | ramp | edge
      burst     = 10               # pattern "burst" only
      start     = "0s"             # default 0
      stop      = "5m"             # default: the duration
      hold      = "10s"            # how long an allowed request lasts
      units     = 8                # units each request asks for (AllowN); default 1
      at_most   = true             # grant the most of units that fit (AllowAtMost)
      max_delay = "2s"             # wait for a turn rather than be denied (Wait)
      actual    = [120, 480, 2000] # reserve units, settle each with the next (Reserve)
    }

    fault {                        # Redis failing; any number, never overlapping
      kind  = "stall"              # stall | refuse | error | flush | restart
      at    = "2m"
      for   = "30s"                # none for a flush
      reply = "READONLY ..."       # kind "error" only
    }

    engine {                       # optional; defaults shown
      deadline         = "50ms"
      breaker_failures = 5
      breaker_cooldown = "1s"
      deny_cache       = 0
      max_memory       = "64MiB"   # default none; eviction = "noeviction"
      instances        = 1
    }

    override {                     # an overridable rule's key gets other figures
      at      = "1m"
      rule    = "per_user"
      request = { user = "acme" }
      set     = { rate = "100/s" } # absent: clear the override
      for     = "2m"
    }

    list {                         # a request's keys go on or off a list
      at      = "2m"
      add     = "banned"           # or remove = "banned"
      request = { ip = "203.0.113.9" }
    }

    expect {                       # named conditions over what the run measured
      users_served = denied_fraction("users") < 0.01
    }
  }

Expectation functions (traffic and rule by name, span a duration):
  requests, allowed, denied, allowed_fraction, denied_fraction (traffic)
  denied_by(traffic, rule), max_allowed_in(traffic, span)
  granted, waited, max_wait, settled, owed (traffic)
  degraded, timed_out, breaker_open (traffic), decided_by(traffic, how)
    how: "redis", "local", "fail_open", "fail_deny" or "cache"
  only with a fault: allowed_during_fault, denied_during_fault (traffic),
    recovered_within(traffic, span), phantom_charges()

Run it: rlctl simulate [-scenario NAME] [-check] FILE.

See docs/policies.md, the reference of every block, attribute and function.
`,
}

var topicPlugins = &topic{
	name:  "plugins",
	short: "write a rate-limiting algorithm in Lua, declare it in HCL, verify it",
	text: `A plugin is an algorithm written in Lua and declared in a policy file. The engine runs
it inside its one atomic script call per request, like a built-in, and rlctl verify holds
it to the guarantee it declares. docs/plugins.md walks through writing one, the
policies/simple_gcra.hcl used here.

The algorithm block:

  algorithm "simple_gcra" {
    source   = "plugins/simple_gcra.lua"              # relative to the policy file
    params   = { rate = "rate", burst = "count" }     # in wire order
    commands = ["GET", "SET", "DEL", "PEXPIRE"]       # every Redis command the Lua runs
    doc      = "GCRA on one string key."
    guarantee "rate" {                                # required
      burst = param.burst
      rate  = param.rate
    }
    work "string" {                                   # optional; validate warns without
      commands      = 3                               # Redis commands per call, at most
      elements      = 2                               # elements they touch, at most
      entries       = 1                               # elements the key holds, at most
      element_bytes = 16                              # the longest element (default 64)
    }
  }

  params kinds: count (one integer >= 1), duration (one, in µs), rate (two: the amount
  and the period in µs), lease (a string: the id the engine gives each request).

The guarantee block states what verify checks every rule against, from param.NAME:
  window     amount, window   at most amount in every interval shorter than window
  rate       burst, rate      at most burst + T × rate in every interval of length T
  in_flight  amount, ttl      at most amount held at once by leases younger than ttl
  none       no limit         verify skips the limit property and says so
  Exact by default. bound = 2 with why = "…" for an algorithm that may reach twice its
  limit by design; precision { retry_after, reset_after, ttl } for answers that may be
  that much late, never early. Nothing is inferred from parameter names.

The work block states the plugin's worst case on Redis, from param.NAME, cost.min (the
smallest positive cost a request charges) and cost.max (the largest, up to the capacity):
the key's type (string, hash, list or zset) as its label, then commands, elements and
entries; rlctl computes the key's memory from them. validate warns when a rule passes its
policy's budget (budget { work = 2000, memory = "64KiB" } by default; set it at the top
level or in a policy), and compile shows every rule's figures.

The Lua assigns, at its top level (see lua/dispatch.lua, lua/gcra.lua):
  params                    {'pos', ...}: one per wire value, 'str' for a lease
  validate(p)               optional: a message when the parameters cannot work
  check(key, now, cost, p)  decides, writes nothing; returns allowed (1 or 0),
                            remaining, retry_after_us (0 when allowed, -1 when the cost
                            can never fit), reset_after_us, limit[, pending]
  commit(key, pending)      writes what check decided, once every rule allows
  refund(key, now, cost, p) optional: gives a charge back
  Time is integer microseconds and every value an integer below 2^53. The prelude's
  idiv, cdiv, nonneg, MAX_INT and call are in scope; set TTLs with expire_us(key, us).

Commands: only those listed, on the rule's own key, from those that Redis and the
in-process host both run (validate names them). Never TIME (check gets now), KEYS, SCAN,
FLUSHDB, EVAL or blocking commands such as BLPOP.

Check it:
  rlctl validate FILE   the block, the Lua's syntax, globals, commands, check's returns
  rlctl verify FILE     every property against the guarantee, with shrunk counterexamples
  rlctl simulate FILE   the policy's scenarios through the engine, on a virtual clock

See docs/plugins.md.
`,
}

// flags returns a flag set for command name that reports errors as usage errors and prints nothing
// itself.
func flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if flagsMade != nil {
		flagsMade(fs)
	}
	return fs
}

// flagsMade, when set (by a test), is called with every flag set flags returns.
var flagsMade func(*flag.FlagSet)

// parse parses args, flags and positional arguments in any order: after it fs.Args() are
// the positional arguments in order, and "--" ends the flags. A bad flag is reported on
// stderr and becomes errUsage; -h or -help prints the command's help on stdout and becomes
// errHelp.
func parse(e *env, fs *flag.FlagSet, args []string) error {
	var flagArgs, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flagArgs = append(flagArgs, a)
		// A flag that takes a value and has no "=value" takes the next argument, as
		// flag.Parse does; an unknown flag is left to flag.Parse to report.
		name := strings.TrimPrefix(a[1:], "-")
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
			i++
			flagArgs = append(flagArgs, args[i])
		}
	}
	if err := fs.Parse(append(append(flagArgs, "--"), pos...)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if c := lookup(fs.Name()); c != nil {
				writeHelp(e.stdout, c)
				return errHelp
			}
			return errUsage
		}
		fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
		return errUsage
	}
	return nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// writeHelp prints command c's usage line and help text.
func writeHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: rlctl %s %s\n\n%s", c.name, c.args, c.long)
}

var cmdHelp = &command{
	name:  "help",
	args:  "[COMMAND|TOPIC]",
	short: "show help for rlctl, one command or a topic",
	long:  "Help prints the list of commands and topics, or the help of one.\n",
	run: func(e *env, args []string) error {
		fs := flags("help")
		if err := parse(e, fs, args); err != nil {
			return err
		}
		args = fs.Args()
		switch len(args) {
		case 0:
			usage(e.stdout)
			return nil
		case 1:
			for _, t := range topics {
				if t.name == args[0] {
					fmt.Fprint(e.stdout, t.text)
					return nil
				}
			}
			c := lookup(args[0])
			if c == nil {
				fmt.Fprintf(e.stderr, "rlctl: error: unknown command or topic %q\n", args[0])
				if s := closest(args[0], true); s != "" {
					fmt.Fprintf(e.stderr, "rlctl: hint: did you mean %q?\n", s)
				}
				return errUsage
			}
			writeHelp(e.stdout, c)
			return nil
		}
		return errUsage
	},
}

// version, when set at build time with -ldflags "-X main.version=…", replaces the module
// version of the build information.
var version string

var cmdVersion = &command{
	name:  "version",
	short: "print rlctl's version",
	long: `Version prints rlctl's version, from the build information: the module version of an
rlctl installed with go install github.com/rlctl/rlctl/cmd/rlctl@VERSION; for one built
in a clone, the version Go gives the build ((devel), or a pseudo-version from the commit)
and the commit it was built from, the commit's time and whether the tree had uncommitted
changes. Then the Go version that built it.
`,
	run: func(e *env, args []string) error {
		fs := flags("version")
		if err := parse(e, fs, args); err != nil {
			return err
		}
		if fs.NArg() != 0 {
			return errUsage
		}
		bi, _ := debug.ReadBuildInfo()
		fmt.Fprintf(e.stdout, "rlctl %s\n", versionOf(bi, version))
		return nil
	},
}

// versionOf describes the build bi (nil when there is none): "v1.2.0, go1.26.0" for an
// installed module, "(devel), revision R of T with local modifications, go1.26.0" for a build
// in a source tree. A non-empty override replaces the module version.
func versionOf(bi *debug.BuildInfo, override string) string {
	if bi == nil {
		bi = &debug.BuildInfo{}
	}
	v := bi.Main.Version
	if override != "" {
		v = override
	}
	if v == "" {
		v = "(unknown)"
	}
	setting := func(key string) string {
		for _, s := range bi.Settings {
			if s.Key == key {
				return s.Value
			}
		}
		return ""
	}
	if rev := setting("vcs.revision"); rev != "" {
		v += ", revision " + rev
		if t := setting("vcs.time"); t != "" {
			v += " of " + t
		}
		if setting("vcs.modified") == "true" {
			v += " with local modifications"
		}
	}
	if bi.GoVersion != "" {
		v += ", " + bi.GoVersion
	}
	return v
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb" && os.Getenv("NO_COLOR") == ""
}

// batchGCStart is the heap size at which a batch command's first collection runs.
const batchGCStart = 128 << 20

// batchGC sets the collector of a batch command (simulate, verify) unless GOGC or
// GOMEMLIMIT say otherwise. They keep a small live heap and allocate fast: at the default
// (GOGC=100) the collector took about a quarter of their CPU, and even at GOGC=400 a short
// simulation (policies/login.hcl) ran a sixth faster with no collection at all
// (BENCHMARKS.md). So the first collection waits until the heap reaches batchGCStart (a
// short simulation never collects), and from then on the heap grows to five times what
// is live between collections (GOGC=400). Peak memory: ~70 MB for a short simulation,
// ~130 MB for verify of policies/. The channel it returns is closed once it has handed
// over to GOGC=400 (nil when it leaves the collector alone).
func batchGC() <-chan struct{} {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(batchGCStart)
	// The first collection, which the limit starts, finds first unreachable and its
	// finalizer hands over to GOGC=400 with no limit.
	handedOver := make(chan struct{})
	first := new([16]byte) // not tiny-allocated: finalizers need an object of its own
	runtime.SetFinalizer(first, func(*[16]byte) {
		debug.SetGCPercent(400)
		debug.SetMemoryLimit(math.MaxInt64)
		close(handedOver)
	})
	return handedOver
}
