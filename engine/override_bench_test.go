package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rlctl/rlctl/internal/redistest"
)

// BenchmarkOverride measures what an override costs Redis per decision: one gcra rule as
// a policy writes it, the same rule overridable with no override set, and overridable with
// an override in force on every key (figures that allow every request, as the plain
// rule's do), on a real redis-server from one client. It reports what BenchmarkPenaltyBox
// does: the script's time and Redis commands per call, Lua instructions per call, and
// decisions/s.
//
//	go test ./engine -run '^$' -bench Override -benchtime 20000x -count 3
func BenchmarkOverride(b *testing.B) {
	rdb := redistest.Shared(b).Client(b)
	ctx := context.Background()
	const policy = `
policy "p" {
  rule "r" {
    algorithm = "gcra"
    key       = request.user
    rate      = "%s"
    burst     = %d
    %s
  }
}`
	cases := []struct {
		name, rate string
		burst      int
		extra      string
		set        bool
	}{
		{"plain", "1000000/s", 1000000, "", false},
		{"overridable", "1000000/s", 1000000, "overridable = true", false},
		{"overridden", "1/h", 1, "overridable = true", true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if err := rdb.FlushDB(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			e := New(NewRedis(rdb), compile(b, fmt.Sprintf(policy, c.rate, c.burst, c.extra)))
			users := make([]Attrs, 1024)
			set := map[string]string{"rate": "1000000/s", "burst": "1000000"}
			for i := range users {
				users[i] = Attrs{"user": fmt.Sprint("u", i)}
				if c.set {
					if err := e.SetOverride(ctx, users[i], "p", "r", set, time.Time{}); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := e.Allow(ctx, users[i]); err != nil { // warm: the library loaded
					b.Fatal(err)
				}
			}
			benchDecide(b, rdb, e, users, true)
			var figures []int64
			if c.set {
				ru := e.plan.policies[0].Rules[0]
				w, _, err := ru.Figures(Attrs{"user": "u0"}, set)
				if err != nil {
					b.Fatal(err)
				}
				figures = w
			}
			b.ReportMetric(luaSteps(b, e.plan, false, figures), "lua-steps/call")
		})
	}
}
