package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/internal/cli"
)

var cmdFmt = &command{
	name:  "fmt",
	args:  "[-check] [-diff] FILE|DIR...",
	short: "rewrite policy files in canonical form",
	long: `Fmt rewrites native-syntax policy files (*.hcl) in canonical form: consistent
indentation, aligned attributes, normalized blank lines; comments are kept. A directory
contributes its *.hcl files, not recursively (its *.hcl.json files are JSON, which fmt
leaves alone). A file that does not parse is reported and left untouched.

  -check  rewrite nothing; list the files that are not canonical and exit 1 if any
  -diff   rewrite nothing; print a unified diff of what would change (patch -p1 applies it)

With - as the only file, fmt reads a policy from standard input and writes it in canonical
form to standard output (with -check, it writes nothing and exits 1 if it is not
canonical; with -diff, it writes the diff).

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
		if fs.NArg() == 1 && fs.Arg(0) == "-" {
			return fmtStdin(e, *check, *diff)
		}
		names, failed := fmtFiles(e, fs.Args())
		for _, name := range names {
			src, err := os.ReadFile(name)
			if err != nil {
				fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
				failed = true
				continue
			}
			out, diags := dsl.Format(name, src)
			if diags.HasErrors() {
				cli.WriteDiagnostics(e.stderr, cli.SourceFiles(name, src), diags, e.color)
				cli.WriteError(e.stderr, cli.NotRewritten(name))
				failed = true
				continue
			}
			if bytes.Equal(src, out) {
				continue
			}
			switch {
			case *diff:
				fmt.Fprint(e.stdout, unifiedDiff(filepath.ToSlash(name), src, out, 3))
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

// fmtStdin is fmt - : the policy on standard input, in canonical form on standard output.
func fmtStdin(e *env, check, diff bool) error {
	src, err := io.ReadAll(e.in())
	if err != nil {
		return err
	}
	const name = "stdin.hcl"
	out, diags := dsl.Format(name, src)
	if diags.HasErrors() {
		cli.WriteDiagnostics(e.stderr, cli.SourceFiles(name, src), diags, e.color)
		fmt.Fprintln(e.stderr, "rlctl: error: standard input does not parse: nothing written")
		return errFailed
	}
	changed := !bytes.Equal(src, out)
	switch {
	case diff:
		if changed {
			fmt.Fprint(e.stdout, unifiedDiff(name, src, out, 3))
		}
	case check:
	default:
		e.stdout.Write(out)
	}
	if check && changed {
		return errFailed
	}
	return nil
}

// fmtFiles returns the files fmt formats for paths, each once: a file as named, a
// directory's *.hcl files sorted by name, not recursively, as dsl.Load reads a directory.
// It reports the paths it refuses (JSON files, directories without *.hcl files, paths it
// cannot read) and says whether there were any.
func fmtFiles(e *env, paths []string) (names []string, failed bool) {
	seen := map[string]bool{}
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	for _, p := range paths {
		p = filepath.Clean(p)
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			if err := cli.FormatRefuses(p); err != nil {
				cli.WriteError(e.stderr, err)
				failed = true
				continue
			}
			add(p) // a file, or nothing: reading it says which
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			fmt.Fprintf(e.stderr, "rlctl: error: %v\n", err)
			failed = true
			continue
		}
		n := len(names)
		for _, d := range entries {
			if !d.IsDir() && strings.HasSuffix(d.Name(), ".hcl") {
				add(filepath.Join(p, d.Name()))
			}
		}
		if len(names) == n {
			fmt.Fprintf(e.stderr, "rlctl: error: %s: no *.hcl files in the directory\n", p)
			failed = true
		}
	}
	return names, failed
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
