package verify

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// WriteText writes the findings for a person: per policy and rule, one line per property
// with its verdict, and for every finding that is not a pass the statement checked and
// the shrunk counterexample. verbose adds the statement of every property and the
// counterexamples of notes (the interleavings that break an algorithm run without the
// script).
func (f *Findings) WriteText(w io.Writer, verbose bool) error {
	ew := &errWriter{w: w}
	width := 0
	for _, r := range f.Results {
		width = max(width, len(r.Property))
	}
	policy, group := "", ""
	for i, r := range f.Results {
		if i == 0 || r.Policy != policy {
			if i > 0 {
				fmt.Fprintln(ew)
			}
			policy, group = r.Policy, ""
			fmt.Fprintf(ew, "policy %q\n", r.Policy)
		}
		if g := r.Rule + "\x00" + r.Params; g != group || i == 0 {
			group = g
			if r.Rule == "" {
				fmt.Fprintf(ew, "  the whole policy\n")
			} else {
				fmt.Fprintf(ew, "  rule %q: %s %s\n", r.Rule, r.Algorithm, cmp.Or(r.Limit, r.Params))
			}
		}
		fmt.Fprintf(ew, "    %-4s  %-*s  %s\n", r.Status, width, r.Property, r.Detail)
		if verbose || ((r.Status == Fail || r.Status == Warn) && r.Statement != "") {
			fmt.Fprintf(ew, "          %-*s  checks: %s\n", width, "", r.Statement)
		}
		if ce := r.Counterexample; ce != nil && (r.Status != Note || verbose) {
			writeCounterexample(ew, ce)
		}
	}
	fmt.Fprintln(ew)
	counts := []string{fmt.Sprintf("%d pass", f.Count(Pass))}
	for _, st := range []Status{Note, Warn, Fail, Skip} {
		if n := f.Count(st); n > 0 || st == Fail {
			counts = append(counts, fmt.Sprintf("%d %s", n, strings.ToLower(st.String())))
		}
	}
	fmt.Fprintf(ew, "verify: %d properties: %s (seed %d, %d requests per rule, %d script calls)\n", len(f.Results), strings.Join(counts, ", "), f.Seed, f.Budget, f.Calls)
	return ew.err
}

func writeCounterexample(w io.Writer, ce *Counterexample) {
	marks := "the breach"
	if slices.ContainsFunc(ce.Steps, func(s CounterStep) bool { return s.Mark && strings.HasPrefix(s.Result, "ERROR ") }) {
		marks = "the error"
	}
	unit := ce.Unit
	if ce.Original == 1 {
		unit = strings.TrimSuffix(unit, "s")
	}
	fmt.Fprintf(w, "          counterexample, shrunk from %d %s (times since midnight UTC; > marks %s):\n", ce.Original, unit, marks)
	tw := 0
	for _, s := range ce.Steps {
		tw = max(tw, len(fmtExact(s.At)))
	}
	rw := 0
	for _, s := range ce.Steps {
		rw = max(rw, len(s.Request))
	}
	for _, s := range ce.Steps {
		mark := " "
		if s.Mark {
			mark = ">"
		}
		who := ""
		if s.Client > 0 {
			who = fmt.Sprintf("client %d  ", s.Client)
		}
		line := fmt.Sprintf("          %s %*s  %s%-*s  %s", mark, tw, fmtExact(s.At), who, rw, s.Request, s.Result)
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}

// fmtExact prints a trace time to the microsecond: +1m0.000001s.
func fmtExact(d time.Duration) string { return "+" + fmtDur(d) }
