package cli

import (
	"fmt"
	"io"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/dsl"
)

// diagnosticWidth is the column dsl.WriteDiagnostics wraps details at.
const diagnosticWidth = 100

// DiagnosticText is how rlctl prints one diagnostic (dsl.DiagnosticText), wrapped at 100
// columns. files are the sources by name (Config.Files); color adds ANSI colours.
func DiagnosticText(files map[string]*hcl.File, d *hcl.Diagnostic, color bool) string {
	return dsl.DiagnosticText(files, d, diagnosticWidth, color)
}

// Severity is "warning" for a warning and "error" for anything else.
func Severity(d *hcl.Diagnostic) string {
	if d.Severity == hcl.DiagWarning {
		return "warning"
	}
	return "error"
}

// WriteDiagnostics writes each of diags as DiagnosticText, in order.
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics, color bool) error {
	for _, d := range diags {
		if _, err := io.WriteString(w, DiagnosticText(files, d, color)); err != nil {
			return err
		}
	}
	return nil
}

// WriteLoad writes what rlctl prints on stderr after loading policy files into cfg with
// diags (dsl.Load or dsl.Parse): every diagnostic, then, when there are errors, "rlctl:
// error: N problems". It reports whether cfg can be used: diags has no errors.
func WriteLoad(w io.Writer, cfg *dsl.Config, diags hcl.Diagnostics, color bool) (ok bool) {
	var files map[string]*hcl.File
	if cfg != nil {
		files = cfg.Files
	}
	_ = WriteDiagnostics(w, files, diags, color)
	if diags.HasErrors() {
		WriteError(w, fmt.Errorf("%s", Problems(diags)))
		return false
	}
	return true
}

// Problems counts the errors of diags, warnings aside: "1 problem", "3 problems".
func Problems(diags hcl.Diagnostics) string {
	n := 0
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			n++
		}
	}
	return fmt.Sprintf("%d %s", n, Plural(n, "problem", "problems"))
}

// Summary is rlctl validate's line for a valid cfg loaded with warnings warnings: "1
// policy, 3 rules, 0 scenarios: valid", ending " with 1 warning" when there are any.
func Summary(cfg *dsl.Config, warnings int) string {
	rules := 0
	for _, p := range cfg.Policies {
		rules += len(p.Rules)
	}
	s := fmt.Sprintf("%d %s, %d %s, %d %s: valid", len(cfg.Policies), Plural(len(cfg.Policies), "policy", "policies"),
		rules, Plural(rules, "rule", "rules"), len(cfg.Scenarios), Plural(len(cfg.Scenarios), "scenario", "scenarios"))
	if warnings > 0 {
		s += fmt.Sprintf(" with %d %s", warnings, Plural(warnings, "warning", "warnings"))
	}
	return s
}

// Plural returns one when n is 1 and many otherwise.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
