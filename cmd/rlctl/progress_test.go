package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// stepClock is a virtual clock that moves a second each time it is read, so a run
// outlasts the progress line's delay at once.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// On a terminal, a long verify or simulate draws its progress line on stderr and erases
// it at the end; stdout is what it would be anywhere.
func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "-budget", "50", "../../verify/testdata/builtins.hcl"}, "rlctl: verifying: "},
		{[]string{"simulate", "../../policies/login.hcl"}, "rlctl: simulating credential_stuffing: "},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			var term, quiet, stdout bytes.Buffer
			clock := &stepClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			if code := run(tc.args, &env{stdout: &stdout, stderr: &term, color: true, now: clock.now}); code != 0 {
				t.Fatalf("exit %d: %s", code, term.String())
			}
			var plain bytes.Buffer
			if code := run(tc.args, &env{stdout: &plain, stderr: &quiet}); code != 0 {
				t.Fatalf("exit %d: %s", code, quiet.String())
			}
			got := term.String()
			if !strings.HasPrefix(got, "\r\033[K"+tc.want) || !strings.HasSuffix(got, "\r\033[K") {
				t.Errorf("terminal stderr %q: want progress lines starting %q, erased at the end", got, tc.want)
			}
			if quiet.Len() != 0 {
				t.Errorf("stderr off a terminal: %q", quiet.String())
			}
			if !bytes.Equal(stdout.Bytes(), plain.Bytes()) {
				t.Error("stdout on a terminal differs from stdout off one")
			}
		})
	}
}

func TestSimStatus(t *testing.T) {
	m := time.Minute
	tests := []struct {
		names       []string
		done, total []time.Duration
		want        string
	}{
		{[]string{"a"}, []time.Duration{m}, []time.Duration{4 * m}, "rlctl: simulating a:  25% of 4m0s"},
		{[]string{"a"}, []time.Duration{0}, []time.Duration{0}, "rlctl: simulating a: 100% of 0s"},
		{[]string{"a", "b", "c"}, []time.Duration{m, 3 * m, 0}, []time.Duration{m, 5 * m, 0}, "rlctl: simulating 3 scenarios: 1 done,  67% of 6m0s"},
	}
	for _, tc := range tests {
		if got := simStatus(tc.names, tc.done, tc.total); got != tc.want {
			t.Errorf("simStatus(%v, %v, %v) = %q, want %q", tc.names, tc.done, tc.total, got, tc.want)
		}
	}
}
