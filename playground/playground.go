package playground

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/internal/cli"
)

// Diagnostic is one problem in the files, as rlctl validate reports it.
type Diagnostic struct {
	Severity string `json:"severity"` // "error" or "warning"
	Summary  string `json:"summary"`
	Detail   string `json:"detail"` // how to fix it
	// File, Line and Column (1-based, in characters) are where the construct at fault
	// starts; EndLine and EndColumn are just past its end. File is "" and the rest 0 for a
	// problem without a place.
	File      string `json:"file"`
	Line      int    `json:"line"`
	Column    int    `json:"column"`
	EndLine   int    `json:"end_line"`
	EndColumn int    `json:"end_column"`
	// Text is how rlctl prints it: "file:line:col: severity: summary", the source with
	// the construct underlined, and the detail.
	Text string `json:"text"`
}

// Result is what Validate found.
type Result struct {
	OK bool `json:"ok"` // no errors: rlctl validate exits 0
	// Summary is rlctl validate's last line without its "rlctl: error: " prefix: "1
	// policy, 3 rules, 0 scenarios: valid with 1 warning", or "2 problems".
	Summary     string       `json:"summary"`
	Diagnostics []Diagnostic `json:"diagnostics"` // errors and warnings, in the order printed
	Text        string       `json:"text"`        // what rlctl validate prints
}

// Validate loads files and reports every problem, as rlctl validate does.
func Validate(files map[string]string) Result {
	var text strings.Builder
	cfg, ds, problems := load(&text, files)
	r := Result{OK: problems == "", Summary: problems, Diagnostics: ds}
	if r.OK {
		r.Summary = cli.Summary(cfg, len(ds))
		text.WriteString(r.Summary + "\n")
	}
	r.Text = text.String()
	return r
}

// FormatResult is what Format made of a file.
type FormatResult struct {
	// Formatted is the file in canonical form; the text unchanged when it does not parse
	// or is not native syntax.
	Formatted string `json:"formatted"`
	Changed   bool   `json:"changed"` // Formatted differs from the text: rlctl fmt -check lists it
	// Diagnostics are the syntax errors that stop formatting, as rlctl fmt prints them.
	Diagnostics []Diagnostic `json:"diagnostics"`
	// Error is rlctl fmt's complaint about the file, as a whole, without "rlctl: error: ":
	// it is JSON, or it does not parse.
	Error string `json:"error,omitempty"`
}

// Format returns the canonical form of text, the native-syntax policy file name, as
// rlctl fmt writes it (dsl.Format). A file that does not parse is left as it is, and its
// syntax errors say why.
func Format(name, text string) FormatResult {
	r := FormatResult{Formatted: text, Diagnostics: []Diagnostic{}}
	if err := cli.FormatRefuses(name); err != nil {
		r.Error = err.Error()
		return r
	}
	src := []byte(text)
	out, diags := dsl.Format(name, src)
	if diags.HasErrors() {
		r.Diagnostics = diagnostics(cli.SourceFiles(name, src), diags)
		r.Error = cli.NotRewritten(name).Error()
		return r
	}
	r.Formatted, r.Changed = string(out), string(out) != text
	return r
}

// load parses files as rlctl loads them and writes to w what it prints on stderr. It
// returns the diagnostics and, when they have errors, "N problems"; cfg can be used when
// problems is "".
func load(w *strings.Builder, files map[string]string) (cfg *dsl.Config, ds []Diagnostic, problems string) {
	srcs := make(map[string][]byte, len(files))
	for name, text := range files {
		srcs[name] = []byte(text)
	}
	cfg, diags := dsl.Parse(srcs)
	if !cli.WriteLoad(w, cfg, diags, false) {
		problems = cli.Problems(diags)
	}
	return cfg, diagnostics(cfg.Files, diags), problems
}

// diagnostics converts diags, rendered with the sources in files.
func diagnostics(files map[string]*hcl.File, diags hcl.Diagnostics) []Diagnostic {
	ds := make([]Diagnostic, 0, len(diags))
	for _, d := range diags {
		x := Diagnostic{Severity: cli.Severity(d), Summary: d.Summary, Detail: d.Detail, Text: cli.DiagnosticText(files, d, false)}
		if s := d.Subject; s != nil {
			x.File, x.Line, x.Column, x.EndLine, x.EndColumn = s.Filename, s.Start.Line, s.Start.Column, s.End.Line, s.End.Column
		}
		ds = append(ds, x)
	}
	return ds
}
