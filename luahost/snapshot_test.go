package luahost

import (
	"context"
	"maps"
	"strconv"
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

// A copy of some keys put on another host gives back each key's value and expiry there,
// and nothing else: the other host's own keys are gone, a key missing or expired on the
// first is missing on the second, and later changes to either host do not reach the copy.
// Memory is counted on the second host as if its keys had been written there.
func TestCopyKeysReplaceKeys(t *testing.T) {
	clock := NewManualClock(time.Unix(1000, 0))
	src := New(WithClock(clock), WithMaxMemory(1<<30, AllKeysLRU))
	ctx := context.Background()
	do := func(h *Host, cmd ...string) {
		t.Helper()
		if _, err := h.Do(ctx, cmd...); err != nil {
			t.Fatal(cmd, err)
		}
	}
	do(src, "SET", "s", "v", "PX", "5000")
	do(src, "SET", "gone", "v", "PX", "10")
	do(src, "HSET", "h", "a", "1", "b", "2")
	do(src, "ZADD", "z", "1", "x", "2", "y")
	big := []string{"ZADD", "big"}
	for i := range 300 { // past the packed form: a skiplist
		big = append(big, strconv.Itoa(i), "m"+strconv.Itoa(i))
	}
	do(src, big...)
	do(src, "RPUSH", "l", "1", "2", "3")
	do(src, "SET", "other", "not copied")
	clock.Advance(time.Second) // "gone" expires
	keys := []string{"s", "gone", "h", "z", "big", "l", "missing"}
	want := map[string]string{}
	for _, k := range keys {
		if d, ok := src.Dump(k); ok {
			want[k] = d
		}
	}
	if _, ok := want["gone"]; ok || len(want) != 5 {
		t.Fatalf("source holds %v", want)
	}
	memBefore, evictedBefore := src.MemoryUsage(), src.Evicted()
	c := src.CopyKeys(keys...)
	if src.MemoryUsage() != memBefore || src.Evicted() != evictedBefore {
		t.Errorf("CopyKeys changed the source's memory: %d → %d", memBefore, src.MemoryUsage())
	}

	dst := New(WithClock(clock))
	do(dst, "SET", "s", "old")
	do(dst, "SET", "stale", "1")
	dst.ReplaceKeys(c)
	// Later changes on the source do not reach the copy.
	do(src, "HSET", "h", "a", "9")
	do(src, "ZADD", "big", "0", "m7")
	do(src, "LPOP", "l")
	got := map[string]string{}
	for _, k := range dst.Keys() {
		got[k], _ = dst.Dump(k)
	}
	if !maps.Equal(got, want) {
		t.Errorf("after ReplaceKeys the host holds\n%v\nwant\n%v", got, want)
	}
	// Memory as if written there: the same keys written afresh count the same.
	fresh := New(WithClock(clock))
	do(fresh, "SET", "s", "v", "PX", "4000")
	do(fresh, "HSET", "h", "a", "1", "b", "2")
	do(fresh, "ZADD", "z", "1", "x", "2", "y")
	do(fresh, big...)
	do(fresh, "RPUSH", "l", "1", "2", "3")
	if dst.MemoryUsage() != fresh.MemoryUsage() {
		t.Errorf("copied keys count %d bytes, written afresh %d", dst.MemoryUsage(), fresh.MemoryUsage())
	}
	// The copy stays usable, and changes on the second host do not reach it either.
	do(dst, "DEL", "z")
	dst.ReplaceKeys(c)
	if d, _ := dst.Dump("z"); d != want["z"] {
		t.Errorf("a second ReplaceKeys: z = %q, want %q", d, want["z"])
	}
	// The TTL is the source's: "s" expires on the second host when it would on the first.
	clock.Advance(4 * time.Second)
	if _, ok := dst.Dump("s"); !ok {
		t.Error("s expired early on the second host")
	}
	clock.Advance(time.Millisecond)
	if _, ok := dst.Dump("s"); ok {
		t.Error("s outlived its TTL on the second host")
	}
}
