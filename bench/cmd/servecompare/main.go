// Command servecompare measures rlctl serve beside envoyproxy/ratelimit: both Envoy
// rate limit services (envoy.service.ratelimit.v3 ShouldRateLimit) on one redis-server it
// starts on loopback, driven by the same gRPC client load, and prints Markdown tables on
// stdout (progress on stderr).
//
//	cd bench && go run ./cmd/servecompare > results.md
//
// It builds both services first: rlctl from the main module (../cmd/rlctl) and
// envoyproxy/ratelimit's src/service_cmd, a tool of this module (go.mod). Both load the
// same limits: envoyproxy/ratelimit the config serve/testdata/envoy/ratelimit.yaml, rlctl
// its translation edge.hcl, with every limit raised to -limit so that nothing is denied.
// Each listens on 127.0.0.1 only; rlctl runs with -no-headers (envoyproxy/ratelimit adds
// no response headers by default) and -timeout 10s (envoyproxy/ratelimit's REDIS_TIMEOUT).
//
// A cell is one service, one request shape (1 descriptor: remote_address; 3: that,
// generic_key+path, tenant) and one concurrency c: c goroutines share one gRPC ClientConn
// and make -n calls between them (each n/c), over -keys addresses, capped at -max-time.
// Every call's latency is recorded. Around the timed part the program reads redis-server's
// INFO commandstats (commands per decision, those that scripts run included) and INFO cpu,
// and the CPU time of each service process and of itself from /proc. Rounds repeat every
// cell; the two services of a cell run back to back, in the opposite order every other
// round, and the medians over rounds are reported with every round's figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rlctl/rlctl/bench/internal/redisproc"
	"github.com/rlctl/rlctl/bench/internal/stat"
)

func main() { os.Exit(run()) }

func run() int {
	n := flag.Int("n", 20000, "calls per cell")
	rounds := flag.Int("rounds", 3, "rounds of every cell")
	concs := flag.String("c", "8,32", "concurrencies, comma-separated")
	shapes := flag.String("descriptors", "1,3", "request shapes: descriptors per request (1 or 3), comma-separated")
	keys := flag.Int("keys", 10000, "client addresses the load spreads over")
	limit := flag.Int("limit", 1000000, "every limit of both configs")
	maxTime := flag.Duration("max-time", 2*time.Minute, "the longest one cell may run")
	mainDir := flag.String("main", "..", "the rlctl main module's directory")
	flag.Parse()
	cs, err := parseInts(*concs, 1, 256)
	if err != nil {
		fmt.Fprintf(os.Stderr, "servecompare: -c: %v\n", err)
		return 2
	}
	ds, err := parseInts(*shapes, 1, 3)
	if err != nil || len(ds) == 0 {
		fmt.Fprintf(os.Stderr, "servecompare: -descriptors: %v\n", err)
		return 2
	}
	for _, d := range ds {
		if d != 1 && d != 3 {
			fmt.Fprintln(os.Stderr, "servecompare: -descriptors: 1 or 3")
			return 2
		}
	}
	if *n < 1 || *rounds < 1 || *keys < 1 || *limit < 1 {
		fmt.Fprintln(os.Stderr, "servecompare: -n, -rounds, -keys and -limit must be positive")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l := load{n: *n, keys: *keys, maxTime: *maxTime, limit: *limit}
	if err := measure(ctx, *mainDir, cs, ds, *rounds, l); err != nil {
		fmt.Fprintf(os.Stderr, "servecompare: %v\n", err)
		return 1
	}
	return 0
}

func parseInts(s string, lo, hi int) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < lo || v > hi {
			return nil, fmt.Errorf("%q is not a number in [%d, %d]", f, lo, hi)
		}
		out = append(out, v)
	}
	return out, nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "servecompare: "+format+"\n", args...)
}

// measure builds and starts everything, runs the rounds and writes the report.
func measure(ctx context.Context, mainDir string, concs, shapes []int, rounds int, l load) error {
	dir, err := os.MkdirTemp("", "rlctl-servecompare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	progress("building rlctl and envoyproxy/ratelimit")
	bins, err := build(ctx, mainDir, dir)
	if err != nil {
		return err
	}
	redis, err := redisproc.Start()
	if err != nil {
		return err
	}
	defer redis.Stop()
	rdb := newMeterClient(redis.Addr)
	defer rdb.Close()

	su := setup{bins: bins, dir: dir, testdata: filepath.Join(mainDir, "serve", "testdata", "envoy"), redisAddr: redis.Addr, limit: l.limit}
	var svcs []*service
	defer func() {
		for _, s := range svcs {
			s.stop()
		}
	}()
	for _, start := range []func(context.Context, setup) (*service, error){startRlctl, startRatelimit} {
		s, err := start(ctx, su)
		if err != nil {
			return err
		}
		svcs = append(svcs, s)
		if err := s.ready(ctx, l.limit); err != nil {
			return fmt.Errorf("%s: %w (its log: %s)", s.name, err, s.tail())
		}
		progress("%s serving on %s (pid %d)", s.name, s.grpcAddr, s.pid())
	}
	env, err := describeEnv(ctx, rdb, bins.ratelimitVersion)
	if err != nil {
		return err
	}
	res := results{}
	for round := 1; round <= rounds; round++ {
		for _, shape := range shapes {
			for _, c := range concs {
				order := svcs
				if round%2 == 0 {
					order = []*service{svcs[1], svcs[0]}
				}
				for _, s := range order {
					cl, err := runCell(ctx, rdb, s, shape, c, l)
					if err != nil {
						return fmt.Errorf("%s, %d descriptors, c=%d: %w", s.name, shape, c, err)
					}
					res.add(cellKey{s.name, shape, c}, cl)
					progress("round %d/%d descriptors=%d c=%-3d %-22s %8.0f decisions/s  p50 %6.0f µs  p99 %6.0f µs",
						round, rounds, shape, c, s.name, cl.rate(), micros(cl.p50), micros(cl.p99))
				}
			}
		}
	}
	env.load = fmt.Sprintf("%s at the start; %s at the end", env.load, stat.Loadavg())
	(&report{env: env, svcs: svcs, shapes: shapes, concs: concs, rounds: rounds, l: l, res: res}).write(os.Stdout)
	return nil
}
