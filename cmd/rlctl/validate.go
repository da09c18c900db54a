package main

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/internal/cli"
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
		fmt.Fprintln(e.stdout, cli.Summary(cfg, len(diags)))
		return nil
	},
}

// load loads policies and prints their diagnostics; it returns nil when there are errors.
func load(e *env, paths []string) (*dsl.Config, hcl.Diagnostics) {
	cfg, diags := dsl.Load(paths...)
	if !cli.WriteLoad(e.stderr, cfg, diags, e.color) {
		return nil, diags
	}
	return cfg, diags
}
