package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/dsl"
)

// TestMaxRules: a decision of MaxRules rules is made; one of MaxRules+1 is ErrRequest and
// charges nothing, both when many requests of AllowAll apply a rule each and when one
// request applies that many, on Redis and on luahost.
func TestMaxRules(t *testing.T) {
	ctx := context.Background()
	var many strings.Builder
	many.WriteString("policy \"wide\" {\n")
	for i := range MaxRules + 1 {
		fmt.Fprintf(&many, "  rule \"r%d\" {\n    algorithm = \"fixed_window\"\n    when = request.n > %d\n    key = request.user\n    limit = 5\n    window = \"1h\"\n  }\n", i, i)
	}
	many.WriteString("}\n")
	wide := compile(t, many.String())
	for name, b := range backends(t, newFrozen()) {
		t.Run(name, func(t *testing.T) {
			clock := newFrozen()
			e := New(b, compile(t, descriptorPolicy), WithClock(clock.now), WithTimeout(0))
			batch := func(prefix string, n int) []dsl.Request {
				rs := make([]dsl.Request, n)
				for i := range rs {
					rs[i] = Attrs{"remote_address": fmt.Sprintf("%s%d", prefix, i)}
				}
				return rs
			}
			d, err := e.AllowAll(ctx, batch("a", MaxRules), nil)
			if err != nil || !d.Allowed || len(d.Rules) != MaxRules {
				t.Fatalf("AllowAll of %d rules: %v, %+v", MaxRules, err, d)
			}
			over := batch("b", MaxRules+1)
			if _, err := e.AllowAll(ctx, over, nil); !errors.Is(err, ErrRequest) || !strings.Contains(err.Error(), "MaxRules") {
				t.Fatalf("AllowAll of %d rules: %v, want ErrRequest naming MaxRules", MaxRules+1, err)
			}
			if d, err := e.Peek(ctx, over[0]); err != nil || d.Rules[0].Remaining != 2 {
				t.Fatalf("after a refused call, its first key: %v, %+v; want uncharged (2 remaining)", err, d)
			}

			e = New(b, wide, WithClock(clock.now), WithTimeout(0))
			at := func(n int) dsl.Request { return Attrs{"user": "u", "n": fmt.Sprint(n)} }
			if d, err := e.Allow(ctx, at(MaxRules)); err != nil || !d.Allowed || len(d.Rules) != MaxRules {
				t.Fatalf("Allow of %d rules: %v, %+v", MaxRules, err, d)
			}
			if _, err := e.Allow(ctx, at(MaxRules+1)); !errors.Is(err, ErrRequest) {
				t.Fatalf("Allow of %d rules: %v, want ErrRequest", MaxRules+1, err)
			}
			if d, err := e.Peek(ctx, at(1)); err != nil || d.Rules[0].Remaining != 4 {
				t.Fatalf("after a refused call: %v, %+v; want r0 charged once (4 remaining)", err, d)
			}
		})
	}
}
