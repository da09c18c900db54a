package native

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/luahost"
)

// fixedWindow returns a check of cost on key under fixed_window {limit, window µs}.
func fixedWindow(key string, limit, window, cost int64) algorithms.Call {
	a, _ := algorithms.Default().Algorithm("fixed_window")
	return algorithms.Call{Op: algorithms.OpCheck, Now: algorithms.ServerTime,
		Rules: []algorithms.Rule{{Key: key, Algorithm: a, Cost: cost, Params: []int64{limit, window}}}}
}

func decide(t *testing.T, s *Store, c algorithms.Call) algorithms.Reply {
	t.Helper()
	rep, ok, err := s.Decide(&c)
	if !ok || err != nil {
		t.Fatalf("Decide: decided %v, err %v", ok, err)
	}
	return rep
}

func TestStoreExpiresKeysByTheHostsClock(t *testing.T) {
	clock := luahost.NewManualClock(time.UnixMilli(1_900_000_000_000))
	s := New(luahost.New(luahost.WithClock(clock)))
	decide(t, s, fixedWindow("k", 2, 1_000_000, 1)) // the window ends within a second
	if s.Len() != 1 {
		t.Fatalf("Len = %d, want 1", s.Len())
	}
	if rep := decide(t, s, fixedWindow("k", 2, 1_000_000, 0)); rep.Rules[0].Remaining != 1 {
		t.Fatalf("a peek sees %d remaining, want 1", rep.Rules[0].Remaining)
	}
	// ttl_ms rounds the window's end up and adds 1 ms: the key is gone 2 ms after it.
	clock.Advance(time.Second + 2*time.Millisecond)
	if rep := decide(t, s, fixedWindow("k", 2, 1_000_000, 0)); rep.Rules[0].Remaining != 2 {
		t.Fatalf("past its TTL a peek sees %d remaining, want 2", rep.Rules[0].Remaining)
	}
	if s.Len() != 0 {
		t.Fatalf("Len = %d after the key expired, want 0", s.Len())
	}
}

func TestStoreSweepsExpiredKeys(t *testing.T) {
	clock := luahost.NewManualClock(time.UnixMilli(1_900_000_000_000))
	s := New(luahost.New(luahost.WithClock(clock)))
	for i := range 2000 {
		decide(t, s, fixedWindow(fmt.Sprint("old", i), 5, 1000, 1))
	}
	clock.Advance(time.Second)
	for i := range 2000 {
		decide(t, s, fixedWindow(fmt.Sprint("new", i), 5, 3_600_000_000, 1))
	}
	// Each shard sweeps when it has doubled since its last sweep: the expired keys do not
	// stay (2000 live keys, at most twice as many held).
	if n := s.Len(); n < 2000 || n > 4000 {
		t.Fatalf("Len = %d, want 2000..4000", n)
	}
}

func TestStoreCapEvictsLeastRecentlyUsed(t *testing.T) {
	clock := luahost.NewManualClock(time.UnixMilli(1_900_000_000_000))
	const maxBytes = 64 * 1024
	s := New(luahost.New(luahost.WithClock(clock)), WithMaxMemory(maxBytes, luahost.AllKeysLRU))
	const keys = 10_000
	for i := range keys {
		decide(t, s, fixedWindow(fmt.Sprint("client:", i), 5, 3_600_000_000, 1))
		// A key used again and again stays.
		decide(t, s, fixedWindow("hot", 1_000_000, 3_600_000_000, 1))
	}
	per := int64(len("client:0000") + entryBytes)
	if n := int64(s.Len()); n*per > maxBytes*11/10 || n < maxBytes/per/2 {
		t.Fatalf("Len = %d keys of about %d bytes under a cap of %d", n, per, maxBytes)
	}
	if s.Evicted() == 0 {
		t.Fatal("nothing evicted")
	}
	if rep := decide(t, s, fixedWindow("hot", 1_000_000, 3_600_000_000, 0)); rep.Rules[0].Remaining != 1_000_000-keys {
		t.Fatalf("the hot key was evicted: %d remaining", rep.Rules[0].Remaining)
	}
}

func TestStoreCapNoEvictionRefusesNewKeys(t *testing.T) {
	clock := luahost.NewManualClock(time.UnixMilli(1_900_000_000_000))
	s := New(luahost.New(luahost.WithClock(clock)), WithMaxMemory(shardCount*200, luahost.NoEviction))
	a, _ := algorithms.Default().Algorithm("fixed_window")
	var full error
	i := 0
	for ; i < 10_000 && full == nil; i++ {
		c := fixedWindow(fmt.Sprint("k", i), 5, 3_600_000_000, 1)
		// Every call also charges a key that exists: a refused call writes neither.
		c.Rules = append(c.Rules, algorithms.Rule{Key: "k0", Algorithm: a, Cost: 1, Params: []int64{1 << 40, 3_600_000_000}})
		if i == 0 {
			c.Rules = c.Rules[:1]
		}
		_, ok, err := s.Decide(&c)
		if !ok {
			t.Fatal("not decided")
		}
		full = err
	}
	if !errors.Is(full, ErrFull) {
		t.Fatalf("after %d keys: %v, want ErrFull", i, full)
	}
	rep := decide(t, s, fixedWindow("k0", 1<<40, 3_600_000_000, 0))
	if got, want := rep.Rules[0].Remaining, int64(1<<40)-int64(i-1); got != want {
		t.Fatalf("k0 has %d remaining, want %d: the refused call charged it", got, want)
	}
	if s.Evicted() != 0 {
		t.Fatalf("evicted %d under noeviction", s.Evicted())
	}
}

// TestStoreConcurrentDecisionsAndHandovers runs decisions in Go and script calls over the
// same keys from many goroutines: the count a key ends with is what was admitted, never
// above the limit.
func TestStoreConcurrentDecisionsAndHandovers(t *testing.T) {
	clock := luahost.NewManualClock(time.UnixMilli(1_900_000_000_000))
	h := luahost.New(luahost.WithClock(clock))
	script := algorithms.Default()
	if _, err := h.FunctionLoad(script.Library, true); err != nil {
		t.Fatal(err)
	}
	s := New(h)
	const limit, window = 300, 3_600_000_000
	var mu sync.Mutex
	admitted := map[string]int64{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				key := fmt.Sprint("k", (g+i)%3)
				c := fixedWindow(key, limit, window, 1)
				rep, ok, err := s.Decide(&c)
				if !ok {
					// Every third goroutine's calls go through the script instead.
					t.Error("not decided")
					return
				}
				if g%3 == 0 {
					// A partial admission is left to the script: the keys move to the
					// host and back.
					c.Op, c.Units = algorithms.OpMost, 1
					var v any
					s.Hand(c.Keys(), func() {
						argv, _ := c.Argv()
						v, err = h.FCall(context.Background(), script.Function, c.Keys(), argv)
					})
					if err == nil {
						var most algorithms.Reply
						if most, err = algorithms.DecodeCallReply(&c, v); err == nil && most.Granted > 0 {
							mu.Lock()
							admitted[key]++
							mu.Unlock()
						}
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				if rep.Allowed {
					mu.Lock()
					admitted[key]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for k, n := range admitted {
		if n > limit {
			t.Errorf("%s: %d admitted, above the limit of %d", k, n, limit)
		}
		rep := decide(t, s, fixedWindow(k, limit, window, 0))
		if used := limit - rep.Rules[0].Remaining; used != n {
			t.Errorf("%s counts %d, but %d were admitted", k, used, n)
		}
	}
}
