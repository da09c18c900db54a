package luahost

import (
	"context"
	"strings"
	"testing"
)

// keySlot agrees with Redis's documented examples (CLUSTER KEYSLOT).
func TestKeySlot(t *testing.T) {
	if got := keySlot("foo"); got != 12182 {
		t.Errorf(`keySlot("foo") = %d, want 12182`, got)
	}
	if keySlot("{user1000}.following") != keySlot("{user1000}.followers") {
		t.Error("keys of one hash tag hash apart")
	}
	if keySlot("foo{}{bar}") == keySlot("bar") || keySlot("foo{{bar}}zap") != keySlot("{bar") {
		t.Error("an empty tag must hash the whole key, and a tag ends at the first '}'")
	}
}

// Strict keys allow what a cluster node serves: the declared keys and keys of their slots.
func TestStrictKeysAllowTheDeclaredSlots(t *testing.T) {
	h := New()
	ctx := context.Background()
	src := `return redis.call("set", KEYS[1] .. ":prev", 1)`
	if _, err := h.Eval(ctx, src, []string{"rl:{a}:x"}, nil); err != nil {
		t.Fatalf("a key in the declared key's slot: %v", err)
	}
	_, err := h.Eval(ctx, src, []string{"rl:a:x"}, nil)
	if err == nil || !strings.Contains(err.Error(), "neither in KEYS nor in the cluster slot") {
		t.Fatalf("a key of another slot: %v, want refused", err)
	}
}
