package verify

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/luahost"
)

// dumpOf runs cmds on a fresh host whose clock is at the trace's start and returns key's
// Dump.
func dumpOf(t *testing.T, key string, cmds ...[]string) string {
	t.Helper()
	h := luahost.New(luahost.WithClock(luahost.NewManualClock(Epoch)))
	for _, c := range cmds {
		if _, err := h.Do(context.Background(), c...); err != nil {
			t.Fatalf("%v: %v", c, err)
		}
	}
	s, _ := h.Dump(key)
	return s
}

// TestStateText: findings show a key's state readably, its expiry as a trace time.
func TestStateText(t *testing.T) {
	for _, c := range []struct {
		cmds [][]string
		want string
	}{
		{nil, "(no key)"},
		{[][]string{{"SET", "k", "12:5"}, {"PEXPIRE", "k", "1500"}}, `string "12:5", expires at +1.5s`},
		{[][]string{{"HSET", "k", "w", "3", "n", "10"}}, "hash {n=10, w=3}, no TTL"},
		{[][]string{{"ZADD", "k", "1", "a", "2", "b"}, {"PEXPIRE", "k", "60000"}}, "zset {a:1, b:2}, expires at +1m"},
	} {
		if got := stateText(dumpOf(t, "k", c.cmds...)); got != c.want {
			t.Errorf("%v: %q, want %q", c.cmds, got, c.want)
		}
	}
	// A large set prints its first items and counts the rest.
	add := []string{"ZADD", "k"}
	for i := range 50 {
		add = append(add, fmt.Sprint(i), fmt.Sprintf("m%02d", i))
	}
	if got := stateText(dumpOf(t, "k", add)); !strings.HasSuffix(got, "m07:7, … 42 more}, no TTL") {
		t.Errorf("50 members: %q", got)
	}
}

// TestStateDiff: an atomicity finding names what changed, not both whole states.
func TestStateDiff(t *testing.T) {
	set := func(extra ...[]string) string {
		add := []string{"ZADD", "k"}
		for i := range 50 {
			add = append(add, fmt.Sprint(i), fmt.Sprintf("m%02d", i))
		}
		return dumpOf(t, "k", append([][]string{add, {"PEXPIRE", "k", "2000"}}, extra...)...)
	}
	for _, c := range []struct {
		name          string
		before, after string
		want          string
	}{
		{"a trim", set(), set([]string{"ZREMRANGEBYSCORE", "k", "0", "1"}), "zset: removed m00:0; removed m01:1"},
		{"a field", dumpOf(t, "k", []string{"HSET", "k", "n", "3", "w", "7"}), dumpOf(t, "k", []string{"HSET", "k", "n", "4", "w", "7", "p", "1"}), "hash: n=3 became n=4; added p=1"},
		{"an expiry", set(), set([]string{"PEXPIRE", "k", "3000"}), "zset: expiry at +2s became at +3s"},
		{"a string", dumpOf(t, "k", []string{"SET", "k", "1"}), dumpOf(t, "k", []string{"SET", "k", "2"}), `string: "1" became "2"`},
		{"a new key", "", dumpOf(t, "k", []string{"SET", "k", "1"}), `(no key) became string "1", no TTL`},
	} {
		if got := stateDiff(c.before, c.after); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A rule with further keys: its state names each key, and a diff only the keys that
// changed.
func TestStateOfFurtherKeys(t *testing.T) {
	h := luahost.New(luahost.WithClock(luahost.NewManualClock(Epoch)))
	g := &rig{h: h}
	do := func(args ...string) {
		if _, err := h.Do(context.Background(), args...); err != nil {
			t.Fatal(err)
		}
	}
	do("HSET", "k:cur", "k", "1", "n", "2")
	before := g.dump("k", "cur", "prev")
	do("RENAME", "k:cur", "k:prev")
	do("HSET", "k:cur", "k", "2", "n", "1")
	after := g.dump("k", "cur", "prev")
	if got, want := stateText(before), "key (no key); cur hash {k=1, n=2}, no TTL; prev (no key)"; got != want {
		t.Errorf("state %q, want %q", got, want)
	}
	if got, want := stateDiff(before, after), "cur hash: k=1 became k=2; n=2 became n=1; prev (no key) became hash {k=1, n=2}, no TTL"; got != want {
		t.Errorf("diff %q, want %q", got, want)
	}
}
