package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/internal/cli"
)

var cmdValidate = &command{
	name:  "validate",
	args:  "[-json] FILE|DIR...",
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

With - as the only file, validate reads one policy file from standard input (named
stdin.hcl in its diagnostics).

With -json the result is one JSON object on stdout, for editors and CI: "valid", the
counts "policies", "rules" and "scenarios" (when valid), and "diagnostics", each with
"severity" (error or warning), "summary", "detail", "file", "line" and "column"; stderr
stays empty.

Flags:
  -json  print the result as one JSON object

Exit status: 0 valid, 1 invalid, 2 usage error.
`,
	run: func(e *env, args []string) error {
		fs := flags("validate")
		asJSON := fs.Bool("json", false, "")
		if err := parse(e, fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			return errUsage
		}
		if *asJSON {
			return validateJSON(e, fs.Args())
		}
		cfg, diags := load(e, fs.Args())
		if cfg == nil {
			return errFailed
		}
		fmt.Fprintln(e.stdout, cli.Summary(cfg, len(diags)))
		return nil
	},
}

// validateJSON is validate -json: the result as one JSON object on stdout.
func validateJSON(e *env, paths []string) error {
	cfg, diags := loadPaths(e, paths)
	out := struct {
		Valid       bool             `json:"valid"`
		Policies    *int             `json:"policies,omitempty"`
		Rules       *int             `json:"rules,omitempty"`
		Scenarios   *int             `json:"scenarios,omitempty"`
		Diagnostics []cli.Diagnostic `json:"diagnostics"`
	}{Valid: cfg != nil && !diags.HasErrors(), Diagnostics: cli.DiagnosticsJSON(diags)}
	if out.Valid {
		rules := 0
		for _, p := range cfg.Policies {
			rules += len(p.Rules)
		}
		policies, scenarios := len(cfg.Policies), len(cfg.Scenarios)
		out.Policies, out.Rules, out.Scenarios = &policies, &rules, &scenarios
	}
	if err := json.NewEncoder(e.stdout).Encode(out); err != nil {
		return err
	}
	if !out.Valid {
		return errFailed
	}
	return nil
}

// load loads policies and prints their diagnostics; it returns nil when there are errors.
// A lone path "-" is one native-syntax file read from e's standard input.
func load(e *env, paths []string) (*dsl.Config, hcl.Diagnostics) {
	cfg, diags := loadPaths(e, paths)
	if !cli.WriteLoad(e.stderr, cfg, diags, e.color) {
		return nil, diags
	}
	return cfg, diags
}

// loadPaths is dsl.Load, or for a lone "-", dsl.Parse of standard input as stdin.hcl.
func loadPaths(e *env, paths []string) (*dsl.Config, hcl.Diagnostics) {
	if len(paths) == 1 && paths[0] == "-" {
		src, err := io.ReadAll(e.in())
		if err != nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read standard input", Detail: err.Error() + "."}}
		}
		return dsl.Parse(map[string][]byte{"stdin.hcl": src})
	}
	return dsl.Load(paths...)
}

// in returns what the command reads as standard input.
func (e *env) in() io.Reader {
	if e.stdin == nil {
		return os.Stdin
	}
	return e.stdin
}
