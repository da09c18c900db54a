package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/rlctl/rlctl/internal/redistest"
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
		// [redis]: redis-server can be found (see redisCondition); [race]: the test binary,
		// which the scripts run as rlctl, is built with the race detector (a script of long
		// simulations skips then: make test's proofs stage runs it without).
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "redis":
				return redisCondition(redistest.Available(), os.Getenv("RLCTL_REQUIRE_REDIS"))
			case "race":
				return raceEnabled, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
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

// redisCondition is the scripts' [redis] condition: whether redis-server and redis-cli
// can be found. With RLCTL_REQUIRE_REDIS=1 (make test) a missing one fails the script
// instead of letting it skip, as redistest does for Go tests.
func redisCondition(available bool, require string) (bool, error) {
	if !available && require == "1" {
		return false, errors.New("redis-server or redis-cli not found and RLCTL_REQUIRE_REDIS=1: install them (apt-get install -y redis-server) or run make test")
	}
	return available, nil
}

func TestRedisCondition(t *testing.T) {
	for _, tc := range []struct {
		available bool
		require   string
		want      bool
		fails     bool
	}{
		{available: true, want: true},
		{available: true, require: "1", want: true},
		{available: false, want: false},
		{available: false, require: "0", want: false},
		{available: false, require: "1", fails: true},
	} {
		got, err := redisCondition(tc.available, tc.require)
		if got != tc.want || (err != nil) != tc.fails {
			t.Errorf("redisCondition(%v, %q) = %v, %v; want %v, failing %v", tc.available, tc.require, got, err, tc.want, tc.fails)
		}
	}
}
