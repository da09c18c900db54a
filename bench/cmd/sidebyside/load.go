package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlctl/rlctl/bench/internal/redisproc"
)

// cell is one measurement: one contender (or ceiling) at one concurrency.
type cell struct {
	decisions int
	allowed   int
	elapsed   time.Duration
	lat       []time.Duration // every decision's latency, sorted; nil for a ceiling
	p50, p99  time.Duration
	mallocs   float64 // heap allocations per decision (runtime.MemStats)
	bytes     float64 // heap bytes per decision
	serverUS  float64 // redis-server CPU (user+sys) per decision, µs
	scriptUS  float64 // time the server spent running EVAL/EVALSHA, per call, µs; -1 for none
}

func (c *cell) rate() float64 { return float64(c.decisions) / c.elapsed.Seconds() }

// load is what every cell is bounded by.
type load struct {
	n        int           // decisions per cell
	maxTime  time.Duration // per cell
	keys     int           // key space
	profiles string        // directory for a CPU profile per cell; "" for none
}

// runCell makes up to l.n decisions from conc goroutines, for at most l.maxTime, after
// an untimed warm-up that creates every key. Allocations are counted from
// runtime.MemStats over the timed part, server CPU from INFO cpu.
func runCell(ctx context.Context, rdb *redis.Client, decide decideFunc, conc int, l load, name string) (*cell, error) {
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	if _, err := drive(ctx, decide, min(l.keys, l.n), conc, l.maxTime, nil); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	lats := make([][]time.Duration, conc)
	for g := range lats {
		lats[g] = make([]time.Duration, 0, l.n/conc+1)
	}
	meter, err := startMeter(ctx, rdb)
	if err != nil {
		return nil, err
	}
	if l.profiles != "" {
		f, err := os.Create(profilePath(l.profiles, name, conc))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	allowed, err := drive(ctx, decide, l.n, conc, l.maxTime, lats)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&m1)
	if l.profiles != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return nil, err
	}
	c := &cell{allowed: allowed, elapsed: elapsed, lat: slices.Concat(lats...)}
	c.decisions = len(c.lat)
	if c.decisions == 0 {
		return nil, errors.New("no decision within the time limit")
	}
	if c.serverUS, c.scriptUS, err = meter.stop(ctx, rdb, c.decisions); err != nil {
		return nil, err
	}
	slices.Sort(c.lat)
	c.p50, c.p99 = percentile(c.lat, 0.50), percentile(c.lat, 0.99)
	c.mallocs = float64(m1.Mallocs-m0.Mallocs) / float64(c.decisions)
	c.bytes = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(c.decisions)
	return c, nil
}

// drive makes up to n decisions from conc goroutines until maxTime has passed, and
// returns how many were allowed. With lats, goroutine g appends each latency to lats[g].
func drive(ctx context.Context, decide decideFunc, n, conc int, maxTime time.Duration, lats [][]time.Duration) (int, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	deadline := time.Now().Add(maxTime)
	var next, allowed atomic.Int64
	var wg sync.WaitGroup
	for g := range conc {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t0 := time.Now()
				if t0.After(deadline) {
					return
				}
				ok, err := decide(ctx, i)
				if err != nil {
					cancel(fmt.Errorf("decision %d: %w", i, err))
					return
				}
				if lats != nil {
					lats[g] = append(lats[g], time.Since(t0))
				}
				if ok {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return 0, err
	}
	return int(allowed.Load()), ctx.Err()
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func profilePath(dir, name string, conc int) string {
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '-'
	}, strings.ToLower(name))
	return fmt.Sprintf("%s/%s-c%d.pprof", dir, clean, conc)
}

// meter measures the server over a timed part: its CPU, and the run time of scripts.
type meter struct{ cpu0 float64 }

// startMeter reads the server's CPU and resets its command statistics.
func startMeter(ctx context.Context, rdb *redis.Client) (meter, error) {
	cpu, err := redisproc.CPU(ctx, rdb)
	if err != nil {
		return meter{}, err
	}
	return meter{cpu0: cpu}, rdb.ConfigResetStat(ctx).Err()
}

// stop returns the server CPU per decision and the mean script run time since start, in µs.
func (m meter) stop(ctx context.Context, rdb *redis.Client, decisions int) (serverUS, scriptUS float64, err error) {
	cpu, err := redisproc.CPU(ctx, rdb)
	if err != nil {
		return 0, 0, err
	}
	if scriptUS, err = scriptTime(ctx, rdb); err != nil {
		return 0, 0, err
	}
	return (cpu - m.cpu0) * 1e6 / float64(decisions), scriptUS, nil
}

