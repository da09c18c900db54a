// Command rlctl checks, formats, explains, simulates and verifies rlctl rate-limit policies.
//
//	rlctl validate FILE|DIR...     check policies; diagnostics with source snippets
//	rlctl fmt [-check] [-diff] FILE...
//	rlctl compile [-json] FILE|DIR...
//	rlctl simulate [-scenario NAME] [-seed N] [-trace FILE] [-json] [-check] [-plot out.svg] FILE|DIR...
//	rlctl verify [-budget N] [-duration D] [-seed N] [-strict] [-json] FILE|DIR...
//	rlctl bench -redis URL [-n N] [-c C] [-duration D] FILE
//	rlctl version
//	rlctl help [COMMAND]
//
// Exit status: 0 success, 1 failure (invalid policies, unformatted files), 2 usage error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
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
	stdout, stderr io.Writer
	color          bool // stderr is a terminal
}

// errUsage makes main exit 2 after printing the command's usage.
var errUsage = errors.New("usage")

// errFailed makes main exit 1; the command has already said why.
var errFailed = errors.New("failed")

var commands []*command

func init() {
	commands = []*command{cmdValidate, cmdFmt, cmdCompile, cmdSimulate, cmdVerify, cmdBench, cmdVersion, cmdHelp}
}

func main() {
	os.Exit(run(os.Args[1:], &env{stdout: os.Stdout, stderr: os.Stderr, color: isTerminal(os.Stderr)}))
}

func run(args []string, e *env) int {
	if len(args) == 0 {
		usage(e.stderr)
		return 2
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(e.stderr, "rlctl: error: unknown command %q\n", args[0])
		if s := closest(args[0]); s != "" {
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
	default:
		fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
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

func closest(name string) string {
	for _, c := range commands {
		if strings.HasPrefix(c.name, name) || strings.HasPrefix(name, c.name) {
			return c.name
		}
	}
	return ""
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "rlctl checks, formats, explains, simulates and verifies rate-limit policies.\n\nusage: rlctl COMMAND [ARGS]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.short)
	}
	fmt.Fprintf(w, "\nrun 'rlctl help COMMAND' for a command's flags and arguments\n")
}

// flags returns a flag set for command name that reports errors as usage errors and prints nothing
// itself.
func flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses args; a bad flag is reported on stderr and becomes errUsage.
func parse(e *env, fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errUsage
		}
		fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
		return errUsage
	}
	return nil
}

var cmdHelp = &command{
	name:  "help",
	args:  "[COMMAND]",
	short: "show help for rlctl or one command",
	run: func(e *env, args []string) error {
		switch len(args) {
		case 0:
			usage(e.stdout)
			return nil
		case 1:
			c := lookup(args[0])
			if c == nil {
				fmt.Fprintf(e.stderr, "rlctl: error: unknown command %q\n", args[0])
				return errUsage
			}
			fmt.Fprintf(e.stdout, "usage: rlctl %s %s\n\n%s", c.name, c.args, c.long)
			return nil
		}
		return errUsage
	},
}

// version is set at build time with -ldflags "-X main.version=…".
var version = "devel"

var cmdVersion = &command{
	name:  "version",
	short: "print rlctl's version",
	long:  "Version prints rlctl's version.\n",
	run: func(e *env, args []string) error {
		if len(args) != 0 {
			return errUsage
		}
		fmt.Fprintf(e.stdout, "rlctl %s\n", version)
		return nil
	},
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb" && os.Getenv("NO_COLOR") == ""
}
