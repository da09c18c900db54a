package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/algorithms"
)

func TestRenderKey(t *testing.T) {
	long := strings.Repeat("x", 200)
	cases := []struct {
		name, shard, key string
		sharded          bool
		want             string
	}{
		{"plain", "", "203.0.113.7", false, "rl:api:per_ip:203.0.113.7"},
		{"sharded", "acme", "u1", true, "rl:{acme}:api:per_ip:u1"},
		{"empty shard", "", "u1", true, "rl:{-}:api:per_ip:u1"},
		{"braces in key", "", "a}{b", false, "rl:api:per_ip:a%7D%7Bb"},
		{"braces in shard", "x}y", "k", true, "rl:{x%7Dy}:api:per_ip:k"},
		{"percent and space", "", "50% off", false, "rl:api:per_ip:50%25%20off"},
		{"binary", "", "\x00\xff", false, "rl:api:per_ip:%00%FF"},
		{"long", "", long, false, "rl:api:per_ip:#aa20c23e3201834050679e1d88941b9a6fed0557c9a705cb2c315e2e63fd486d"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := string(renderKey(nil, "api", "per_ip", c.sharded, c.shard, c.key))
			if got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestHostileKeysKeepTheirSlot: whatever a request's values hold, a sharded policy's keys
// all hash to the slot of the shard value, and an unsharded key never gains a hash tag.
func TestHostileKeysKeepTheirSlot(t *testing.T) {
	hostile := []string{"", "{", "}", "{}", "}{", "a{b}c", "{x}", "%7B", "\x00{\xff}", strings.Repeat("{", 300)}
	for _, shard := range hostile {
		want := Slot(string(renderKey(nil, "p", "r1", true, shard, "k")))
		for _, key := range hostile {
			k := string(renderKey(nil, "p", "r2", true, shard, key))
			if got := Slot(k); got != want {
				t.Fatalf("shard %q key %q: slot %d, want %d (%q)", shard, key, got, want, k)
			}
			plain := string(renderKey(nil, "p", "r", false, "", key))
			if strings.ContainsAny(plain, "{}") {
				t.Fatalf("unsharded key %q gained a brace: %q", key, plain)
			}
		}
	}
}

func TestSlotMatchesRedisCluster(t *testing.T) {
	// Values from the Redis Cluster specification; TestClusterCompensation also compares
	// Slot with a real node's CLUSTER KEYSLOT on hostile keys.
	for key, want := range map[string]int{
		"123456789":         12739,
		"foo":               12182,
		"{user1000}.a":      Slot("user1000"),
		"rl:{acme}:api:r:k": Slot("acme"),
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestWindow(t *testing.T) {
	cases := map[string]struct {
		params []int64
		want   time.Duration
	}{
		"fixed_window": {[]int64{100, 60_000_000}, time.Minute},
		"token_bucket": {[]int64{600, 10, 1_000_000}, time.Minute},
		"gcra":         {[]int64{10, 1_000_000, 100}, 10 * time.Second},
		"concurrency":  {[]int64{10, 30_000_000, 0}, 0},
	}
	for name, c := range cases {
		a, _ := algorithms.Lookup(name)
		if got := window(&algorithms.Rule{Algorithm: a, Params: c.params}); got != c.want {
			t.Errorf("%s%v: window %v, want %v", name, c.params, got, c.want)
		}
	}
}
