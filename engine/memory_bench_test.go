package engine

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// memPolicy is a one-rule policy of algorithm alg keyed by request.user, with limits long
// enough that no key expires while the benchmark writes and measures.
func memPolicy(alg string) string {
	params := map[string]string{
		"fixed_window":   `limit = 1000` + "\n" + `window = "7d"`,
		"sliding_log":    `limit = 1000` + "\n" + `window = "7d"`,
		"sliding_window": `limit = 1000` + "\n" + `window = "7d"`,
		"token_bucket":   `capacity = 1000` + "\n" + `rate = "1000/7d"`,
		"leaky_bucket":   `capacity = 1000` + "\n" + `rate = "1000/7d"`,
		"gcra":           `rate = "1000/7d"` + "\n" + `burst = 1000`,
		"concurrency":    `max = 1000` + "\n" + `ttl = "7d"`,
	}[alg]
	return fmt.Sprintf("policy \"mem\" {\n rule \"k\" {\n algorithm = %q\n key = request.user\n %s\n }\n}\n", alg, params)
}

// botnetPolicy is the embedded backend's worst case: every request from a new IP, two
// rules per IP.
const botnetPolicy = `
policy "botnet" {
  rule "ip_gcra" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "10/h"
    burst     = 10
  }
  rule "ip_log" {
    algorithm = "sliding_log"
    key       = request.ip
    limit     = 100
    window    = "1h"
  }
}`

