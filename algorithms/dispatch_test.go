package algorithms

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlctl/rlctl/internal/redistest"
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

// waitPlugin's check runs until the server's clock passes its parameter (µs), then allows;
// its commit writes the key. It makes a call's checks end after a given server instant,
// by the server's own clock, whatever the machine's speed.
var waitPlugin = &Algorithm{Name: "wait_until", Params: []Param{{Name: "until", Kind: Count}}, Source: `
params = {'pos'}
function check(key, now, cost, p)
  local t
  repeat
    t = call('TIME')
  until t[1] * 1000000 + t[2] > p[1]
  return 1, 1, 0, 0, 1, true
end
function commit(key, w)
  call('SET', key, '1')
end
`}

// TestDispatchDeadlineBeforeChargeRedis: on a real redis-server, where TIME advances while
// a script runs, a call that starts before its deadline and whose checks end after it
// (a rule that waits for the server's clock to pass it) writes nothing and answers the
// deadline error. Before the dispatcher read TIME again before charging, it charged both
// rules for a caller that had given up.
func TestDispatchDeadlineBeforeChargeRedis(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Shared(t).Client(t)
	fw, _ := Lookup("fixed_window")
	s, err := Assemble([]*Algorithm{waitPlugin, fw})
	if err != nil {
		t.Fatal(err)
	}
	// The call must reach the server before its deadline: margins grow until one does
	// (a loaded machine may take long to send it); each attempt is on keys of its own.
	for attempt, margin := range []time.Duration{50 * time.Millisecond, 500 * time.Millisecond, 5 * time.Second} {
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		deadline := now.Add(margin).UnixMicro()
		keys := []string{fmt.Sprintf("rl:dispatch:wait:%d:%d", now.UnixNano(), attempt), fmt.Sprintf("rl:dispatch:fw:%d:%d", now.UnixNano(), attempt)}
		c := Call{Op: OpCheck, Now: ServerTime, Deadline: deadline, Rules: []Rule{
			{Key: keys[0], Algorithm: waitPlugin, Cost: 1, Params: []int64{deadline + 1000}},
			{Key: keys[1], Algorithm: fw, Cost: 1, Params: []int64{100, 60_000_000}},
		}}
		argv, err := c.Argv()
		if err != nil {
			t.Fatal(err)
		}
		_, err = rdb.Eval(ctx, s.Source, c.Keys(), argv).Result()
		if n, xerr := rdb.Exists(ctx, keys...).Result(); xerr != nil || n != 0 {
			t.Fatalf("a call past its deadline (%v) left %d of its keys, %v", err, n, xerr)
		}
		if !IsDeadlineError(err) {
			t.Fatalf("a call whose checks ended past its deadline: %v, want the deadline error", err)
		}
		if strings.Contains(err.Error(), "checked the call past its deadline") {
			return
		}
		t.Logf("attempt %d: the call reached the server after its deadline (%v); a longer margin", attempt+1, err)
	}
	t.Fatal("no call reached the server before its deadline")
}
