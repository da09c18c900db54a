package verify

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Plot geometry, in SVG user units.
const (
	plotWidth    = 960
	plotLeft     = 64
	plotRight    = 24
	plotPanel    = 150 // height of one traffic source's chart
	plotGap      = 56  // room for a panel's title and time axis
	plotHeader   = 64
	plotKeyPanel = 80 // height of the chart of a source's busiest key, under its own
	plotKeyGap   = 24 // room for that chart's title
)

// WriteSVG draws the report's timeline as an SVG image: one chart per traffic source with
// its allowed (green) and denied (red) requests per time bucket stacked; under it, when a
// rule denied some of them, the rule that denied most as it counts: its busiest key's
// count within a window (or calendar period) against its limit, dashed, and dotted the
// most the algorithm allows by design where that is above the limit; grey bands mark the
// scenario's faults. The y axes count in whole numbers. The image is self-contained and
// deterministic.
func (r *Report) WriteSVG(w io.Writer) error {
	ew := &errWriter{w: w}
	tl := r.Timeline
	height := plotHeader + 8
	for _, s := range tl.Traffic {
		height += panelHeight(s)
	}
	fmt.Fprintf(ew, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotWidth, height, plotWidth, height)
	fmt.Fprintf(ew, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	title := "replay"
	if r.Scenario != "" {
		title = "scenario " + r.Scenario
	}
	fmt.Fprintf(ew, `<text x="%d" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", plotLeft, esc(title))
	fmt.Fprintf(ew, `<text x="%d" y="40" fill="#555">%s of virtual time · %d requests, %d allowed, %d denied · one bar per %s</text>`+"\n",
		plotLeft, esc(fmtDur(r.Duration)), r.Requests, r.Allowed, r.Requests-r.Allowed, esc(fmtDur(tl.Bucket)))
	lx := plotWidth - plotRight - 260
	fmt.Fprintf(ew, `<rect x="%d" y="12" width="12" height="12" fill="#2e7d32"/><text x="%d" y="22">allowed</text>`+"\n", lx, lx+16)
	fmt.Fprintf(ew, `<rect x="%d" y="12" width="12" height="12" fill="#c62828"/><text x="%d" y="22">denied</text>`+"\n", lx+80, lx+96)
	fmt.Fprintf(ew, `<line x1="%d" y1="18" x2="%d" y2="18" stroke="#1a237e" stroke-width="2" stroke-dasharray="6 4"/><text x="%d" y="22">limit</text>`+"\n", lx+160, lx+184, lx+190)
	top := plotHeader + 20
	for _, s := range tl.Traffic {
		r.plotPanel(ew, s, top)
		if s.Key != nil {
			r.plotKey(ew, s.Key, top+plotPanel+plotGap-20+plotKeyGap)
		}
		top += panelHeight(s)
	}
	fmt.Fprintln(ew, "</svg>")
	return ew.err
}

// panelHeight is the room one traffic source's charts take.
func panelHeight(s *Series) int {
	if s.Key != nil {
		return plotPanel + plotGap + plotKeyGap + plotKeyPanel + 16
	}
	return plotPanel + plotGap
}

func (r *Report) plotPanel(w io.Writer, s *Series, top int) {
	n := len(s.Allowed)
	var peak int64
	for i := range n {
		peak = max(peak, s.Allowed[i]+s.Denied[i])
	}
	yMax := max(niceCeil(float64(peak)), 2)
	step := max(niceCeil(yMax/4), 1) // integer ticks: requests are whole
	inner := plotWidth - plotLeft - plotRight
	y := func(v float64) float64 { return float64(top+plotPanel) - v/yMax*plotPanel }
	tr := r.traffic(s.Name)
	head := s.Name
	if tr != nil {
		head = fmt.Sprintf("%s — %d requests, %d allowed, %d denied", s.Name, tr.Requests, tr.Allowed, tr.Denied)
	}
	fmt.Fprintf(w, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", plotLeft, top-8, esc(head))
	// Axes and grid: integer ticks, and the axis title.
	for v := 0.0; v <= yMax; v += step {
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", plotLeft, y(v), plotLeft+inner, y(v))
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", plotLeft-6, y(v)+4, trimFloat(v))
	}
	cy := top + plotPanel/2
	fmt.Fprintf(w, `<text x="16" y="%d" text-anchor="middle" fill="#555" transform="rotate(-90 16 %d)">requests per %s</text>`+"\n", cy, cy, esc(fmtDur(r.Timeline.Bucket)))
	r.plotFaults(w, n, top, plotPanel)
	bw := float64(inner) / float64(max(n, 1))
	var b strings.Builder
	for i := range n {
		x := float64(plotLeft) + float64(i)*bw
		a, d := float64(s.Allowed[i]), float64(s.Denied[i])
		if a > 0 {
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="#2e7d32"/>`+"\n", x, y(a), bw, y(0)-y(a))
		}
		if d > 0 {
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="#c62828"/>`+"\n", x, y(a+d), bw, y(a)-y(a+d))
		}
	}
	io.WriteString(w, b.String())
	// Time axis: five ticks.
	total := r.Timeline.Bucket * time.Duration(n)
	for k := 0; k <= 4; k++ {
		x := float64(plotLeft) + float64(inner)*float64(k)/4
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#555"/>`+"\n", x, top+plotPanel, x, top+plotPanel+4)
		at := (total * time.Duration(k) / 4).Round(time.Millisecond)
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", x, top+plotPanel+18, esc(fmtDur(at)))
	}
}

