package main

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlctl/rlctl/internal/cli"
)

// starter is the policy file rlctl init writes: canonical, valid with no warning, its
// scenario's expectations holding and every rule passing verify (TestStarter).
//
//go:embed starter.hcl
var starter []byte

// starterName is the file rlctl init writes when given none, or given a directory.
const starterName = "policy.hcl"

var cmdInit = &command{
	name:  "init",
	args:  "[-force] [FILE]",
	short: "write a starter policy file to edit, simulate and verify",
	long: `Init writes a starter policy file: one policy with a rule per client address and a rule
per signed-in user, and a scenario in which well-behaved users and a scraper meet them,
with expectations that hold. Comments say what each part does and where the language is
described. The file is in canonical form, validates with no warning, and passes
simulate -check and verify: change it from there.

FILE is policy.hcl by default; a directory gets policy.hcl in it. Init does not replace an
existing file unless -force is given. With - as FILE it writes the policy to standard
output.

Once the file is written, init prints on stderr the commands to run next.

Flags:
  -force  replace FILE if it exists

Exit status: 0 written, 1 not written (FILE exists, or cannot be written), 2 usage error.
`,
	run: func(e *env, args []string) error {
		fs := flags("init")
		force := fs.Bool("force", false, "")
		if err := parse(e, fs, args); err != nil {
			return err
		}
		name := starterName
		switch fs.NArg() {
		case 0:
		case 1:
			name = fs.Arg(0)
		default:
			return errUsage
		}
		if name == "-" {
			_, err := e.stdout.Write(starter)
			return err
		}
		if fi, err := os.Stat(name); err == nil && fi.IsDir() {
			name = filepath.Join(name, starterName)
		}
		if strings.HasSuffix(name, ".json") {
			return &cli.Error{
				Msg:  name + ": init writes native syntax (.hcl), not JSON",
				Hint: "name the file *.hcl, such as " + starterName,
			}
		}
		if err := writeStarter(name, *force); err != nil {
			return err
		}
		q := shellQuote(name)
		next := [][2]string{
			{"rlctl simulate -check " + q, "run its scenario and check its expectations"},
			{"rlctl verify " + q, "prove its rules' limits on adversarial traffic"},
			{"rlctl help policy", "the policy language, to make it yours"},
		}
		fmt.Fprintf(e.stderr, "rlctl: wrote %s, a starter policy; next:\n", name)
		for _, c := range next {
			fmt.Fprintf(e.stderr, "  %-*s  %s\n", len(next[0][0]), c[0], c[1])
		}
		return nil
	},
}

// writeStarter writes the starter policy to name; unless force, only if name does not
// exist.
func writeStarter(name string, force bool) error {
	flag := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flag = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(name, flag, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return &cli.Error{
			Msg:  name + " already exists: not replaced",
			Hint: "rlctl init -force " + shellQuote(name) + " replaces it",
		}
	}
	if err != nil {
		return err
	}
	_, err = f.Write(starter)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// shellQuote returns s as a shell word: as it is when that is safe, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./+,:@=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
