package algorithms

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlctl/rlctl/luahost"
)

// dispatchCall is a check of n fixed_window rules written out (the dispatcher's general
// path), one key each, with the given deadline (0: none).
func dispatchCall(t *testing.T, n int, deadline int64) (keys, argv []string) {
	t.Helper()
	fw, _ := Default().Algorithm("fixed_window")
	c := Call{Op: OpCheck, Now: ServerTime, Deadline: deadline}
	for r := range n {
		c.Rules = append(c.Rules, Rule{Key: fmt.Sprintf("rl:dispatch:%d", r), Algorithm: fw, Cost: 1, Params: []int64{100, 60_000_000}})
	}
	argv, err := c.Argv()
	if err != nil {
		t.Fatal(err)
	}
	return c.Keys(), argv
}

// countingHost is a host that counts the Lua instructions of each call, with the engine
// script's library loaded.
func countingHost(t *testing.T, clock luahost.Clock) *luahost.Host {
	t.Helper()
	s := Default()
	h := luahost.New(luahost.WithClock(clock), luahost.WithCommands(s.Commands()...), luahost.WithInstructionLimit(1<<40))
	if _, err := h.FunctionLoad(s.Library, true); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestDispatchLinearInRules: the dispatcher's work per rule does not grow with the rules
// of the call. Its check that no key repeats compared each key with every earlier one,
// n(n-1)/2 compares: 512 rules cost 8× the instructions of 64 and then some (the quadratic
// term alone is about 650,000 instructions at 512). Counted in Lua instructions, which do
// not depend on the machine's speed.
func TestDispatchLinearInRules(t *testing.T) {
	s := Default()
	steps := func(n int) uint64 {
		h := countingHost(t, luahost.NewManualClock(time.Unix(1_800_000_000, 0)))
		keys, argv := dispatchCall(t, n, 0)
		if _, err := h.FCall(context.Background(), s.Function, keys, argv); err != nil {
			t.Fatalf("%d rules: %v", n, err)
		}
		return h.Steps()
	}
	small, large := steps(64), steps(512)
	t.Logf("lua steps: 64 rules %d (%.0f a rule), 512 rules %d (%.0f a rule)", small, float64(small)/64, large, float64(large)/512)
	if large > small*8*5/4 {
		t.Errorf("512 rules cost %d Lua instructions, 64 rules %d: %.1f× for 8× the rules, want at most 10×", large, small, float64(large)/float64(small))
	}
}

// TestDispatchRepeatedKey: a call whose keys repeat is refused and writes nothing, on
// both ways of checking (a few rules compare, many use a set).
func TestDispatchRepeatedKey(t *testing.T) {
	s := Default()
	for _, n := range []int{2, 3, 8, 9, 40, 300} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			h := countingHost(t, luahost.NewManualClock(time.Unix(1_800_000_000, 0)))
			keys, argv := dispatchCall(t, n, 0)
			keys[n-1] = keys[n/2-1]
			_, err := h.FCall(context.Background(), s.Function, keys, argv)
			want := fmt.Sprintf("RLCTL rule %d: key repeats rule %d", n, n/2)
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("repeated key: %v, want %q", err, want)
			}
			if ks := h.Keys(); len(ks) != 0 {
				t.Errorf("a refused call wrote %v", ks)
			}
		})
	}
}

// steppingClock moves on by step at every reading: the clock of a server that is slow
// between any two readings.
type steppingClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now
	c.now = c.now.Add(c.step)
	return t
}

// TestDispatchDeadlineBeforeCharge: a call that starts before its deadline but whose
// checks run past it charges nothing. The host reads its clock at the call's start and at
// each TIME, a second apart: the script's first TIME is before the deadline, the one it
// reads before charging after it. Before the second reading, the call charged all its
// rules for a caller that had given up.
func TestDispatchDeadlineBeforeCharge(t *testing.T) {
	s := Default()
	start := time.Unix(1_800_000_000, 0)
	for _, n := range []int{5, 64} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			clock := &steppingClock{now: start, step: time.Second}
			h := countingHost(t, clock)
			// Readings: the call's start (start), the first TIME (start+1s), the TIME
			// before charging (start+2s).
			keys, argv := dispatchCall(t, n, start.Add(1500*time.Millisecond).UnixMicro())
			_, err := h.FCall(context.Background(), s.Function, keys, argv)
			if err == nil || !IsDeadlineError(err) || !strings.Contains(err.Error(), "checked the call past its deadline") {
				t.Fatalf("a call whose checks ended past its deadline: %v, want the deadline error from before charging", err)
			}
			if ks := h.Keys(); len(ks) != 0 {
				t.Errorf("a call past its deadline wrote %v", ks)
			}
			// The same call with a deadline it meets charges every rule.
			keys, argv = dispatchCall(t, n, clock.Now().Add(time.Hour).UnixMicro())
			if _, err := h.FCall(context.Background(), s.Function, keys, argv); err != nil {
				t.Fatal(err)
			}
			if ks := h.Keys(); len(ks) != n {
				t.Errorf("a call within its deadline wrote %d keys, want %d", len(ks), n)
			}
		})
	}
}
