package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/rlctl/rlctl/bench/internal/stat"
)

// cellKey names a cell: a service, a request shape, a concurrency.
type cellKey struct {
	svc   string
	shape int
	conc  int
}

// results holds each cell's measurements, one per round.
type results map[cellKey][]*cell

func (r results) add(k cellKey, c *cell) { r[k] = append(r[k], c) }

// median is the median over rounds of f.
func (r results) median(k cellKey, f func(*cell) float64) float64 {
	return stat.Median(stat.Map(r[k], f))
}

// environment describes the machine and the programs measured.
type environment struct {
	cpus, model, goVersion, redis, ratelimit, load string
}

func describeEnv(ctx context.Context, rdb *redis.Client, ratelimit string) (environment, error) {
	env := environment{cpus: fmt.Sprint(runtime.NumCPU()), model: "unknown CPU", goVersion: runtime.Version(), ratelimit: ratelimit, load: stat.Loadavg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				env.model = strings.TrimSpace(v)
				break
			}
		}
	}
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return env, err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			env.redis = v
		}
	}
	return env, nil
}

type report struct {
	env    environment
	svcs   []*service
	shapes []int
	concs  []int
	rounds int
	l      load
	res    results
}

func (r *report) write(w io.Writer) {
	a, b := r.svcs[0].name, r.svcs[1].name
	fmt.Fprintf(w, "Machine: %s × %s, %s; redis-server %s; envoyproxy/ratelimit %s.\n", r.env.cpus, r.env.model, r.env.goVersion, r.env.redis, r.env.ratelimit)
	fmt.Fprintf(w, "Load average (1, 5, 15 min): %s.\n\n", r.env.load)
	fmt.Fprintf(w, "%d calls per cell (capped at %v) from c goroutines on one gRPC ClientConn, over %d addresses; every limit %d (nothing denied); %d rounds, medians reported.\n\n",
		r.l.n, r.l.maxTime, r.l.keys, r.l.limit, r.rounds)

	fmt.Fprintf(w, "#### Throughput and latency (median of %d rounds)\n\n", r.rounds)
	fmt.Fprintf(w, "| descriptors | c | %s decisions/s | %s decisions/s | ratio | p50 µs | p50 µs | p99 µs | p99 µs |\n", a, b)
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, shape := range r.shapes {
		for _, c := range r.concs {
			ka, kb := cellKey{a, shape, c}, cellKey{b, shape, c}
			ratio := r.ratios(ka, kb)
			fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %.0f | %.0f | %.0f | %.0f |\n", shape, c,
				stat.Thousands(r.res.median(ka, (*cell).rate)), stat.Thousands(r.res.median(kb, (*cell).rate)), ratio,
				r.res.median(ka, p50), r.res.median(kb, p50), r.res.median(ka, p99), r.res.median(kb, p99))
		}
	}
	fmt.Fprintf(w, "\nratio: %s ÷ %s, the median of the rounds' ratios (range in brackets); the p50 and p99 columns are %s's, then %s's.\n\n", a, b, a, b)

	fmt.Fprintf(w, "#### Per decision (median of %d rounds): Redis commands and CPU\n\n", r.rounds)
	fmt.Fprintln(w, "Redis commands as INFO commandstats counts them: a script's FCALL and each command the script runs.")
	fmt.Fprintln(w, "CPU: user+system time of redis-server (INFO cpu), of the service process and of this program (the gRPC client), from /proc, 10 ms ticks.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| descriptors | c | service | Redis commands | by command | redis-server CPU µs | service CPU µs | client CPU µs |")
	fmt.Fprintln(w, "|---:|---:|---|---:|---|---:|---:|---:|")
	for _, shape := range r.shapes {
		for _, c := range r.concs {
			for _, s := range r.svcs {
				k := cellKey{s.name, shape, c}
				fmt.Fprintf(w, "| %d | %d | %s | %.2f | %s | %.1f | %.1f | %.1f |\n", shape, c, s.name,
					r.res.median(k, (*cell).totalCmds), r.byCommand(k),
					r.res.median(k, func(c *cell) float64 { return c.redisUS }),
					r.res.median(k, func(c *cell) float64 { return c.svcUS }),
					r.res.median(k, func(c *cell) float64 { return c.clientUS }))
			}
		}
	}

	fmt.Fprintln(w, "\n#### Every round")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| descriptors | c | service | decisions/s by round | p50 µs by round | p99 µs by round |")
	fmt.Fprintln(w, "|---:|---:|---|---|---|---|")
	for _, shape := range r.shapes {
		for _, c := range r.concs {
			for _, s := range r.svcs {
				k := cellKey{s.name, shape, c}
				var rate, l50, l99 []string
				for _, cl := range r.res[k] {
					rate = append(rate, stat.Thousands(cl.rate()))
					l50 = append(l50, fmt.Sprintf("%.0f", micros(cl.p50)))
					l99 = append(l99, fmt.Sprintf("%.0f", micros(cl.p99)))
				}
				fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s |\n", shape, c, s.name, strings.Join(rate, ", "), strings.Join(l50, ", "), strings.Join(l99, ", "))
			}
		}
	}
}

func p50(c *cell) float64 { return micros(c.p50) }
func p99(c *cell) float64 { return micros(c.p99) }

// ratios is the median and range of the rounds' throughput ratios a ÷ b; round i of a
// and round i of b ran back to back.
func (r *report) ratios(a, b cellKey) string {
	var vs []float64
	for i := range min(len(r.res[a]), len(r.res[b])) {
		vs = append(vs, r.res[a][i].rate()/r.res[b][i].rate())
	}
	if len(vs) == 0 {
		return "–"
	}
	slices.Sort(vs)
	med := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", med, vs[0], vs[len(vs)-1])
}

// byCommand lists the commands per decision of k's first round, the most frequent first.
func (r *report) byCommand(k cellKey) string {
	if len(r.res[k]) == 0 {
		return ""
	}
	m := r.res[k][0].cmds
	names := slices.Collect(maps.Keys(m))
	slices.SortFunc(names, func(x, y string) int { return cmp.Or(cmp.Compare(m[y], m[x]), cmp.Compare(x, y)) })
	var parts []string
	for _, n := range names {
		if m[n] >= 0.005 {
			parts = append(parts, fmt.Sprintf("%s %.2f", strings.ToUpper(n), m[n]))
		}
	}
	return strings.Join(parts, ", ")
}
