// Command inproc measures the cost per request of net/http rate-limiting middleware in
// process, side by side in one run, and prints the results as a Markdown table on stdout
// (progress on stderr).
//
//	cd bench && go run ./cmd/inproc -rounds 5 > results.md
//
// No network: each goroutine calls the handler's ServeHTTP directly with a request of its
// own, reused, whose RemoteAddr it sets per request from -addrs prepared client addresses
// (cycled), and a ResponseWriter that keeps nothing. Every contender limits per client
// address with a limit the run never reaches (a refused request fails the run):
//
//   - the bare handler (no middleware);
//   - go-chi/httprate, httprate.LimitByIP(1000000000, time.Second), in memory;
//   - golang.org/x/time/rate, a rate.Limiter per address in a map under a mutex (rate and
//     burst 1000000), the usual pattern;
//   - rlctl's httplimit.Middleware on engine.NewLocal(luahost.New()) (the engine script
//     under gopher-lua) and on engine.NewNative(luahost.New()) (the built-in algorithms
//     decided in Go), each with one rule keyed by request.ip: gcra (rate "1000000/s",
//     burst 1000000), and fixed_window (limit 1000000000, window "1s").
//
// Before measuring, each contender is checked to limit: with a limit of 3 an address's
// 4th request is refused. A cell is one contender built anew: a warm-up of two requests
// from every address, the allocations (runtime.MemStats) of -alloc-n requests from one
// goroutine, then the wall and CPU time of -n requests from -c goroutines. Rounds measure
// every contender in turn, in the opposite order every other round; the table gives
// medians over rounds, and the marginal cost over the bare handler and its ratio to
// httprate's are taken within each round.
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/rlctl/rlctl/bench/internal/stat"
)

func main() { os.Exit(run()) }

func run() int {
	fs := flag.NewFlagSet("inproc", flag.ContinueOnError)
	n := fs.Int("n", 20000, "timed requests per cell, between all goroutines")
	c := fs.Int("c", 2, "goroutines sending requests")
	rounds := fs.Int("rounds", 5, "times every contender is measured")
	addrs := fs.Int("addrs", 1024, "client addresses the requests cycle over")
	allocN := fs.Int("alloc-n", 2000, "requests of each cell's allocation count (one goroutine)")
	only := fs.String("run", "", "measure only contenders whose name matches this regexp (the bare handler always)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if *n < 1 || *n > 100_000_000 || *c < 1 || *c > 256 || *rounds < 1 || *rounds > 1000 ||
		*addrs < 1 || *addrs > 1<<24 || *allocN < 1 || *allocN > 10_000_000 || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "inproc: bad flags")
		fs.Usage()
		return 2
	}
	match, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintf(os.Stderr, "inproc: -run: %v\n", err)
		return 2
	}
	var cs []contender
	for _, ct := range contenders() {
		if ct.name == bareName || match.MatchString(ct.name) {
			cs = append(cs, ct)
		}
	}
	l := load{n: *n, c: *c, allocN: *allocN, addrs: addresses(*addrs)}
	rep, err := measure(cs, *rounds, l, progress)
	if err != nil {
		fmt.Fprintf(os.Stderr, "inproc: %v\n", err)
		return 1
	}
	rep.env = describeEnv()
	rep.write(os.Stdout)
	return 0
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "inproc: "+format+"\n", args...)
}

// measure checks every contender limits, then measures each once a round.
func measure(cs []contender, rounds int, l load, logf func(string, ...any)) (*report, error) {
	for _, c := range cs {
		if err := sanity(c); err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
	}
	rep := &report{rounds: rounds, load: l, res: map[string][]*cell{}, loadStart: stat.Loadavg()}
	for _, c := range cs {
		rep.rows = append(rep.rows, c)
	}
	for round := 1; round <= rounds; round++ {
		order := slices.Clone(cs)
		if round%2 == 0 {
			slices.Reverse(order) // drift over a round cancels out of the ratios
		}
		for _, c := range order {
			cl, err := runCell(c, l)
			if err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", c.name, round, err)
			}
			rep.res[c.name] = append(rep.res[c.name], cl)
			logf("round %d/%d %-40s %10.0f ns/request %10.0f CPU ns/request %6.1f allocs %7.0f B",
				round, rounds, c.name, cl.ns(), cl.cpuNS(), cl.allocs, cl.bytes)
		}
	}
	rep.loadEnd = stat.Loadavg()
	return rep, nil
}

// describeEnv names the machine and the toolchain.
func describeEnv() string {
	cpu := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if _, v, ok := strings.Cut(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%d × %s (GOMAXPROCS %d), %s %s/%s, %s", runtime.NumCPU(), cpu, runtime.GOMAXPROCS(0),
		runtime.Version(), runtime.GOOS, runtime.GOARCH, time.Now().UTC().Format("2006-01-02"))
}
