// Command hotkey measures one hot key decided by several engine instances, with and
// without quota leases (lease_size), against one redis-server it starts on loopback (and
// stops at the end), and prints the results as Markdown tables on stdout (progress on
// stderr).
//
//	cd bench && go run ./cmd/hotkey -rounds 5 > results.md
//
// The key is one fixed_window rule's (key = "all", limit = 100000000, window = "1h": a
// limit nothing reaches, so every decision is admitted). -engines engines (engine.New
// over engine.NewRedis), each on a go-redis client of its own, as separate instances
// would be, run in this process; -g goroutines per engine call Allow. A cell is one
// contender: -n decisions between all the goroutines, capped at -max-time. Contenders:
//
//   - unleased, with the engine's default batching (engine.Batched, DefaultBatch);
//   - unleased, each call alone (engine.Batched(1));
//   - leased, lease_size = each of -leases, with the default batching.
//
// Each cell starts from an empty server (FLUSHALL) and new engines, which make one
// untimed Peek each (it loads the function and opens a connection). Around the timed part
// the program reads redis-server's INFO cpu (used_cpu_user + used_cpu_sys) and INFO
// commandstats (FCALL, EVALSHA and EVAL calls), and its own CPU time (getrusage). The
// timed part ends after every engine's ReturnLeases, so the refunds of what the engines
// still held count in the server's CPU and calls (not in decisions/s, which is up to the
// last decision). Then the cell checks, and prints, that the server's count of the key
// (Peek) equals the decisions admitted and that no engine holds units: a cell that fails
// it stops the run with an error. A cell never runs across the key's window boundary: it
// waits for the boundary when the cell could reach it.
//
// Rounds repeat every cell in the same order, reversed every other round, so the ratios
// between contenders are taken between cells seconds apart; the medians over rounds are
// reported with the range of the rounds' ratios.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() { os.Exit(run()) }

// load is what every cell is bounded by, and its shape.
type load struct {
	n        int           // decisions per cell, between all goroutines
	engines  int           // engine instances
	g        int           // goroutines per engine
	maxTime  time.Duration // per cell
	profiles string        // directory for a CPU profile per cell; "" for none
}

func run() int {
	fs := flag.NewFlagSet("hotkey", flag.ContinueOnError)
	n := fs.Int("n", 1_000_000, "decisions per cell, between all engines")
	rounds := fs.Int("rounds", 5, "times every cell is measured")
	engines := fs.Int("engines", 8, "engine instances, each on a client of its own")
	g := fs.Int("g", 4, "goroutines per engine")
	maxTime := fs.Duration("max-time", 30*time.Second, "time limit per cell")
	leaseFlag := fs.String("leases", "100,1000", "lease sizes to measure, comma-separated")
	alone := fs.Bool("alone", true, "also measure the unleased engine with each call alone (Batched(1))")
	profiles := fs.String("cpuprofile", "", "write a CPU profile of every cell to this directory")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	sizes, err := parseSizes(*leaseFlag)
	if err != nil || *n < 1 || *rounds < 1 || *engines < 1 || *engines > 64 || *g < 1 || *g > 64 ||
		*maxTime <= 0 || *maxTime > 10*time.Minute || fs.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "hotkey: bad flags (%v)\n", err)
		fs.Usage()
		return 2
	}
	if *profiles != "" {
		if err := os.MkdirAll(*profiles, 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "hotkey: %v\n", err)
			return 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l := load{n: *n, engines: *engines, g: *g, maxTime: *maxTime, profiles: *profiles}
	if err := measure(ctx, contenders(sizes, *alone), *rounds, l); err != nil {
		fmt.Fprintf(os.Stderr, "hotkey: %v\n", err)
		return 1
	}
	return 0
}

func parseSizes(s string) ([]int64, error) {
	var out []int64
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for f := range strings.SplitSeq(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || v < 1 || v > 1_000_000 {
			return nil, fmt.Errorf("-leases: %q is not a lease size in [1, 1000000]", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "hotkey: "+format+"\n", args...)
}

// describeEnv names the machine and the toolchain.
func describeEnv(version string) string {
	cpu := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if _, v, ok := strings.Cut(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs (GOMAXPROCS %d), %s %s/%s, redis-server %s, %s",
		cpu, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH, version,
		time.Now().UTC().Format("2006-01-02"))
}
