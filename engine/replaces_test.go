package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/rlctl/rlctl/dsl"
)

const replacesPolicy = `
policy "p" {
  rule "per_ip" {
    algorithm = "fixed_window"
    when      = request.ip != ""
    key       = request.ip
    limit     = 1
    window    = "1h"
  }
  rule "partner" {
    algorithm = "fixed_window"
    when      = request.partner != ""
    key       = request.partner
    limit     = 100
    window    = "1h"
    replaces  = ["per_ip"]
  }
  rule "audit" {
    algorithm = "fixed_window"
    when      = request.audit != ""
    key       = request.audit
    limit     = 100
    window    = "1h"
    replaces  = ["partner"]
  }
}
`

// TestReplaces: a rule that applies to a decision takes the rules it replaces out of it,
// for its own request and for every other request decided with it; a replaced rule's own
// replaces still count (as envoyproxy/ratelimit collects them from every limit found).
func TestReplaces(t *testing.T) {
	clock := newFrozen()
	for name, b := range backends(t, clock) {
		t.Run(name, func(t *testing.T) {
			e := New(b, compile(t, replacesPolicy), WithClock(clock.now))
			ctx := context.Background()
			rules := func(rs ...Attrs) []string {
				t.Helper()
				qs := make([]dsl.Request, len(rs))
				for i := range rs {
					qs[i] = rs[i]
				}
				d, err := e.AllowAll(ctx, qs, nil)
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, r := range d.Rules {
					out = append(out, r.Rule)
				}
				return out
			}
			for i, c := range []struct {
				rs   []Attrs
				want []string
			}{
				{[]Attrs{{"ip": "a", "partner": "x"}}, []string{"partner"}},
				{[]Attrs{{"ip": "a"}, {"partner": "x"}}, []string{"partner"}},
				{[]Attrs{{"ip": "a"}, {"audit": "z"}}, []string{"per_ip", "audit"}},
				{[]Attrs{{"ip": "a", "partner": "x"}, {"audit": "z"}}, []string{"audit"}},
			} {
				if i == 2 {
					// Replaced twice, per_ip charged ip a nothing: its 1 is left.
					if d, err := e.Peek(ctx, Attrs{"ip": "a"}); err != nil || d.Rules[0].Remaining != 1 {
						t.Errorf("ip a after being replaced: %+v %v, want 1 remaining", d, err)
					}
				}
				if got := rules(c.rs...); !slices.Equal(got, c.want) {
					t.Errorf("%v: rules %v, want %v", c.rs, got, c.want)
				}
			}
		})
	}
}