// liveHeap returns the live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// allowAll sends one request per attribute set from attrs(0..n-1), on clients goroutines,
// and fails the benchmark on an error.
func allowAll(b *testing.B, e *Engine, n, clients int, attrs func(i int) Attrs) {
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < n; i += clients {
				if _, err := e.Allow(context.Background(), attrs(i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLocalMemory measures the state one key of each built-in algorithm takes on the
// embedded backend after one request: the live Go heap after GC, less the heap before,
// divided by the 100,000 keys written (heap-B/key). With a redis-server at hand it writes
// the same keys there through the same engine and reports MEMORY USAGE (SAMPLES 0, mean of
// 1,000 keys) and used_memory's growth per key, and the ratio heap-B/key ÷ used_memory/key.
//
// Run: RLCTL_REQUIRE_REDIS=1 go test -run '^$' -bench LocalMemory -benchtime 1x ./engine
// (-short: luahost only).
func BenchmarkLocalMemory(b *testing.B) {
	const n = 100_000
	var rdb *redis.Client
	if redistest.Available() && !testing.Short() {
		rdb = redistest.Start(b).Client(b)
		rdb.Options().PoolSize = 16
	}
	user := func(i int) Attrs { return Attrs{"user": "u" + strconv.Itoa(i)} }
	for _, alg := range []string{"fixed_window", "sliding_log", "sliding_window", "token_bucket", "leaky_bucket", "gcra", "concurrency"} {
		b.Run(alg, func(b *testing.B) {
			plan := compile(b, memPolicy(alg))
			b.ReportAllocs()
			for b.Loop() {
				clock := luahost.NewManualClock(time.Unix(1_900_000_000, 0))
				h := luahost.New(luahost.WithClock(clock))
				e := New(NewLocal(h), plan, WithClock(clock.Now))
				allowAll(b, e, 1, 1, func(int) Attrs { return Attrs{"user": "warm"} })
				before := liveHeap()
				allowAll(b, e, n+1, 1, func(i int) Attrs { return user(i + 1) })
				after := liveHeap()
				if got := h.Len(); got != n+2 {
					b.Fatalf("%d keys live, want %d", got, n+2)
				}
				local := float64(int64(after)-int64(before)) / (n + 1)
				b.ReportMetric(local, "heap-B/key")
				runtime.KeepAlive(e)
				if rdb == nil {
					continue
				}
				usage, used := redisPerKey(b, rdb, plan, n, user)
				b.ReportMetric(usage, "redis-MEMORY-USAGE-B/key")
				b.ReportMetric(used, "redis-used_memory-B/key")
				b.ReportMetric(local/used, "heap÷used_memory")
			}
		})
	}
}

// redisPerKey empties the server, writes n keys through the engine on it, and returns the
// mean MEMORY USAGE of 1,000 of them and used_memory's growth per request.
func redisPerKey(b *testing.B, rdb *redis.Client, plan *Plan, n int, attrs func(int) Attrs) (usage, used float64) {
	ctx := context.Background()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	e := New(NewRedis(rdb), plan, WithTimeout(0))
	allowAll(b, e, 1, 1, func(int) Attrs { return Attrs{"user": "warm", "ip": "warm"} })
	before := redisUsedMemory(b, rdb)
	allowAll(b, e, n, 16, attrs)
	after := redisUsedMemory(b, rdb)
	const samples = 1000
	var total int64
	for i := range samples {
		k, err := rdb.RandomKey(ctx).Result()
		if err != nil {
			b.Fatal(err)
		}
		u, err := rdb.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			b.Fatalf("MEMORY USAGE %s (sample %d): %v", k, i, err)
		}
		total += u
	}
	return float64(total) / samples, float64(after-before) / float64(n)
}

func redisUsedMemory(b *testing.B, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no used_memory in INFO memory")
	return 0
}

// BenchmarkLocalBotnet is a botnet on the embedded backend: 200,000 requests from 200,000
// distinct IPs through a gcra (10/h) and a sliding_log (100 per hour) rule, one decision
// each, on one caller. It reports decisions/s, the live heap after GC per client (less
// the heap before) and, with a redis-server at hand, used_memory's growth per client for
// the same IPs through the same engine, and the ratio.
//
// Run: RLCTL_REQUIRE_REDIS=1 go test -run '^$' -bench LocalBotnet -benchtime 1x ./engine
// (-short: luahost only).
func BenchmarkLocalBotnet(b *testing.B) {
	const n = 200_000
	plan := compile(b, botnetPolicy)
	ip := func(i int) Attrs {
		return Attrs{"ip": "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255)}
	}
	b.Run("cap=none", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			clock := luahost.NewManualClock(time.Unix(1_900_000_000, 0))
			h := luahost.New(luahost.WithClock(clock))
			e := New(NewLocal(h), plan, WithClock(clock.Now))
			allowAll(b, e, 1, 1, func(int) Attrs { return Attrs{"ip": "warm"} })
			before := liveHeap()
			start := time.Now()
			allowAll(b, e, n, 1, ip)
			elapsed := time.Since(start)
			after := liveHeap()
			b.ReportMetric(float64(n)/elapsed.Seconds(), "decisions/s")
			b.ReportMetric(float64(int64(after)-int64(before))/n, "heap-B/client")
			b.ReportMetric(float64(after)/1e6, "heap-MB")
			runtime.KeepAlive(e)
		}
	})
	if !redistest.Available() || testing.Short() {
		return
	}
	b.Run("redis", func(b *testing.B) {
		rdb := redistest.Start(b).Client(b)
		rdb.Options().PoolSize = 16
		for b.Loop() {
			_, used := redisPerKey(b, rdb, plan, n, ip)
			b.ReportMetric(used, "redis-used_memory-B/client")
		}
	})
}

// BenchmarkLocalBotnetCapped is BenchmarkLocalBotnet's run on hosts capped at 64 MB and at
// 16 MB (allkeys-lru): it reports decisions/s, the highest live heap after GC sampled
// every 10,000 decisions (less the heap before the run, in MB, next to the cap), the
// bytes the host counts at the end, the keys evicted (as Hooks.Evicted heard of them)
// and the keys left.
//
// Run: go test -run '^$' -bench LocalBotnetCapped -benchtime 1x ./engine
func BenchmarkLocalBotnetCapped(b *testing.B) {
	const n = 200_000
	plan := compile(b, botnetPolicy)
	for _, limit := range []int64{64 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("cap=%dMiB", limit>>20), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				clock := luahost.NewManualClock(time.Unix(1_900_000_000, 0))
				h := luahost.New(luahost.WithClock(clock), luahost.WithMaxMemory(limit, luahost.AllKeysLRU))
				var evicted uint64
				e := New(NewLocal(h), plan, WithClock(clock.Now), WithHooks(Hooks{Evicted: func(k uint64) { evicted += k }}))
				allowAll(b, e, 1, 1, func(int) Attrs { return Attrs{"ip": "warm"} })
				before := liveHeap()
				var peak uint64
				var busy time.Duration
				for lo := 0; lo < n; lo += 10_000 {
					start := time.Now()
					allowAll(b, e, 10_000, 1, func(i int) Attrs {
						i += lo
						return Attrs{"ip": "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255)}
					})
					busy += time.Since(start)
					peak = max(peak, liveHeap())
				}
				b.ReportMetric(float64(n)/busy.Seconds(), "decisions/s")
				b.ReportMetric(float64(int64(peak)-int64(before))/(1<<20), "peak-heap-MiB")
				b.ReportMetric(float64(h.MemoryUsage())/(1<<20), "counted-MiB")
				b.ReportMetric(float64(evicted), "evicted")
				b.ReportMetric(float64(h.Len()), "keys")
				runtime.KeepAlive(e)
			}
		})
	}
}