// scriptTime returns the mean time of an EVAL, EVALSHA or FCALL since the last CONFIG RESETSTAT,
// from INFO commandstats, in µs; -1 when there was none.
func scriptTime(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	calls, usec := redisproc.CommandStats(info, "evalsha", "eval", "fcall")
	if calls == 0 {
		return -1, nil
	}
	return usec / calls, nil
}

// runCeiling has redis-benchmark send ev l.n times from conc connections to addr (its
// __rand_int__ ranging over l.keys values), after as many untimed calls to create the keys.
func runCeiling(ctx context.Context, rdb *redis.Client, addr string, ev evalsha, conc int, l load) (*cell, error) {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return nil, fmt.Errorf("redis-benchmark not found: %w", err)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	command, handle := "EVALSHA", ev.sha1
	switch {
	case ev.function != "":
		if err := rdb.FunctionLoadReplace(ctx, ev.library).Err(); err != nil {
			return nil, err
		}
		command, handle = "FCALL", ev.function
	case ev.source != "":
		if err := rdb.ScriptLoad(ctx, ev.source).Err(); err != nil {
			return nil, err
		}
	}
	host, port, _ := net.SplitHostPort(addr)
	args := func(n int) []string {
		a := []string{"-h", host, "-p", port, "-c", strconv.Itoa(conc), "-n", strconv.Itoa(n),
			"-r", strconv.Itoa(l.keys), "--csv", command, handle, strconv.Itoa(len(ev.keys))}
		return append(append(a, ev.keys...), ev.argv...)
	}
	bench := func(n int) ([]string, error) {
		ctx, cancel := context.WithTimeout(ctx, l.maxTime)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args(n)...)
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("redis-benchmark: %w", err)
		}
		recs, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
		if err != nil || len(recs) < 2 || len(recs[len(recs)-1]) < 7 {
			return nil, fmt.Errorf("redis-benchmark printed no result: %q", out)
		}
		return recs[len(recs)-1], nil
	}
	if _, err := bench(max(l.keys, conc)); err != nil {
		return nil, err
	}
	meter, err := startMeter(ctx, rdb)
	if err != nil {
		return nil, err
	}
	rec, err := bench(l.n)
	if err != nil {
		return nil, err
	}
	serverUS, scriptUS, err := meter.stop(ctx, rdb, l.n)
	if err != nil {
		return nil, err
	}
	// "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms",...
	rps, err1 := strconv.ParseFloat(rec[1], 64)
	p50, err2 := strconv.ParseFloat(rec[4], 64)
	p99, err3 := strconv.ParseFloat(rec[6], 64)
	if err := errors.Join(err1, err2, err3); err != nil || rps <= 0 {
		return nil, fmt.Errorf("redis-benchmark result %q: %v", rec, err)
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	return &cell{
		decisions: l.n, elapsed: time.Duration(float64(l.n) / rps * float64(time.Second)),
		p50: ms(p50), p99: ms(p99), mallocs: -1, bytes: -1,
		serverUS: serverUS, scriptUS: scriptUS,
	}, nil
}

// sanity checks that c enforces a limit of 5 per hour on one key (8 decisions, 5 allowed)
// and counts the round trips of an allowed decision on a warm key.
func sanity(ctx context.Context, rdb *redis.Client, c contender) (roundTrips float64, err error) {
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return 0, err
	}
	var trips atomic.Int64
	counted := redis.NewClient(rdb.Options())
	defer counted.Close()
	counted.AddHook(captureHook(func(_ []any, first bool) {
		if first {
			trips.Add(1)
		}
	}))
	decide, err := c.setup(counted, limit{count: 5, period: time.Hour}, 0)
	if err != nil {
		return 0, err
	}
	allowed := 0
	var warm int64
	for i := range 8 {
		if i == 1 {
			warm = trips.Load()
		}
		ok, err := decide(ctx, i)
		if err != nil {
			return 0, err
		}
		if ok {
			allowed++
		}
		if i == 4 {
			roundTrips = float64(trips.Load()-warm) / 4
		}
	}
	if allowed != 5 {
		return 0, fmt.Errorf("allowed %d of 8 requests at a limit of 5 per hour, want 5", allowed)
	}
	return roundTrips, nil
}
