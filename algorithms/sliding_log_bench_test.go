package algorithms

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/internal/redistest"
)

// BenchmarkSlidingLogRedis compares sliding_log's two layouts on a private redis-server:
// one member per unit of cost (testdata/layout1) and one entry per request (lua/).
//
//   - memory: 2,000 requests of cost 1000 over 1,000 keys (limit 1000000, window 1h, two
//     requests per key at distinct instants); reports the mean MEMORY USAGE of a key
//     (SAMPLES 0, exact) and the growth of used_memory.
//   - allowed: one key kept at about 1,000 requests in its window (each call expires the
//     oldest and adds one), every call allowed; denied: 1,000 requests fill the window to
//     its limit and every call is denied, which reads the retry-after. Each reports the
//     server's script time per call, INFO commandstats usec_per_call for EVALSHA.
//
// Run: RLCTL_REQUIRE_REDIS=1 go test -run '^$' -bench SlidingLogRedis -benchtime 1x ./algorithms
// for memory, -benchtime 2000x for the per-call figures.
func BenchmarkSlidingLogRedis(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2})
	b.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	a, _ := Lookup("sliding_log")
	const window = 3_600_000_000
	layouts := []struct {
		name   string
		script *Script
	}{{"per-unit", layout1(b)}, {"entries", Default()}}
	for _, l := range layouts {
		eval := func(b *testing.B, key string, now, cost, limit int64) Reply {
			c := Call{Op: OpCheck, Now: now, Rules: []Rule{{Key: key, Algorithm: a, Cost: cost, Params: []int64{limit, window}}}}
			r, err := redisEval(rdb, l.script)(&c)
			if err != nil {
				b.Fatal(err)
			}
			return r
		}
		reset := func(b *testing.B) {
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			if err := rdb.ScriptLoad(ctx, l.script.Source).Err(); err != nil {
				b.Fatal(err)
			}
		}
		b.Run("memory/"+l.name, func(b *testing.B) {
			for b.Loop() {
				reset(b)
				before := usedMemory(b, rdb)
				now := int64(1_800_000_000_000_000)
				for i := range 2000 {
					if r := eval(b, fmt.Sprintf("rl:log:%d", i%1000), now+int64(i), 1000, 1_000_000); !r.Allowed {
						b.Fatalf("request %d denied", i)
					}
				}
				growth := usedMemory(b, rdb) - before
				var sum int64
				for i := range 10 {
					n, err := rdb.MemoryUsage(ctx, fmt.Sprintf("rl:log:%d", i), 0).Result()
					if err != nil {
						b.Fatal(err)
					}
					sum += n
				}
				b.ReportMetric(float64(sum)/10, "B/key")
				b.ReportMetric(float64(growth)/1e6, "MB-used_memory")
			}
		})
		for _, mode := range []string{"allowed", "denied"} {
			for _, cost := range []int64{1, 1000} {
				b.Run(fmt.Sprintf("%s/%s/cost=%d", mode, l.name, cost), func(b *testing.B) {
					reset(b)
					limit, step := int64(1_000_000), int64(window/1000+1)
					if mode == "denied" {
						limit, step = 1000*cost, 1
					}
					now := int64(1_800_000_000_000_000)
					for range 1000 {
						now += step
						eval(b, "rl:log", now, cost, limit)
					}
					if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					for b.Loop() {
						now += step
						if r := eval(b, "rl:log", now, cost, limit); r.Allowed != (mode == "allowed") {
							b.Fatalf("%s: %+v", mode, r)
						}
					}
					b.ReportMetric(evalshaUsec(b, rdb), "µs/call-redis")
				})
			}
		}
	}
}

// usedMemory is INFO memory's used_memory.
func usedMemory(b *testing.B, rdb *redis.Client) int64 {
	return infoField(b, rdb, "memory", "used_memory:")
}

// evalshaUsec is INFO commandstats' usec_per_call for EVALSHA.
func evalshaUsec(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
			for _, f := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
					x, err := strconv.ParseFloat(v, 64)
					if err != nil {
						b.Fatal(err)
					}
					return x
				}
			}
		}
	}
	b.Fatalf("no evalsha in commandstats:\n%s", info)
	return 0
}

func infoField(b *testing.B, rdb *redis.Client, section, field string) int64 {
	info, err := rdb.Info(context.Background(), section).Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no %s in INFO %s", field, section)
	return 0
}
