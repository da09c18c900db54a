package luahost

import (
	"context"
	"strings"
	"testing"
)

// Strict keys allow what a cluster node serves: the declared keys and keys of their slots.
func TestStrictKeysAllowTheDeclaredSlots(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		keys    []string
		src     string
		refused string // the key refused, or "" when the script runs
	}{
		{"a key in the declared key's tag", []string{"rl:{a}:x"}, `return redis.call("set", "rl:{a}:x:prev", 1)`, ""},
		{"a key in the declared key's slot", []string{"rl:{a}:x"}, `return redis.call("get", "a")`, ""},
		{"no tag: another slot", []string{"rl:a:x"}, `return redis.call("set", "rl:a:x:prev", 1)`, "rl:a:x:prev"},
		{"the slot of the second KEYS", []string{"k", "rl:{a}:x"}, `return redis.call("get", "{a}")`, ""},
		{"no KEYS", nil, `return redis.call("get", "rl:{a}:x")`, "rl:{a}:x"},
		// Every key of a command is checked, also those after one allowed by its slot.
		{"a key after one in the slot", []string{"rl:{a}:x"}, `return redis.call("del", "rl:{a}:x:prev", "other")`, "other"},
		{"keys of the slot and declared", []string{"rl:{a}:x"}, `return redis.call("mset", "rl:{a}:y", 1, KEYS[1], 2, "{a}z", 3)`, ""},
		{"rename into the slot", []string{"rl:{a}:x"}, `redis.call("set", KEYS[1], 1) return redis.call("rename", KEYS[1], "rl:{a}:x:prev")`, ""},
		{"rename out of the slot", []string{"rl:{a}:x"}, `redis.call("set", KEYS[1], 1) return redis.call("rename", KEYS[1], "rl:{b}:x")`, "rl:{b}:x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := New().Eval(ctx, c.src, c.keys, nil)
			switch {
			case c.refused == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case c.refused != "" && (err == nil || !strings.Contains(err.Error(),
				"script accessed key '"+c.refused+"' that is neither in KEYS nor in the cluster slot of one of them (strict keys)")):
				t.Fatalf("err = %v, want %q refused", err, c.refused)
			}
		})
	}
}

// The slots of KEYS cached in one run are not those of the next: each run checks against
// its own KEYS, for scripts and functions alike.
func TestStrictKeysSlotsPerRun(t *testing.T) {
	ctx := context.Background()
	h := New()
	src := `return redis.call("get", ARGV[1])`
	if _, err := h.Eval(ctx, src, []string{"{a}"}, []string{"{a}:1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Eval(ctx, src, []string{"{b}"}, []string{"{a}:1"}); err == nil || !strings.Contains(err.Error(), "(strict keys)") {
		t.Fatal("a key of the previous run's slot allowed")
	}
	if _, err := h.Eval(ctx, src, []string{"{b}"}, []string{"{b}:1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.FunctionLoad("#!lua name=lib\nredis.register_function('f', function(keys, args) return redis.call('get', args[1]) end)", false); err != nil {
		t.Fatal(err)
	}
	if _, err := h.FCall(ctx, "f", []string{"{c}"}, []string{"{b}:1"}); err == nil || !strings.Contains(err.Error(), "(strict keys)") {
		t.Fatal("FCall: a key of the previous run's slot allowed")
	}
	if _, err := h.FCall(ctx, "f", []string{"{c}"}, []string{"x{c}"}); err != nil {
		t.Fatalf("FCall: %v", err)
	}
}
