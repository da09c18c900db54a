package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rlctl/rlctl/bench/internal/stat"
)

// target is the issue's: with leases, redis-server CPU per decision at most 1/20 of the
// unleased engine's.
const target = 1.0 / 20

// report renders a run as Markdown.
type report struct {
	env                string
	load               load
	rounds             int
	cs                 []contender
	res                results
	idleUS             float64 // redis-server CPU per second while idle, µs
	loadStart, loadEnd string
}

func (r *report) write(w io.Writer) {
	fmt.Fprintf(w, "Machine: %s; load average %s at the start, %s at the end.\n\n", r.env, r.loadStart, r.loadEnd)
	fmt.Fprintf(w, "One fixed_window key (limit %d per %v, never reached): %d engines, each on a go-redis client of its own, %d goroutines each, "+
		"%d decisions per cell (capped at %v), %d rounds. redis-server's idle CPU: %.0f µs per second.\n\n",
		limit, window, r.load.engines, r.load.g, r.load.n, r.load.maxTime, r.rounds, r.idleUS)

	fmt.Fprintf(w, "#### Per contender (medians of %d rounds)\n\n", r.rounds)
	fmt.Fprintln(w, "| contender | decisions/s | redis-server CPU µs per decision | script calls per decision (FCALL + EVALSHA) | engine calls per decision | served from a lease | this process's CPU µs per decision |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, c := range r.cs {
		cs := r.res[c.name]
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.2f%% | %.1f |\n", c.name,
			stat.Thousands(stat.Median(stat.Map(cs, (*cell).rate))),
			prec(stat.Median(stat.Map(cs, func(c *cell) float64 { return c.serverUS }))),
			prec(stat.Median(stat.Map(cs, func(c *cell) float64 { return c.per(c.scriptCalls) }))),
			prec(stat.Median(stat.Map(cs, func(c *cell) float64 { return c.per(float64(c.engineCalls)) }))),
			100*stat.Median(stat.Map(cs, func(c *cell) float64 { return c.per(float64(c.fromLease)) })),
			stat.Median(stat.Map(cs, func(c *cell) float64 { return c.selfUS })))
	}

	fmt.Fprintf(w, "\n#### Leased ÷ unleased (median of the %d rounds' ratios, range in brackets)\n\n", r.rounds)
	fmt.Fprintf(w, "| ratio | redis-server CPU per decision | rounds ≤ 1/20 | script calls per decision | decisions/s |\n|---|---:|---:|---:|---:|\n")
	for _, a := range r.cs {
		if a.lease == 0 {
			continue
		}
		for _, b := range r.cs {
			if b.lease != 0 {
				continue
			}
			cpu := r.ratios(a.name, b.name, func(c *cell) float64 { return c.serverUS })
			met := 0
			for _, x := range cpu {
				if x <= target {
					met++
				}
			}
			fmt.Fprintf(w, "| %s ÷ %s | %s | %d of %d | %s | %s |\n", a.name, b.name, span(cpu), met, len(cpu),
				span(r.ratios(a.name, b.name, func(c *cell) float64 { return c.per(c.scriptCalls) })),
				span(r.ratios(a.name, b.name, (*cell).rate)))
		}
	}

	fmt.Fprintf(w, "\n#### The check: the server's count after ReturnLeases = decisions admitted, every round\n\n")
	fmt.Fprintf(w, "| contender |")
	for i := range r.rounds {
		fmt.Fprintf(w, " round %d |", i+1)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|", r.rounds))
	for _, c := range r.cs {
		fmt.Fprintf(w, "| %s |", c.name)
		for _, cl := range r.res[c.name] {
			fmt.Fprintf(w, " %s = %s |", stat.Thousands(float64(cl.counted)), stat.Thousands(float64(cl.admitted)))
		}
		fmt.Fprintln(w)
	}
}

// ratios returns a's value over b's in each round.
func (r *report) ratios(a, b string, value func(*cell) float64) []float64 {
	ca, cb := r.res[a], r.res[b]
	var out []float64
	for i := range min(len(ca), len(cb)) {
		if vb := value(cb[i]); vb > 0 {
			out = append(out, value(ca[i])/vb)
		}
	}
	return out
}

// span writes the median of xs and their range.
func span(xs []float64) string {
	if len(xs) == 0 {
		return "–"
	}
	return fmt.Sprintf("%s (%s–%s)", prec(stat.Median(xs)), prec(slices.Min(xs)), prec(slices.Max(xs)))
}

// prec writes v with three significant digits, at most four decimals.
func prec(v float64) string {
	switch a := max(v, -v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a >= 0.1:
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.4f", v)
}
