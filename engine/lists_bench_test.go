package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/internal/redistest"
)

// BenchmarkLists measures what a deny list costs Redis per decision, with a million
// members: one gcra rule as a policy writes it, the same rule with deny = list("banned")
// on a server holding 1,000,000 members of that list (decisions of keys not on it, and
// of keys on it), from one client on a real redis-server. It reports what
// BenchmarkPenaltyBox does: the script's time and Redis commands per call, and
// decisions/s, beside the server's keys.
//
//	go test ./engine -run '^$' -bench Lists -benchtime 20000x -count 3
func BenchmarkLists(b *testing.B) {
	rdb := redistest.Shared(b).Client(b)
	ctx := context.Background()
	const policy = `
policy "p" {
  rule "r" {
    algorithm = "gcra"
    key       = request.user
    rate      = "1000000/s"
    burst     = 1000000
    %s
  }
}`
	const members = 1_000_000
	cases := []struct {
		name, extra string
		listed      bool // the decided keys are on the list
	}{
		{"plain", "", false},
		{"deny-list/not-on-it", `deny = list("banned")`, false},
		{"deny-list/on-it", `deny = list("banned")`, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if err := rdb.FlushDB(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			e := New(NewRedis(rdb), compile(b, fmt.Sprintf(policy, c.extra)))
			if c.extra != "" {
				// A million members, written as the engine writes them (the member key
				// of each user's rule key), pipelined.
				rule, err := e.listRule(e.plan.policies[0], e.plan.policies[0].Rules[0], Attrs{"user": "m0"})
				if err != nil {
					b.Fatal(err)
				}
				prefix, _ := strings.CutSuffix(rule.Key, "m0}")
				for start := 0; start < members; start += 10_000 {
					pipe := rdb.Pipeline()
					for i := start; i < start+10_000; i++ {
						pipe.Set(ctx, algorithms.ListKey(fmt.Sprintf("%sm%d}", prefix, i), "banned"), "1", 0)
					}
					if _, err := pipe.Exec(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			users := make([]Attrs, 1024)
			for i := range users {
				if c.listed {
					users[i] = Attrs{"user": fmt.Sprint("m", i*977)} // members spread over the million
				} else {
					users[i] = Attrs{"user": fmt.Sprint("u", i)}
				}
				if _, err := e.Allow(ctx, users[i]); err != nil { // warm: the library loaded
					b.Fatal(err)
				}
			}
			size, err := rdb.DBSize(ctx).Result()
			if err != nil {
				b.Fatal(err)
			}
			benchDecide(b, rdb, e, users, !c.listed)
			b.ReportMetric(float64(size), "keys")
			if err := rdb.FlushDB(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
