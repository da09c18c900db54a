package main

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/dsl"
)

var cmdValidate = &command{
	name:  "validate",
	args:  "FILE|DIR...",
	short: "check policy files and report every problem",
	long: `Validate loads policy files (a directory contributes its *.hcl and *.hcl.json files)
and reports every problem with its file:line:col, the source it refers to, and how to
fix it. Warnings are printed but do not fail validation.

A plugin algorithm block is checked with its Lua: the parameters and their kinds, the
guarantee, the Lua's syntax, that it creates no globals and assigns params, check and
commit, that it calls only the commands it lists (and those only from the ones allowed),
that check returns five or six values and writes nothing; and the plugin's own validate(p)
runs on each rule's constant parameters. See 'rlctl help plugins'.

Validate warns, at the rule, when a rule's worst case on Redis passes its policy's budget:
the commands one call may issue plus the elements they touch (default 2000), or the bytes
its key may take (default 64KiB). A budget block sets both, at the top level of a file or
in a policy: budget { work = 5000, memory = "256KiB" }. 'rlctl compile' shows each rule's
figures.

Exit status: 0 valid, 1 invalid, 2 usage error.
`,
	run: func(e *env, args []string) error {
		fs := flags("validate")
		if err := parse(e, fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			return errUsage
		}
		cfg, diags := load(e, fs.Args())
		if cfg == nil {
			return errFailed
		}
		rules := 0
		for _, p := range cfg.Policies {
			rules += len(p.Rules)
		}
		fmt.Fprintf(e.stdout, "%d %s, %d %s, %d %s: valid", len(cfg.Policies), plural(len(cfg.Policies), "policy", "policies"),
			rules, plural(rules, "rule", "rules"), len(cfg.Scenarios), plural(len(cfg.Scenarios), "scenario", "scenarios"))
		if n := len(diags); n > 0 {
			fmt.Fprintf(e.stdout, " with %d %s", n, plural(n, "warning", "warnings"))
		}
		fmt.Fprintln(e.stdout)
		return nil
	},
}

// load loads policies and prints their diagnostics; it returns nil when there are errors.
func load(e *env, paths []string) (*dsl.Config, hcl.Diagnostics) {
	cfg, diags := dsl.Load(paths...)
	if len(diags) > 0 {
		var files map[string]*hcl.File
		if cfg != nil {
			files = cfg.Files
		}
		writeDiagnostics(e, files, diags)
	}
	if diags.HasErrors() {
		errs := 0
		for _, d := range diags {
			if d.Severity == hcl.DiagError {
				errs++
			}
		}
		fmt.Fprintf(e.stderr, "rlctl: error: %d %s\n", errs, plural(errs, "problem", "problems"))
		return nil, diags
	}
	return cfg, diags
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// writeDiagnostics prints each diagnostic as a "file:line:col: severity: summary" line, the
// form editors and grep understand, followed by its source snippet and how to fix it: HCL's
// rendering less its own "Error: summary" line, so the summary is printed once.
func writeDiagnostics(e *env, files map[string]*hcl.File, diags hcl.Diagnostics) {
	for _, d := range diags {
		sev := "error"
		if d.Severity == hcl.DiagWarning {
			sev = "warning"
		}
		if d.Subject != nil {
			fmt.Fprintf(e.stderr, "%s:%d:%d: %s: %s\n", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, sev, d.Summary)
		} else {
			fmt.Fprintf(e.stderr, "%s: %s\n", sev, d.Summary)
		}
		var b strings.Builder
		_ = dsl.WriteDiagnostics(&b, files, hcl.Diagnostics{d}, 100, e.color)
		text := b.String()
		// The rendering opens with "[colour]Error[reset]: summary\n".
		if i := strings.Index(text, ": "+d.Summary+"\n"); i >= 0 {
			text = text[i+len(": "+d.Summary+"\n"):]
		}
		fmt.Fprint(e.stderr, text)
	}
}
