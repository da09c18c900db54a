// Command sidebyside measures rlctl's engine beside the server's own ceiling and beside
// other Redis rate limiters, in one run against one redis-server it starts on loopback
// (and stops at the end), and prints the results as Markdown tables on stdout.
//
//	cd bench && go run ./cmd/sidebyside > results.md
//
// Contenders, all on the same server and the same go-redis client:
//
//   - rlctl: one rule of gcra, sliding_log, sliding_window, fixed_window; a 3-rule stack
//     (gcra, token_bucket, sliding_window) in one call; the same three rules as three
//     one-rule calls;
//   - the ceiling of each rlctl case that is one script call, and of redis_rate: what
//     redis-benchmark (a C client) reaches sending that exact EVALSHA with as many
//     connections;
//   - as a reference, the ceiling of a minimal script doing only the Redis commands of a
//     one-rule gcra call;
//   - go-redis/redis_rate (GCRA, one script), ulule/limiter (fixed window, one script),
//     throttled (GCRA in Go over GET and a compare-and-swap script).
//
// Each cell (a contender at a concurrency) warms every key up, then makes -n decisions
// from -c goroutines, capped at -max-time. Rounds repeat every cell; the two sides of each
// ratio run back to back, in the opposite order every other round, so a ratio is taken
// between cells a second or two apart, and the median over rounds is reported: on a
// shared, noisy machine many short rounds beat a few long ones. Before measuring, every contender is checked to enforce a limit of 5
// per hour (8 requests, 5 allowed), and its round trips per decision are counted.
//
// The memory run writes -mem-keys keys per algorithm through the engine script and through
// each peer, one request each, and reports MEMORY USAGE and used_memory growth per key.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlctl/rlctl/bench/internal/redisproc"
)

func main() { os.Exit(run()) }

// results holds the cells of each row by concurrency, one per round.
type results map[string]map[int][]*cell

func (r results) add(name string, conc int, c *cell) {
	if r[name] == nil {
		r[name] = map[int][]*cell{}
	}
	r[name][conc] = append(r[name][conc], c)
}

func ceilingName(name string) string { return "ceiling: " + name }

func run() int {
	fs := flag.NewFlagSet("sidebyside", flag.ContinueOnError)
	n := fs.Int("n", 10000, "decisions per cell")
	concFlag := fs.String("c", "1,8,32", "concurrencies: callers (goroutines, or redis-benchmark connections)")
	rounds := fs.Int("rounds", 7, "times every cell is measured")
	maxTime := fs.Duration("max-time", 20*time.Second, "time limit per cell")
	keys := fs.Int("keys", 1024, "key space decisions cycle over")
	memKeys := fs.Int("mem-keys", 1_000_000, "keys per algorithm in the memory run; 0 skips it")
	only := fs.String("run", "", "measure only contenders whose name matches this regexp")
	profiles := fs.String("cpuprofile", "", "write a CPU profile of every cell to this directory")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	concs, err := parseConcs(*concFlag)
	if err != nil || *n < 1 || *rounds < 1 || *keys < 1 || *memKeys < 0 || fs.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "sidebyside: bad flags (%v)\n", err)
		fs.Usage()
		return 2
	}
	match, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sidebyside: -run: %v\n", err)
		return 2
	}
	if *profiles != "" {
		if err := os.MkdirAll(*profiles, 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "sidebyside: %v\n", err)
			return 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := measure(ctx, concs, *rounds, load{n: *n, maxTime: *maxTime, keys: *keys, profiles: *profiles}, *memKeys, match); err != nil {
		fmt.Fprintf(os.Stderr, "sidebyside: %v\n", err)
		return 1
	}
	return 0
}

