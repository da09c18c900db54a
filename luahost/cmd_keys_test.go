package luahost_test

import (
	"testing"

	"github.com/rlctl/rlctl/luahost"
)

// TestExpiretimeNearMaxInt64 pins EXPIRETIME of expire times within 500ms of 2^63,
// where Redis's rounding (ttl+500)/1000 overflows a long long: redis-server 7.0 on x86-64
// answers these (found by fuzz:FuzzCommands).
func TestExpiretimeNearMaxInt64(t *testing.T) {
	h := luahost.New()
	for _, c := range []struct {
		at   string
		want int64
	}{
		{"9223372036854775807", 9223372036854776},
		{"9223372036854775500", 9223372036854776},
		{"9223372036854775499", 9223372036854775},
		{"9223372036854775308", 9223372036854775},
		{"9223372036854775307", 9223372036854775},
	} {
		if _, err := h.Do(ctx, "SET", "k", "v"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Do(ctx, "PEXPIREAT", "k", c.at); err != nil {
			t.Fatal(err)
		}
		if got, err := h.Do(ctx, "EXPIRETIME", "k"); err != nil || got != c.want {
			t.Errorf("PEXPIREAT k %s; EXPIRETIME k = %v, %v; want %d", c.at, got, err, c.want)
		}
	}
}
