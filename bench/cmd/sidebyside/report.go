package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rlctl/rlctl/bench/internal/stat"
)

// report renders a run as Markdown.
type report struct {
	env     string
	concs   []int
	rounds  int
	load    load
	rows    []string // in table order
	res     results
	trips   map[string]float64 // round trips per decision, by contender
	mem     []memRow
	memKeys int
}

// ratio is a row of the ratio table: a's throughput over b's, within each round.
type ratio struct {
	label, a, b, target string
}

var ratios = []ratio{
	{"rlctl gcra ÷ its ceiling", "rlctl gcra", ceilingName("rlctl gcra"), "≥ 0.9"},
	{"rlctl sliding_log ÷ its ceiling", "rlctl sliding_log", ceilingName("rlctl sliding_log"), "≥ 0.9"},
	{"rlctl sliding_window ÷ its ceiling", "rlctl sliding_window", ceilingName("rlctl sliding_window"), "≥ 0.9"},
	{"rlctl fixed_window ÷ its ceiling", "rlctl fixed_window", ceilingName("rlctl fixed_window"), "≥ 0.9"},
	{"rlctl 3-rule stack ÷ its ceiling", "rlctl 3-rule stack, one call", ceilingName("rlctl 3-rule stack, one call"), "≥ 0.9"},
	{"3-rule stack: one call ÷ three calls", "rlctl 3-rule stack, one call", "rlctl 3 rules, 3 calls", "≥ 2.5"},
	{"rlctl gcra ÷ redis_rate", "rlctl gcra", "go-redis/redis_rate (GCRA)", "≥ 1.2"},
	{"rlctl gcra (EVALSHA) ÷ redis_rate", "rlctl gcra (EVALSHA)", "go-redis/redis_rate (GCRA)", "–"},
	{"rlctl gcra: FCALL ÷ EVALSHA", "rlctl gcra", "rlctl gcra (EVALSHA)", "–"},
	{"rlctl gcra (pipelined) ÷ redis_rate", "rlctl gcra (pipelined)", "go-redis/redis_rate (GCRA)", "≥ 2.0 at c=32"},
	{"rlctl gcra (batched) ÷ redis_rate", "rlctl gcra (batched)", "go-redis/redis_rate (GCRA)", "–"},
	{"rlctl fixed_window (batched) ÷ ulule/limiter", "rlctl fixed_window (batched)", "ulule/limiter (fixed window)", "–"},
	{"ceilings: rlctl gcra ÷ redis_rate (server-side script cost)", ceilingName("rlctl gcra"), ceilingName("go-redis/redis_rate (GCRA)"), "–"},
	{"ceilings: rlctl gcra ÷ minimal script (Lua work beyond the Redis commands)", ceilingName("rlctl gcra"), ceilingName(minimal.name), "–"},
	{"redis_rate ÷ its ceiling", "go-redis/redis_rate (GCRA)", ceilingName("go-redis/redis_rate (GCRA)"), "–"},
	{"rlctl fixed_window ÷ ulule/limiter", "rlctl fixed_window", "ulule/limiter (fixed window)", "≥ 1.0"},
	{"rlctl gcra ÷ throttled", "rlctl gcra", "throttled (GCRA, CAS)", "–"},
}

// cpuRatios compare redis-server's CPU per decision (INFO cpu) between two contenders.
var cpuRatios = []ratio{
	{"rlctl gcra ÷ redis_rate", "rlctl gcra", "go-redis/redis_rate (GCRA)", "≤ 1.0 at c=1"},
	{"rlctl gcra (batched) ÷ redis_rate", "rlctl gcra (batched)", "go-redis/redis_rate (GCRA)", "≤ 0.5 at c=32"},
	{"rlctl gcra (batched) ÷ rlctl gcra", "rlctl gcra (batched)", "rlctl gcra", "–"},
	{"rlctl fixed_window ÷ ulule/limiter", "rlctl fixed_window", "ulule/limiter (fixed window)", "–"},
	{"rlctl fixed_window (batched) ÷ ulule/limiter", "rlctl fixed_window (batched)", "ulule/limiter (fixed window)", "–"},
}

