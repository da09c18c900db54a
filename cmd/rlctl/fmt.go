package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/rlctl/rlctl/dsl"
)

var cmdFmt = &command{
	name:  "fmt",
	args:  "[-check] [-diff] FILE...",
	short: "rewrite policy files in canonical form",
	long: `Fmt rewrites native-syntax policy files (*.hcl) in canonical form: consistent
indentation, aligned attributes, normalized blank lines; comments are kept. A file that
does not parse is reported and left untouched.

  -check  rewrite nothing; list the files that are not canonical and exit 1 if any
  -diff   print what would change instead of rewriting

Exit status: 0 success, 1 a file does not parse or (-check) is not canonical, 2 usage error.
`,
	run: func(e *env, args []string) error {
		fs := flags("fmt")
		check := fs.Bool("check", false, "")
		diff := fs.Bool("diff", false, "")
		if err := parse(e, fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			return errUsage
		}
		failed := false
		for _, name := range fs.Args() {
			if strings.HasSuffix(name, ".json") {
				fmt.Fprintf(e.stderr, "rlctl: error: %s: fmt formats native syntax (.hcl), not JSON\n", name)
				failed = true
				continue
			}
			src, err := os.ReadFile(name)
			if err != nil {
				fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
				failed = true
				continue
			}
			out, diags := dsl.Format(name, src)
			if diags.HasErrors() {
				writeDiagnostics(e, nil, diags)
				fmt.Fprintf(e.stderr, "rlctl: error: %s does not parse; not rewritten\n", name)
				failed = true
				continue
			}
			if bytes.Equal(src, out) {
				continue
			}
			switch {
			case *diff:
				fmt.Fprint(e.stdout, lineDiff(name, string(src), string(out)))
				if *check {
					failed = true
				}
			case *check:
				fmt.Fprintln(e.stdout, name)
				failed = true
			default:
				if err := writeFile(name, out); err != nil {
					fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
					failed = true
				}
			}
		}
		if failed {
			return errFailed
		}
		return nil
	},
}

// writeFile replaces name's content, keeping its permissions.
func writeFile(name string, data []byte) error {
	st, err := os.Stat(name)
	if err != nil {
		return err
	}
	tmp := name + ".rlctl-fmt"
	if err := os.WriteFile(tmp, data, st.Mode().Perm()); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// lineDiff is a minimal unified-style diff: the changed region between the common prefix
// and suffix of lines.
func lineDiff(name, a, b string) string {
	al, bl := strings.SplitAfter(a, "\n"), strings.SplitAfter(b, "\n")
	i := 0
	for i < len(al) && i < len(bl) && al[i] == bl[i] {
		i++
	}
	j := 0
	for j < len(al)-i && j < len(bl)-i && al[len(al)-1-j] == bl[len(bl)-1-j] {
		j++
	}
	var s strings.Builder
	fmt.Fprintf(&s, "--- %s\n+++ %s (formatted)\n@@ line %d @@\n", name, name, i+1)
	for _, l := range al[i : len(al)-j] {
		s.WriteString("-" + strings.TrimSuffix(l, "\n") + "\n")
	}
	for _, l := range bl[i : len(bl)-j] {
		s.WriteString("+" + strings.TrimSuffix(l, "\n") + "\n")
	}
	return s.String()
}
