package metrics

import (
	"testing"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
)

// BenchmarkDecided measures the Decided hook, which runs on every decision's goroutine,
// on a real decision of the two-rule stacked policy (one enforcing rule, one shadow):
// cached is the hook as shipped, parallel the same from every P at once (the counters'
// atomic adds share cache lines), and withLabelValues what resolving each child by its
// label values would cost instead.
func BenchmarkDecided(b *testing.B) {
	e := engine.New(engine.NewLocal(luahost.New()), compile(b, stacked))
	d, err := e.Allow(b.Context(), engine.Attrs{"user": "alice"})
	if err != nil || len(d.Rules) != 2 {
		b.Fatalf("decision %+v, %v", d, err)
	}
	b.Run("cached", func(b *testing.B) {
		m := New()
		b.ReportAllocs()
		for b.Loop() {
			m.decided(d)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		m := New()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.decided(d)
			}
		})
	})
	b.Run("withLabelValues", func(b *testing.B) {
		m := New()
		b.ReportAllocs()
		for b.Loop() {
			for i := range d.Rules {
				r := &d.Rules[i]
				outcome := "allowed"
				if !r.Allowed {
					outcome = "denied"
				}
				m.decisions.WithLabelValues(r.Policy, r.Rule, outcome).Inc()
			}
			m.requests.WithLabelValues("allowed", "backend").Inc()
		}
	})
}
