package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"

	"github.com/rlctl/rlctl/bench/internal/redisproc"
)

// load is what every cell is bounded by.
type load struct {
	n       int           // calls per cell
	keys    int           // client addresses
	limit   int           // every limit of both configs
	maxTime time.Duration // per cell
}

// cell is one measurement: one service, one request shape, one concurrency.
type cell struct {
	calls    int
	elapsed  time.Duration
	p50, p99 time.Duration
	cmds     map[string]float64 // Redis commands per decision by name, those scripts run included
	redisUS  float64            // redis-server CPU (user+sys) per decision, µs
	svcUS    float64            // the service process's CPU per decision, µs
	clientUS float64            // this program's CPU per decision, µs
}

func (c *cell) rate() float64 { return float64(c.calls) / c.elapsed.Seconds() }

func (c *cell) totalCmds() float64 {
	var t float64
	for _, v := range c.cmds {
		t += v
	}
	return t
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// newMeterClient is the program's own client of redis-server, for INFO only.
func newMeterClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, DialerRetries: 1, MaxRetries: -1})
}

// runCell makes l.n calls of shape from c goroutines sharing the service's one ClientConn,
// for at most l.maxTime, after an untimed warm-up of 2c calls. Goroutine g's k'th call is
// call number g + k·c, whose address is number (g + k·c) mod l.keys; its path and
// tenant take 100 values each.
func runCell(ctx context.Context, rdb *redis.Client, s *service, shape, c int, l load) (*cell, error) {
	reqs := make([]*rlsv3.RateLimitRequest, l.keys)
	for i := range reqs {
		reqs[i] = request(shape, fmt.Sprintf("10.1.%d.%d", i/256%256, i%256)+suffix(i), fmt.Sprintf("/v1/items/%d", i%100), fmt.Sprintf("t%d", i%100))
	}
	for i := range 2 * c {
		if _, err := s.call(ctx, reqs[i%len(reqs)]); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	cmd0, err := commandCalls(ctx, rdb)
	if err != nil {
		return nil, err
	}
	r0, err := redisproc.CPU(ctx, rdb)
	if err != nil {
		return nil, err
	}
	s0, c0 := procCPU(s.pid()), procCPU(os.Getpid())

	ctx, cancel := context.WithTimeout(ctx, l.maxTime)
	defer cancel()
	lats := make([]time.Duration, l.n)
	var failed atomic.Pointer[error]
	var done atomic.Int64
	var wg sync.WaitGroup
	startAt := make(chan struct{})
	off := 0
	for g := range c {
		n := l.n / c
		if g < l.n%c {
			n++
		}
		mine := lats[off : off+n]
		off += n
		wg.Go(func() {
			<-startAt
			for k := range mine {
				if ctx.Err() != nil {
					err := fmt.Errorf("cut at -max-time after %d calls", done.Load())
					failed.CompareAndSwap(nil, &err)
					return
				}
				req := reqs[(g+k*c)%len(reqs)]
				t0 := time.Now()
				resp, err := s.call(ctx, req)
				mine[k] = time.Since(t0)
				if err == nil && resp.OverallCode != rlsv3.RateLimitResponse_OK {
					err = errors.New("a call was denied: the limits are not large enough")
				}
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				done.Add(1)
			}
		})
	}
	t := time.Now()
	close(startAt)
	wg.Wait()
	elapsed := time.Since(t)
	if err := failed.Load(); err != nil {
		return nil, *err
	}
	s1, c1 := procCPU(s.pid()), procCPU(os.Getpid())
	r1, err := redisproc.CPU(ctx, rdb)
	if err != nil {
		return nil, err
	}
	cmd1, err := commandCalls(ctx, rdb)
	if err != nil {
		return nil, err
	}
	cl := &cell{calls: l.n, elapsed: elapsed, cmds: map[string]float64{}}
	for name, v := range cmd1 {
		if name == "info" {
			continue // this program's
		}
		if d := v - cmd0[name]; d > 0 {
			cl.cmds[name] = float64(d) / float64(l.n)
		}
	}
	per := func(d time.Duration) float64 { return micros(d) / float64(l.n) }
	cl.redisUS, cl.svcUS, cl.clientUS = (r1-r0)*1e6/float64(l.n), per(s1-s0), per(c1-c0)
	slices.Sort(lats)
	cl.p50, cl.p99 = percentile(lats, 50), percentile(lats, 99)
	return cl, nil
}

// suffix keeps addresses distinct past 65,536 keys.
func suffix(i int) string {
	if i < 65536 {
		return ""
	}
	return "-" + strconv.Itoa(i/65536)
}

// percentile is the p'th percentile of sorted: the smallest value at least p% of the
// values are not above.
func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}

// commandCalls is INFO commandstats: calls by command name (lower case; a subcommand as
// name|sub).
func commandCalls(ctx context.Context, rdb *redis.Client) (map[string]int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		for f := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("commandstats %q: %w", line, err)
				}
				m[name] = n
			}
		}
	}
	return m, nil
}

// procCPU is a process's user+system CPU time from /proc/PID/stat, in clock ticks of
// 10 ms (Linux's USER_HZ on every architecture Go runs on); 0 when unreadable.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, field 2, is in parentheses and may hold spaces: fields count
	// from the last ")". utime and stime are fields 14 and 15.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}
