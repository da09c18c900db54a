package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rlctl/rlctl/internal/redistest"
)

// BenchmarkCalendarAndWait measures what a calendar window and a request that may wait
// cost Redis per decision, side by side with the plain rule, on a real redis-server from
// one client: fixed_window with window = "1d" and with window = "calendar_day" in
// Europe/Berlin (the call carries six period bounds), and gcra decided by Allow and by
// Wait (op delay: the general path, every rule that allows going on at once). It reports
// the script's time and Redis commands per call, and decisions/s.
//
//	go test ./engine -run '^$' -bench CalendarAndWait -benchtime 20000x -count 3
func BenchmarkCalendarAndWait(b *testing.B) {
	rdb := redistest.Shared(b).Client(b)
	ctx := context.Background()
	const window = `
policy "p" {
  rule "r" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 1000000000
    window    = %q
    %s
  }
}`
	const rate = `
policy "p" {
  rule "r" {
    algorithm = "gcra"
    key       = request.user
    rate      = "1000000/s"
    burst     = 1000000
  }
}`
	cases := []struct {
		name, policy string
		wait         bool
	}{
		{"fixed_window-1d", fmt.Sprintf(window, "1d", ""), false},
		{"fixed_window-calendar_day", fmt.Sprintf(window, "calendar_day", `time_zone = "Europe/Berlin"`), false},
		{"gcra-Allow", rate, false},
		{"gcra-Wait", rate, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if err := rdb.FlushDB(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			e := New(NewRedis(rdb), compile(b, c.policy))
			users := make([]Attrs, 1024)
			for i := range users {
				users[i] = Attrs{"user": fmt.Sprint("u", i)}
				if _, err := e.Allow(ctx, users[i]); err != nil { // warm: the library loaded
					b.Fatal(err)
				}
			}
			if !c.wait {
				benchDecide(b, rdb, e, users, true)
				return
			}
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				d, err := e.Wait(ctx, users[i%len(users)], time.Second)
				if err != nil || !d.Allowed {
					b.Fatalf("%+v %v", d, err)
				}
			}
			b.StopTimer()
			calls, usec, cmds := commandStats(b, rdb)
			if calls > 0 {
				b.ReportMetric(float64(usec)/float64(calls), "script-us/call")
				b.ReportMetric(float64(cmds)/float64(calls), "commands/call")
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
