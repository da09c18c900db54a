package cli

import (
	"encoding/json"
	"io"

	"github.com/hashicorp/hcl/v2"
)

// Diagnostic is a policy diagnostic as the commands' -json output gives it: where (file,
// 1-based line and column of the range's start; absent without a range), how severe
// ("error" or "warning"), what and how to fix it.
type Diagnostic struct {
	Severity string `json:"severity"`
	Summary  string `json:"summary"`
	Detail   string `json:"detail,omitempty"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	Column   int    `json:"column,omitempty"`
}

// DiagnosticsJSON returns diags as -json gives them, in order; never nil.
func DiagnosticsJSON(diags hcl.Diagnostics) []Diagnostic {
	out := make([]Diagnostic, 0, len(diags))
	for _, d := range diags {
		j := Diagnostic{Severity: Severity(d), Summary: d.Summary, Detail: d.Detail}
		if r := d.Subject; r != nil {
			j.File, j.Line, j.Column = r.Filename, r.Start.Line, r.Start.Column
		}
		out = append(out, j)
	}
	return out
}

// WriteLoadErrorJSON writes, as one line of JSON, the object a -json command prints when
// its policies do not load: {"error": "2 problems", "diagnostics": [...]}, with fields
// (such as verify's "schema" and "results") added.
func WriteLoadErrorJSON(w io.Writer, diags hcl.Diagnostics, fields map[string]any) error {
	obj := map[string]any{"error": "invalid policies: " + Problems(diags), "diagnostics": DiagnosticsJSON(diags)}
	for k, v := range fields {
		obj[k] = v
	}
	return json.NewEncoder(w).Encode(obj)
}
