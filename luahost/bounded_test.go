package luahost_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/rlctl/rlctl/luahost"
)

const boundedLib = `#!lua name=bounded
redis.register_function('charge', function(keys, args)
  local n = redis.call('INCRBY', keys[1], args[1])
  redis.call('PEXPIRE', keys[1], 60000)
  return {n, redis.call('TTL', keys[1])}
end)
redis.register_function('spin', function(keys, args)
  local s = 0
  for i = 1, tonumber(args[1]) do
    s = s + i
  end
  return s
end)
redis.register_function('poll', function(keys, args)
  for i = 1, tonumber(args[1]) do
    redis.call('GET', keys[1])
  end
  return 'finished'
end)
`

// TestFCallBoundedIsFCall holds FCallBounded to FCall: the same replies and the same
// keyspace for the same calls, and an error where FCall has one.
func TestFCallBoundedIsFCall(t *testing.T) {
	clock := luahost.NewManualClock(time.Unix(1_800_000_000, 0))
	hosts := [2]*luahost.Host{luahost.New(luahost.WithClock(clock)), luahost.New(luahost.WithClock(clock))}
	for _, h := range hosts {
		if _, err := h.FunctionLoad(boundedLib, false); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"3"}, {"4"}, {"x"}, {"-7"}} {
		want, werr := hosts[0].FCall(ctx, "charge", []string{"k"}, args)
		got, err := hosts[1].FCallBounded(ctx, "charge", []string{"k"}, args)
		if !reflect.DeepEqual(got, want) || (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
			t.Errorf("charge %v: FCallBounded = %v, %v; FCall = %v, %v", args, got, err, want, werr)
		}
	}
	if a, b := hosts[0].Keys(), hosts[1].Keys(); !reflect.DeepEqual(a, b) {
		t.Errorf("keys %v after FCall, %v after FCallBounded", a, b)
	}
	if _, err := hosts[1].FCallBounded(ctx, "nosuch", nil, nil); err == nil {
		t.Error("FCallBounded of an unknown function did not fail")
	}
}

// TestFCallBoundedWatchesCommands: the instruction limit does not apply to a bounded call
// (Steps reports 0), and its context is looked at before each Redis command it runs.
func TestFCallBoundedWatchesCommands(t *testing.T) {
	h := luahost.New(luahost.WithInstructionLimit(1000))
	if _, err := h.FunctionLoad(boundedLib, false); err != nil {
		t.Fatal(err)
	}
	if _, err := h.FCall(ctx, "spin", nil, []string{"10000"}); !errors.Is(err, luahost.ErrInstructionLimit) {
		t.Fatalf("FCall past the instruction limit: %v, want ErrInstructionLimit", err)
	}
	if got, err := h.FCallBounded(ctx, "spin", nil, []string{"10000"}); err != nil || got != int64(50005000) {
		t.Fatalf("FCallBounded past the instruction limit = %v, %v; want 50005000", got, err)
	}
	if n := h.Steps(); n != 0 {
		t.Errorf("Steps after FCallBounded = %d, want 0", n)
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := h.FCallBounded(done, "poll", []string{"k"}, []string{"1"}); !errors.Is(err, context.Canceled) {
		t.Errorf("FCallBounded with a done context: %v, want context.Canceled", err)
	}
	// Canceled once it runs (the host reads its clock as the call starts, after the
	// context's first look): stopped at a command, long before the loop's end (10^7
	// commands, seconds; a host that did not look would return "finished").
	running, cancel := context.WithCancel(ctx)
	clock := &cancelingClock{}
	h = luahost.New(luahost.WithClock(clock))
	if _, err := h.FunctionLoad(boundedLib, false); err != nil {
		t.Fatal(err)
	}
	clock.cancel = cancel
	got, err := h.FCallBounded(running, "poll", []string{"k"}, []string{"10000000"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("FCallBounded canceled while it runs = %v, %v; want context.Canceled", got, err)
	}
}

// cancelingClock is a clock that calls cancel, once set, the first time it is read.
type cancelingClock struct {
	mu     sync.Mutex
	cancel func()
}

func (c *cancelingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
		c.cancel = nil
	}
	return time.Unix(1_800_000_000, 0)
}