func parseConcs(s string) ([]int, error) {
	var cs []int
	for f := range strings.SplitSeq(s, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 || c > 256 {
			return nil, fmt.Errorf("-c: %q is not a concurrency in [1, 256]", f)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "sidebyside: "+format+"\n", args...)
}

func measure(ctx context.Context, concs []int, rounds int, l load, memKeys int, match *regexp.Regexp) error {
	srv, err := redisproc.Start()
	if err != nil {
		return err
	}
	defer srv.Stop()
	// ContextTimeoutEnabled and MaxRetries are the settings engine.NewRedis asks for
	// (without them each rlctl call runs on a goroutine of its own to keep its deadline);
	// they change nothing for the peers, whose calls carry no deadline and see no error.
	rdb := redis.NewClient(&redis.Options{
		Addr: srv.Addr, PoolSize: 2 * maxOf(concs), DialerRetries: 1,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		ContextTimeoutEnabled: true, MaxRetries: -1,
	})
	defer rdb.Close()

	var cs []contender
	for _, c := range contenders() {
		if match.MatchString(c.name) {
			cs = append(cs, c)
		}
	}
	env, err := describeEnv(ctx, rdb)
	if err != nil {
		return err
	}
	// Check every contender enforces a limit, and find its ceiling's EVALSHA.
	trips := map[string]float64{}
	ceilings := map[string]evalsha{}
	for _, c := range cs {
		if c.setup != nil {
			rt, err := sanity(ctx, rdb, c)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			trips[c.name] = rt
		}
		if c.ceiling != nil {
			ev, err := c.ceiling(rdb)
			if err == errNoCeiling {
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: ceiling: %w", c.name, err)
			}
			ceilings[c.name] = ev
		}
	}

	// A cell is a ceiling (ev set) or a contender's own measurement.
	type job struct {
		c  contender
		ev *evalsha
	}
	var jobs []job
	for _, c := range cs {
		if ev, ok := ceilings[c.name]; ok {
			jobs = append(jobs, job{c: c, ev: &ev})
		}
		if c.setup != nil {
			jobs = append(jobs, job{c: c})
		}
	}
	res := results{}
	for round := 1; round <= rounds; round++ {
		order := slices.Clone(jobs)
		if round%2 == 0 {
			slices.Reverse(order) // ABBA: drift over a round cancels out of the ratios
		}
		for _, conc := range concs {
			for _, j := range order {
				if j.ev != nil {
					cl, err := runCeiling(ctx, rdb, srv.Addr, *j.ev, conc, l)
					if err != nil {
						return fmt.Errorf("%s, c=%d: %w", ceilingName(j.c.name), conc, err)
					}
					res.add(ceilingName(j.c.name), conc, cl)
					progress("round %d/%d c=%-3d %-50s %8.0f decisions/s", round, rounds, conc, ceilingName(j.c.name), cl.rate())
					continue
				}
				decide, err := j.c.setup(rdb, wide, l.keys)
				if err != nil {
					return fmt.Errorf("%s: %w", j.c.name, err)
				}
				cl, err := runCell(ctx, rdb, decide, conc, l, j.c.name)
				if err != nil {
					return fmt.Errorf("%s, c=%d: %w", j.c.name, conc, err)
				}
				res.add(j.c.name, conc, cl)
				progress("round %d/%d c=%-3d %-50s %8.0f decisions/s, %.0f%% allowed", round, rounds, conc, j.c.name, cl.rate(), 100*float64(cl.allowed)/float64(cl.decisions))
			}
		}
	}

	var mem []memRow
	if memKeys > 0 {
		if mem, err = memoryRun(ctx, rdb, memKeys, func(s string) { progress("%s", s) }); err != nil {
			return err
		}
	}
	rep := report{env: env, concs: concs, rounds: rounds, load: l, res: res, trips: trips, mem: mem, memKeys: memKeys}
	for _, c := range cs {
		if _, ok := ceilings[c.name]; ok {
			rep.rows = append(rep.rows, ceilingName(c.name))
		}
		if c.setup != nil {
			rep.rows = append(rep.rows, c.name)
		}
	}
	rep.write(os.Stdout)
	return nil
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// describeEnv names the machine, the toolchain and the server.
func describeEnv(ctx context.Context, rdb *redis.Client) (string, error) {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	version := "?"
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			version = v
		}
	}
	cpu := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if _, v, ok := strings.Cut(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs (GOMAXPROCS %d), %s %s/%s, redis-server %s, %s",
		cpu, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH, version,
		time.Now().UTC().Format("2006-01-02")), nil
}
