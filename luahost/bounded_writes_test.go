package luahost_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rlctl/rlctl/luahost"
)

// pairLib writes two keys, reading TIME between them.
const pairLib = `#!lua name=pair
redis.register_function('pair', function(keys, args)
  redis.call('INCR', keys[1])
  redis.call('TIME')
  redis.call('INCR', keys[2])
  return 'done'
end)
`

// cancelAtClock cancels at its at'th reading (1-based).
type cancelAtClock struct {
	mu     sync.Mutex
	n, at  int
	cancel func()
}

func (c *cancelAtClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n++; c.n == c.at {
		c.cancel()
	}
	return time.Unix(1_800_000_000, 0)
}

// TestFCallBoundedWritesAllOrNothing: a bounded call stopped by its context is stopped
// before its first write, or not at all. The host reads its clock as the call starts (1)
// and at TIME (2): canceled at the start, the call writes nothing; canceled between its
// two writes, it makes both. Before, it stopped between them, leaving one.
func TestFCallBoundedWritesAllOrNothing(t *testing.T) {
	for _, tc := range []struct {
		at      int
		wantErr bool
		keys    int
	}{{at: 1, wantErr: true, keys: 0}, {at: 2, wantErr: false, keys: 2}} {
		ctx, cancel := context.WithCancel(context.Background())
		clock := &cancelAtClock{at: tc.at, cancel: cancel}
		h := luahost.New(luahost.WithClock(clock))
		if _, err := h.FunctionLoad(pairLib, false); err != nil {
			t.Fatal(err)
		}
		got, err := h.FCallBounded(ctx, "pair", []string{"a", "b"}, nil)
		if tc.wantErr != (err != nil) || err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("canceled at clock reading %d: %v, %v; want an error %v (context.Canceled)", tc.at, got, err, tc.wantErr)
		}
		if ks := h.Keys(); len(ks) != tc.keys {
			t.Errorf("canceled at clock reading %d: keys %v, want %d of the call's 2", tc.at, ks, tc.keys)
		}
		cancel()
	}
}