// plotFaults draws the faults over a chart of n buckets: a grey band over the time each
// was in force, a line at a flush.
func (r *Report) plotFaults(w io.Writer, n, top, height int) {
	total := r.Timeline.Bucket * time.Duration(n)
	if total <= 0 {
		return
	}
	inner := plotWidth - plotLeft - plotRight
	for _, f := range r.Faults {
		x := float64(plotLeft) + float64(inner)*float64(f.At)/float64(total)
		wd := max(float64(inner)*float64(f.For)/float64(total), 1.5)
		fmt.Fprintf(w, `<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="#9e9e9e" fill-opacity="0.3"/>`+"\n", x, top, wd, height)
		fmt.Fprintf(w, `<text x="%.2f" y="%d" fill="#555" font-size="10">%s</text>`+"\n", x+2, top+10, esc(f.Kind))
	}
}

// plotKey draws the count of a source's busiest key for the rule that denied most of its
// requests, sampled at those requests: a line per run of buckets with requests, the
// limit as the rule held that key to it (dashed; it steps when an override changes it),
// and the algorithm's bound by design (dotted) where that is above the limit. A bucket
// without requests carries the limits of the one before it.
func (r *Report) plotKey(w io.Writer, k *KeySeries, top int) {
	n := len(k.Counted)
	var peak int64
	loose := false
	for i := range n {
		peak = max(peak, k.Counted[i], k.Limit[i], k.Bound[i])
		loose = loose || k.Bound[i] > k.Limit[i]
	}
	yMax := max(roomAbove(float64(peak)), 2) // the limit below the top, not on the frame
	inner := plotWidth - plotLeft - plotRight
	y := func(v float64) float64 { return float64(top+plotKeyPanel) - v/yMax*plotKeyPanel }
	span := "within any " + k.Per
	if _, err := time.ParseDuration(k.Per); err != nil {
		span = "in the " + k.Per + " so far"
	}
	title := fmt.Sprintf("%s.%s, as it counts: its busiest key's cost %s (line), against its limit (dashed)", k.Policy, k.Rule, span)
	if loose {
		title += " and what the algorithm allows by design (dotted)"
	}
	fmt.Fprintf(w, `<text x="%d" y="%d" font-size="11" fill="#1a237e">%s</text>`+"\n", plotLeft, top-8, esc(title))
	// Ticks at 0 and at the highest limit and bound: the values the chart is about.
	var hiLimit, hiBound int64
	for i := range n {
		hiLimit, hiBound = max(hiLimit, k.Limit[i]), max(hiBound, k.Bound[i])
	}
	for _, v := range slices.Compact([]int64{0, hiLimit, hiBound}) {
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", plotLeft, y(float64(v)), plotLeft+inner, y(float64(v)))
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%d</text>`+"\n", plotLeft-6, y(float64(v))+4, v)
	}
	r.plotFaults(w, n, top, plotKeyPanel)
	bw := float64(inner) / float64(max(n, 1))
	// The count: one polyline per run of buckets with requests.
	var line strings.Builder
	for i := range n {
		if k.Limit[i] == 0 {
			continue
		}
		cmd := "L"
		if i == 0 || k.Limit[i-1] == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&line, "%s%.2f %.2f", cmd, float64(plotLeft)+(float64(i)+0.5)*bw, y(float64(k.Counted[i])))
	}
	if line.Len() > 0 {
		fmt.Fprintf(w, `<path d="%s" fill="none" stroke="#2e7d32" stroke-width="1.5"/>`+"\n", line.String())
	}
	// The limits, carried over buckets without requests.
	var lim, bound strings.Builder
	var cur, curBound int64
	for i := range n {
		if k.Limit[i] > 0 {
			cur, curBound = k.Limit[i], k.Bound[i]
		}
		if cur == 0 {
			continue
		}
		x0, x1 := float64(plotLeft)+float64(i)*bw, float64(plotLeft)+float64(i+1)*bw
		fmt.Fprintf(&lim, "M%.2f %.2fH%.2f", x0, y(float64(cur)), x1)
		if curBound > cur {
			fmt.Fprintf(&bound, "M%.2f %.2fH%.2f", x0, y(float64(curBound)), x1)
		}
	}
	if lim.Len() > 0 {
		fmt.Fprintf(w, `<path d="%s" fill="none" stroke="#1a237e" stroke-width="2" stroke-dasharray="6 4"/>`+"\n", lim.String())
	}
	if bound.Len() > 0 {
		fmt.Fprintf(w, `<path d="%s" fill="none" stroke="#5c6bc0" stroke-width="1.5" stroke-dasharray="2 3"/>`+"\n", bound.String())
	}
	fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555"/>`+"\n", plotLeft, top+plotKeyPanel, plotLeft+inner, top+plotKeyPanel)
}

// roomAbove returns a round number a little above v (at least an eighth more), so that a
// line at v stays clear of the chart's top.
func roomAbove(v float64) float64 {
	if v <= 0 {
		return 0
	}
	want := v * 9 / 8
	p := niceCeil(want) / 10
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= want {
			return m * p
		}
	}
	return niceCeil(want)
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 0
	}
	p := 1.0
	for p*10 <= v {
		p *= 10
	}
	for p > v {
		p /= 10
	}
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

var svgEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func esc(s string) string { return svgEscaper.Replace(s) }
