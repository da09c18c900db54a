package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// BenchmarkPenaltyBox measures what a penalty box costs Redis per decision: one gcra rule,
// without a box and with one (block_for), on a real redis-server from one client, each
// case on fresh keys: allowed decisions (the box read, nothing else), and decisions of a
// key in its block (denied by the box). It reports the script's run time per call as the
// server counts it (INFO commandstats: the Lua and its commands, not the network) and the
// Redis commands each call runs, beside decisions/s.
//
//	go test ./engine -run '^$' -bench PenaltyBox -benchtime 20000x -count 3
func BenchmarkPenaltyBox(b *testing.B) {
	rdb := redistest.Shared(b).Client(b)
	ctx := context.Background()
	const rule = `
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
		box        string
		blocked    bool
	}{
		{"allowed/no-box", "1000000/s", 1000000, "", false},
		{"allowed/box", "1000000/s", 1000000, `block_for = "1h"`, false},
		{"denied/no-box", "1/h", 1, "", true},
		{"denied/box-blocked", "1/h", 1, `block_for = "1h"`, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if err := rdb.FlushDB(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			e := New(NewRedis(rdb), compile(b, fmt.Sprintf(rule, c.rate, c.burst, c.box)))
			users := make([]Attrs, 1024)
			for i := range users {
				users[i] = Attrs{"user": fmt.Sprint("u", i)}
				// Warm: the library loaded, and for the denied cases every key spent (and
				// boxed: its first denial is the offence).
				for range 2 {
					if _, err := e.Allow(ctx, users[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			benchDecide(b, rdb, e, users, !c.blocked)
			b.ReportMetric(luaSteps(b, e.plan, c.blocked, nil), "lua-steps/call")
		})
	}
}

// benchDecide runs b.N decisions, of users in turn, on e, each of which must be allowed as
// allowed says, and reports the script's run time and the Redis commands per call as
// rdb's INFO commandstats counts them since the CONFIG RESETSTAT it makes first, and
// decisions/s.
func benchDecide(b *testing.B, rdb *redis.Client, e *Engine, users []Attrs, allowed bool) {
	ctx := context.Background()
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		d, err := e.Allow(ctx, users[i%len(users)])
		if err != nil {
			b.Fatal(err)
		}
		if d.Allowed != allowed {
			b.Fatalf("allowed %v, want %v", d.Allowed, allowed)
		}
	}
	b.StopTimer()
	calls, usec, cmds := commandStats(b, rdb)
	if calls > 0 {
		b.ReportMetric(float64(usec)/float64(calls), "script-us/call")
		b.ReportMetric(float64(cmds)/float64(calls), "commands/call")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// luaSteps returns the Lua instructions a call of plan's one rule runs on average (a
// measure no load changes), on a luahost that counts them: 1,024 keys, each given the
// override figures (when not nil), called twice to warm (spent and boxed when blocked),
// then once more, counted.
func luaSteps(b *testing.B, plan *Plan, blocked bool, figures []int64) float64 {
	s := plan.Script()
	ru := plan.policies[0].Rules[0]
	h := luahost.New(luahost.WithInstructionLimit(1<<40), luahost.WithCommands(s.Commands()...))
	if _, err := h.FunctionLoad(s.Library, false); err != nil {
		b.Fatal(err)
	}
	now := int64(1_900_000_000_000_000)
	do := func(c *algorithms.Call) algorithms.Reply {
		argv, err := c.Argv()
		if err != nil {
			b.Fatal(err)
		}
		v, err := h.FCall(context.Background(), s.Function, c.Keys(), argv)
		if err != nil {
			b.Fatal(err)
		}
		r, err := algorithms.DecodeCallReply(c, v)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	rule := func(i int) algorithms.Rule {
		return algorithms.Rule{Key: fmt.Sprintf("{u%d}", i), Algorithm: ru.Algorithm, Cost: 1, Params: plan.Compiled(ru).Params,
			Compiled: plan.Compiled(ru), Box: ru.Box, Overridable: ru.Overridable}
	}
	call := func(i int, counted bool) {
		c := &algorithms.Call{Op: algorithms.OpCheck, Now: now, Rules: []algorithms.Rule{rule(i)}}
		if r := do(c); r.Allowed == blocked && counted {
			b.Fatalf("call %d: %+v", i, r)
		}
	}
	if figures != nil {
		for i := range 1024 {
			r := rule(i)
			r.Cost = 0
			do(&algorithms.Call{Op: algorithms.OpOverride, Now: now, Rules: []algorithms.Rule{r}, Override: &algorithms.Override{Params: figures}})
		}
	}
	for i := range 2048 {
		call(i%1024, false)
	}
	var steps uint64
	for i := range 1024 {
		call(i, true)
		steps += h.Steps()
	}
	return float64(steps) / 1024
}

// commandStats returns the script calls (FCALL, EVALSHA), their µs in all, and the
// commands the scripts ran, from rdb's INFO commandstats since the last CONFIG RESETSTAT.
func commandStats(b *testing.B, rdb *redis.Client) (calls, usec, commands int64) {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var c, u int64
		if _, err := fmt.Sscanf(stats, "calls=%d,usec=%d,", &c, &u); err != nil {
			continue
		}
		switch name {
		case "cmdstat_fcall", "cmdstat_evalsha", "cmdstat_eval":
			calls, usec = calls+c, usec+u
		case "cmdstat_info", "cmdstat_config|resetstat", "cmdstat_function|load", "cmdstat_function|list":
		default:
			commands += c
		}
	}
	return calls, usec, commands
}