func (r *report) write(w io.Writer) {
	fmt.Fprintf(w, "Machine: %s.\n\n", r.env)
	fmt.Fprintf(w, "%d decisions per cell (capped at %v) over %d keys, after a warm-up that writes every key; %d rounds.\n\n",
		r.load.n, r.load.maxTime, r.load.keys, r.rounds)

	fmt.Fprintf(w, "#### Throughput, decisions/s (median of %d rounds)\n\n", r.rounds)
	r.header(w, "contender", "c=%d")
	for _, name := range r.rows {
		r.line(w, name, func(cs []*cell) string {
			return stat.Thousands(stat.Median(stat.Map(cs, (*cell).rate)))
		})
	}

	r.ratioTable(w, "Ratios of throughput", ratios, func(c *cell) float64 { return c.rate() })
	r.ratioTable(w, "redis-server CPU per decision, ratios", cpuRatios, func(c *cell) float64 { return c.serverUS })

	fmt.Fprintf(w, "\n#### Latency per decision, µs: p50 / p99 (all rounds' decisions; ceilings: median of redis-benchmark's)\n\n")
	r.header(w, "contender", "c=%d")
	for _, name := range r.rows {
		r.line(w, name, func(cs []*cell) string {
			if cs[0].lat == nil {
				return fmt.Sprintf("%s / %s", us(stat.Median(stat.Map(cs, func(c *cell) float64 { return float64(c.p50) }))),
					us(stat.Median(stat.Map(cs, func(c *cell) float64 { return float64(c.p99) }))))
			}
			var all []time.Duration
			for _, c := range cs {
				all = append(all, c.lat...)
			}
			slices.Sort(all)
			return fmt.Sprintf("%s / %s", us(float64(percentile(all, 0.5))), us(float64(percentile(all, 0.99))))
		})
	}

	fmt.Fprintf(w, "\n#### Cost per decision (medians over all cells)\n\n")
	fmt.Fprintf(w, "| contender | allocs | bytes | round trips | script run µs |")
	for _, c := range r.concs {
		fmt.Fprintf(w, " server CPU µs, c=%d |", c)
	}
	fmt.Fprintf(w, "\n|---|---:|---:|---:|---:|%s\n", strings.Repeat("---:|", len(r.concs)))
	for _, name := range r.rows {
		var all []*cell
		for _, c := range r.concs {
			all = append(all, r.res[name][c]...)
		}
		allocs, bytes, trips := "–", "–", "1"
		if all[0].mallocs >= 0 {
			allocs = fmt.Sprintf("%.0f", stat.Median(stat.Map(all, func(c *cell) float64 { return c.mallocs })))
			bytes = stat.Thousands(stat.Median(stat.Map(all, func(c *cell) float64 { return c.bytes })))
			trips = fmt.Sprintf("%.1f", r.trips[name])
		}
		script := "–"
		if all[0].scriptUS >= 0 {
			script = fmt.Sprintf("%.1f", stat.Median(stat.Map(all, func(c *cell) float64 { return c.scriptUS })))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |", name, allocs, bytes, trips, script)
		for _, c := range r.concs {
			fmt.Fprintf(w, " %.1f |", stat.Median(stat.Map(r.res[name][c], func(c *cell) float64 { return c.serverUS })))
		}
		fmt.Fprintln(w)
	}

	if len(r.mem) > 0 {
		fmt.Fprintf(w, "\n#### Memory per key (%s keys each, one request of cost 1 per key)\n\n", stat.Thousands(float64(r.memKeys)))
		fmt.Fprintf(w, "| keys written by | type (encoding) | sample key | MEMORY USAGE, bytes (mean of %d samples) | used_memory growth less client buffers ÷ keys, bytes |\n|---|---|---|---:|---:|\n", memSamples)
		for _, m := range r.mem {
			fmt.Fprintf(w, "| %s | %s | `%s` | %.0f | %.0f |\n", m.name, m.encoding, m.key, m.usage, m.used)
		}
	}
}

// ratioTable writes a table of ratios of value between contenders: per concurrency, the
// median of the rounds' ratios and their range ("–" when no round has both values).
func (r *report) ratioTable(w io.Writer, title string, qs []ratio, value func(*cell) float64) {
	fmt.Fprintf(w, "\n#### %s (median of the %d rounds' ratios, range in brackets)\n\n", title, r.rounds)
	fmt.Fprintf(w, "| ratio | target |")
	for _, c := range r.concs {
		fmt.Fprintf(w, " c=%d |", c)
	}
	fmt.Fprintf(w, "\n|---|---|%s\n", strings.Repeat("---:|", len(r.concs)))
	for _, q := range qs {
		if r.res[q.a] == nil || r.res[q.b] == nil {
			continue
		}
		fmt.Fprintf(w, "| %s | %s |", q.label, q.target)
		for _, c := range r.concs {
			a, b := r.res[q.a][c], r.res[q.b][c]
			var rs []float64
			for i := range min(len(a), len(b)) {
				if vb := value(b[i]); vb > 0 {
					rs = append(rs, value(a[i])/vb)
				}
			}
			if len(rs) == 0 {
				fmt.Fprintf(w, " – |")
				continue
			}
			fmt.Fprintf(w, " %.2f (%.2f–%.2f) |", stat.Median(rs), slices.Min(rs), slices.Max(rs))
		}
		fmt.Fprintln(w)
	}
}

func (r *report) header(w io.Writer, first, col string) {
	fmt.Fprintf(w, "| %s |", first)
	for _, c := range r.concs {
		fmt.Fprintf(w, " "+col+" |", c)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|", len(r.concs)))
}

func (r *report) line(w io.Writer, name string, f func([]*cell) string) {
	fmt.Fprintf(w, "| %s |", name)
	for _, c := range r.concs {
		fmt.Fprintf(w, " %s |", f(r.res[name][c]))
	}
	fmt.Fprintln(w)
}

// us writes nanoseconds as whole microseconds.
func us(ns float64) string { return fmt.Sprintf("%.0f", ns/1e3) }
