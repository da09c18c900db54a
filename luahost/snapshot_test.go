package luahost

import (
	"context"
	"testing"
	"time"
)

// A restored snapshot gives back every type of value and its expiry, and later changes
// to the host do not reach the snapshot.
func TestSnapshotRestore(t *testing.T) {
	clock := NewManualClock(time.Unix(1000, 0))
	h := New(WithClock(clock))
	ctx := context.Background()
	for _, cmd := range [][]string{
		{"SET", "s", "v", "PX", "5000"},
		{"HSET", "h", "a", "1", "b", "2"},
		{"ZADD", "z", "1", "x", "2", "y", "2", "w"},
		{"RPUSH", "l", "1", "2", "3"},
	} {
		if _, err := h.Do(ctx, cmd...); err != nil {
			t.Fatal(cmd, err)
		}
	}
	dumps := func() map[string]string {
		out := map[string]string{}
		for _, k := range h.Keys() {
			out[k], _ = h.Dump(k)
		}
		return out
	}
	before := dumps()
	snap := h.Snapshot()
	for _, cmd := range [][]string{
		{"SET", "s", "changed"},
		{"HSET", "h", "a", "9", "c", "3"},
		{"ZADD", "z", "0", "y", "5", "q"},
		{"LPOP", "l"},
		{"SET", "new", "1"},
	} {
		if _, err := h.Do(ctx, cmd...); err != nil {
			t.Fatal(cmd, err)
		}
	}
	for range 2 { // restoring twice gives the same keyspace
		h.Restore(snap)
		after := dumps()
		if len(after) != len(before) {
			t.Fatalf("restored keys %v, want %v", after, before)
		}
		for k, v := range before {
			if after[k] != v {
				t.Errorf("%s restored as %s, want %s", k, after[k], v)
			}
		}
		if _, err := h.Do(ctx, "ZADD", "z", "7", "x"); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := h.Do(ctx, "ZRANGE", "z", "0", "-1"); err != nil || len(r.([]any)) != 3 {
		t.Errorf("ZRANGE after restore: %v %v", r, err)
	}
}
