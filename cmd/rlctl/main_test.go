package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"rlctl": func() { os.Exit(run(os.Args[1:], &env{stdout: os.Stdout, stderr: os.Stderr})) },
	})
}

// TestScripts runs the CLI behaviours in testdata/script, one behaviour per file. Each
// script starts with a copy of the repository's policies/ in $WORK/policies.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			return os.CopyFS(filepath.Join(env.WorkDir, "policies"), os.DirFS("../../policies"))
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// exits N PROG ARGS... runs PROG and requires exit status N.
			"exits": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 2 {
					ts.Fatalf("usage: exits N PROG [ARGS...]")
				}
				err := ts.Exec(args[1], args[2:]...)
				code := 0
				var ee *exec.ExitError
				switch {
				case errors.As(err, &ee):
					code = ee.ExitCode()
				case err != nil:
					ts.Fatalf("%v", err)
				}
				if strconv.Itoa(code) != args[0] {
					ts.Fatalf("exit status %d, want %s", code, args[0])
				}
			},
		},
	})
}
