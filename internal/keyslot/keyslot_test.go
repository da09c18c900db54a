package keyslot

import "testing"

// Of agrees with Redis: the values are CLUSTER KEYSLOT's on a cluster-enabled
// redis-server 7.0.15 (among them the examples of Redis's documentation, and CRC-16/XMODEM's
// check value 0x31C3 for "123456789").
func TestKeySlot(t *testing.T) {
	for _, c := range []struct {
		key  string
		slot uint16
	}{
		{"foo", 12182},
		{"somekey", 11058},
		{"foo{hello}bar", 866},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"foo{}{bar}", 8363},    // an empty tag: the whole key
		{"foo{{bar}}zap", 4015}, // the tag "{bar": from the first '{' to the first '}'
		{"{bar", 4015},
		{"bar", 5061},
		{"123456789", 12739},
		{"", 0},
		{"{", 4092},
		{"}", 12090},
		{"{}", 15257},
		{"a{b", 13340},   // no '}' after the '{': the whole key
		{"a}b{c}", 7365}, // a '}' before the '{' does not count
		{"rl:{a}:x", 15495},
		{"rl:{a}:x:prev", 15495},
		{"a", 15495},
		{"rl:a:x", 8691},
		{"rl:a:x:prev", 4215},
		{"\xff", 7920},
		{"ключ", 10303},
	} {
		if got := Of(c.key); got != c.slot {
			t.Errorf("Of(%q) = %d, want %d", c.key, got, c.slot)
		}
	}
}
