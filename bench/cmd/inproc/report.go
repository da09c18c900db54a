package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rlctl/rlctl/bench/internal/stat"
)

// report renders a run as Markdown.
type report struct {
	env                string
	loadStart, loadEnd string // /proc/loadavg around the rounds
	rounds             int
	load               load
	rows               []contender // in table order
	res                map[string][]*cell
}

// marginals returns name's ns per request less the bare handler's, round by round.
func (r *report) marginals(name string) []float64 {
	a, b := r.res[name], r.res[bareName]
	out := make([]float64, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i].ns() - b[i].ns()
	}
	return out
}

// ratios returns a's marginal over b's, round by round, for the rounds where b's is above 0.
func (r *report) ratios(a, b string) []float64 {
	ma, mb := r.marginals(a), r.marginals(b)
	var out []float64
	for i := range min(len(ma), len(mb)) {
		if mb[i] > 0 {
			out = append(out, ma[i]/mb[i])
		}
	}
	return out
}

// spread writes the median of xs with its range, "–" for none.
func spread(xs []float64, f func(float64) string) string {
	if len(xs) == 0 {
		return "–"
	}
	return fmt.Sprintf("%s (%s–%s)", f(stat.Median(xs)), f(slices.Min(xs)), f(slices.Max(xs)))
}

func twoPlaces(v float64) string { return fmt.Sprintf("%.2f", v) }

func (r *report) write(w io.Writer) {
	fmt.Fprintf(w, "Machine: %s.\n", r.env)
	fmt.Fprintf(w, "Load average (1, 5, 15 min): %s at the start; %s at the end.\n", r.loadStart, r.loadEnd)
	fmt.Fprintf(w, "%d timed requests per cell from %d goroutines, over %d client addresses; allocations over %d requests from one goroutine; %d rounds, medians reported (range in brackets).\n\n",
		r.load.n, r.load.c, len(r.load.addrs), r.load.allocN, r.rounds)

	fmt.Fprintf(w, "| contender | ns/request | CPU ns/request | allocs/request | B/request | marginal over bare, ns | marginal ÷ httprate's |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range r.rows {
		cs := r.res[c.name]
		if len(cs) == 0 {
			continue
		}
		marginal, ratio := "–", "–"
		switch c.name {
		case bareName:
		case httprateName:
			marginal, ratio = spread(r.marginals(c.name), stat.Thousands), "1"
		default:
			marginal = spread(r.marginals(c.name), stat.Thousands)
			if r.res[httprateName] != nil {
				ratio = spread(r.ratios(c.name, httprateName), twoPlaces)
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.1f | %s | %s | %s |\n", c.name,
			spread(stat.Map(cs, (*cell).ns), stat.Thousands),
			stat.Thousands(stat.Median(stat.Map(cs, (*cell).cpuNS))),
			stat.Median(stat.Map(cs, func(c *cell) float64 { return c.allocs })),
			stat.Thousands(stat.Median(stat.Map(cs, func(c *cell) float64 { return c.bytes }))),
			marginal, ratio)
	}

	var lines []string
	for _, alg := range []string{"gcra", "fixed_window"} {
		n, l := "rlctl native, "+alg, "rlctl luahost, "+alg
		if r.res[n] != nil && r.res[l] != nil {
			lines = append(lines, fmt.Sprintf("| %s: native ÷ luahost | %s |\n", alg, spread(r.ratios(n, l), twoPlaces)))
		}
	}
	if len(lines) > 0 {
		fmt.Fprintf(w, "\n| marginal cost over bare | ratio |\n|---|---:|\n%s", strings.Join(lines, ""))
	}
	fmt.Fprintf(w, "\nns/request: wall time of a cell ÷ its requests, all goroutines together (as RunParallel's ns/op); CPU ns/request: the process's user + system time over the same span ÷ requests. The marginal and its ratios are taken within each round.\n")
}
