// Command rlctl checks, formats, explains, simulates, verifies and serves rlctl rate-limit policies,
// and serves a browser playground for them.
//
//	rlctl init [-force] [FILE]
//	rlctl validate [-json] FILE|DIR...
//	rlctl fmt [-check] [-diff] FILE|DIR...
//	rlctl compile [-json] [-from OLD] FILE|DIR...
//	rlctl simulate [-scenario NAME] [-seed N] [-trace FILE] [-j N] [-json] [-check] [-plot OUT.svg] FILE|DIR...
//	rlctl verify [-duration D] [-seed N] [-budget N] [-clients N] [-j N] [-strict] [-json] [-v] FILE|DIR...
//	rlctl bench -redis ADDR [-n N] [-c C] [-duration D] [-keys K] [-policy NAME] [-deadline D] [-batch N] [-attr NAME=VALUE]... FILE|DIR...
//	rlctl override set|get|clear|list -redis ADDR [-redis-type TYPE] [-rule POLICY.RULE] [-attr NAME=VALUE]... [-set NAME=VALUE]... [-for D | -until TIME] FILE|DIR...
//	rlctl list add|remove|get|show -redis ADDR [-redis-type TYPE] [-list NAME] [-attr NAME=VALUE]... FILE|DIR...
//	rlctl inspect -redis ADDR [-redis-type TYPE] -attr NAME=VALUE... FILE|DIR...
//	rlctl serve [-grpc ADDR] [-http ADDR] [-admin ADDR] [-tls-cert FILE -tls-key FILE [-tls-client-ca FILE]] [-auth-tokens FILE] [-max-conns N] [-redis URL [-redis-type TYPE] [-redis-batch N]] [-redis-tls-ca FILE] [-redis-tls-cert FILE -redis-tls-key FILE] [-timeout D] [-max-memory SIZE] [-drain D] [-watch=false] [-allow-removal] [-headers MODE [-legacy-header-names NAMES]] [-no-headers] [-shadow-mode] [-near-limit-ratio F] [-xds HOST:PORT [-xds-node ID] [-xds-tls-ca FILE] [-xds-tls-cert FILE -xds-tls-key FILE] [-merge-domains]] [-log-level LEVEL] [FILE|DIR...]
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

	"github.com/rlctl/rlctl/dsl"
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
			names = append(names, t.Name)
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
		fmt.Fprintf(w, "  %-10s %s\n", t.Name, t.Short)
	}
	fmt.Fprintf(w, "\nrun 'rlctl help COMMAND' for a command's flags and arguments, 'rlctl help TOPIC' for a topic\n")
}

// topics are the help texts that are not a command's: rlctl help TOPIC prints one.
var topics = dsl.Topics()

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
				if t.Name == args[0] {
					fmt.Fprint(e.stdout, t.Text)
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
