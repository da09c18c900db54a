package dsl

import (
	"cmp"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// WriteDiagnostics renders diags for a person: each with its severity, summary, the source
// line(s) it refers to with the construct underlined, and its detail wrapped at width
// columns (0: no wrapping). files are the sources by name, normally Config.Files; a
// diagnostic about a file not in files is shown without a snippet. color adds ANSI colours;
// enable it only when writing to a terminal.
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics, width uint, color bool) error {
	return hcl.NewDiagnosticTextWriter(w, files, width, color).WriteDiagnostics(diags)
}

// DiagnosticText renders one diagnostic as rlctl prints it: a "file:line:col: severity:
// summary" line (the form editors and grep understand; "severity: summary" when d has no
// Subject), then WriteDiagnostics' rendering of d less its own "Error: summary" line, so
// the summary is printed once: the source line(s) with the construct underlined, and the
// detail wrapped at width columns (0: no wrapping).
func DiagnosticText(files map[string]*hcl.File, d *hcl.Diagnostic, width uint, color bool) string {
	var b strings.Builder
	sev := "error"
	if d.Severity == hcl.DiagWarning {
		sev = "warning"
	}
	if d.Subject != nil {
		fmt.Fprintf(&b, "%s:%d:%d: %s: %s\n", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, sev, d.Summary)
	} else {
		fmt.Fprintf(&b, "%s: %s\n", sev, d.Summary)
	}
	var r strings.Builder
	_ = WriteDiagnostics(&r, files, hcl.Diagnostics{d}, width, color)
	text := r.String()
	// The rendering opens with "[colour]Error[reset]: summary\n".
	if i := strings.Index(text, ": "+d.Summary+"\n"); i >= 0 {
		text = text[i+len(": "+d.Summary+"\n"):]
	}
	b.WriteString(text)
	return b.String()
}

// errorf returns an error diagnostic about subject.
func errorf(subject hcl.Range, summary, detail string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(detail, args...),
		Subject:  subject.Ptr(),
	}
}

// warnf returns a warning diagnostic about subject.
func warnf(subject hcl.Range, summary, detail string, args ...any) *hcl.Diagnostic {
	d := errorf(subject, summary, detail, args...)
	d.Severity = hcl.DiagWarning
	return d
}

// suggestion returns ` Did you mean "x"?` for the option closest to given, or "" when none
// is close (Levenshtein distance of 3 or more, as in hcl's own suggestions). Ties go to
// the option first in sorted order, so the answer never depends on map order.
func suggestion(given string, options []string) string {
	best, bestDist := "", 3
	for _, o := range slices.Sorted(slices.Values(options)) {
		if d := levenshtein(given, o); d < bestDist {
			best, bestDist = o, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" Did you mean %q?", best)
}

var unknownFunction = regexp.MustCompile(`^There is no function named "([^"]*)"\.`)

// fixSuggestions replaces the did-you-mean of HCL's "Call to unknown function"
// diagnostics, which takes the first close name in map order, with the closest of names.
func fixSuggestions(diags hcl.Diagnostics, names []string) hcl.Diagnostics {
	for _, d := range diags {
		if d.Summary != "Call to unknown function" {
			continue
		}
		if m := unknownFunction.FindStringSubmatch(d.Detail); m != nil {
			d.Detail = fmt.Sprintf("There is no function named %q.%s", m[1], suggestion(m[1], names))
		}
	}
	return diags
}

// levenshtein is the edit distance between a and b, in runes.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			sub := prev[j-1]
			if ra[i-1] != rb[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// quoteList writes names as "a", "b" or "c".
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	switch len(q) {
	case 0:
		return "(none)"
	case 1:
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// sortDiagnostics orders diags by file and position, keeping the emission order of
// diagnostics at the same place; diagnostics without a subject go last.
func sortDiagnostics(diags hcl.Diagnostics) {
	slices.SortStableFunc(diags, func(a, b *hcl.Diagnostic) int {
		switch {
		case a.Subject == nil && b.Subject == nil:
			return 0
		case a.Subject == nil:
			return 1
		case b.Subject == nil:
			return -1
		}
		return cmp.Or(
			cmp.Compare(a.Subject.Filename, b.Subject.Filename),
			cmp.Compare(a.Subject.Start.Byte, b.Subject.Start.Byte),
		)
	})
}

// where formats a range as file:line:col for "first defined at" details.
func where(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}
