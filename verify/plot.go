package verify

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Plot geometry, in SVG user units.
const (
	plotWidth  = 960
	plotLeft   = 64
	plotRight  = 24
	plotPanel  = 150 // height of one traffic source's chart
	plotGap    = 56  // room for a panel's title and time axis
	plotHeader = 64
)

// WriteSVG draws the report's timeline as an SVG image: one chart per traffic source with
// its allowed (green) and denied (red) requests per time bucket stacked, and, dashed, the
// limit of the rule that denied most of them, scaled to one bucket (limit × bucket /
// window, per key; not drawn, and the legend says so, when that is below one request);
// grey bands mark the scenario's faults. The y axis counts requests per bar, in whole
// numbers. The image is self-contained and
// deterministic.
func (r *Report) WriteSVG(w io.Writer) error {
	ew := &errWriter{w: w}
	tl := r.Timeline
	height := plotHeader + len(tl.Traffic)*(plotPanel+plotGap) + 8
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
	for i, s := range tl.Traffic {
		r.plotPanel(ew, s, plotHeader+i*(plotPanel+plotGap)+20)
	}
	fmt.Fprintln(ew, "</svg>")
	return ew.err
}

func (r *Report) plotPanel(w io.Writer, s *Series, top int) {
	n := len(s.Allowed)
	var peak int64
	for i := range n {
		peak = max(peak, s.Allowed[i]+s.Denied[i])
	}
	limit, label := r.plotLimit(s.Name)
	drawn := limit >= 1 // a limit below one request per bar would sit on the zero axis
	top0 := float64(peak)
	if drawn {
		top0 = max(top0, limit)
	}
	yMax := max(niceCeil(top0), 2)
	step := max(niceCeil(yMax/4), 1) // integer ticks: requests are whole
	inner := plotWidth - plotLeft - plotRight
	y := func(v float64) float64 { return float64(top+plotPanel) - v/yMax*plotPanel }
	tr := r.traffic(s.Name)
	head := s.Name
	if tr != nil {
		head = fmt.Sprintf("%s — %d requests, %d allowed, %d denied", s.Name, tr.Requests, tr.Allowed, tr.Denied)
	}
	fmt.Fprintf(w, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", plotLeft, top-22, esc(head))
	// The limit's legend, on its own line above the chart: never over the bars.
	if label != "" {
		if drawn {
			label = "- - " + label
		} else {
			label += ": below one request per bar, not drawn"
		}
		fmt.Fprintf(w, `<text x="%d" y="%d" font-size="11" fill="#1a237e">%s</text>`+"\n", plotLeft, top-7, esc(label))
	}
	// Axes and grid: integer ticks, and the axis title.
	for v := 0.0; v <= yMax; v += step {
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", plotLeft, y(v), plotLeft+inner, y(v))
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", plotLeft-6, y(v)+4, trimFloat(v))
	}
	cy := top + plotPanel/2
	fmt.Fprintf(w, `<text x="16" y="%d" text-anchor="middle" fill="#555" transform="rotate(-90 16 %d)">requests per %s</text>`+"\n", cy, cy, esc(fmtDur(r.Timeline.Bucket)))
	// Faults: a grey band over the time each was in force, a line at a flush.
	total := r.Timeline.Bucket * time.Duration(n)
	for _, f := range r.Faults {
		if total <= 0 {
			break
		}
		x := float64(plotLeft) + float64(inner)*float64(f.At)/float64(total)
		wd := max(float64(inner)*float64(f.For)/float64(total), 1.5)
		fmt.Fprintf(w, `<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="#9e9e9e" fill-opacity="0.3"/>`+"\n", x, top, wd, plotPanel)
		fmt.Fprintf(w, `<text x="%.2f" y="%d" fill="#555" font-size="10">%s</text>`+"\n", x+2, top+10, esc(f.Kind))
	}
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
	if drawn {
		fmt.Fprintf(w, `<line x1="%d" y1="%.2f" x2="%d" y2="%.2f" stroke="#1a237e" stroke-width="2" stroke-dasharray="6 4"/>`+"\n", plotLeft, y(limit), plotLeft+inner, y(limit))
	}
	// Time axis: five ticks.
	for k := 0; k <= 4; k++ {
		x := float64(plotLeft) + float64(inner)*float64(k)/4
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#555"/>`+"\n", x, top+plotPanel, x, top+plotPanel+4)
		at := (total * time.Duration(k) / 4).Round(time.Millisecond)
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", x, top+plotPanel+18, esc(fmtDur(at)))
	}
}

// plotLimit returns the limit line of a traffic source's chart: the limit of the rule that
// denied most of its requests, per bucket, and its label; 0 when there is none to draw.
func (r *Report) plotLimit(traffic string) (float64, string) {
	tr := r.traffic(traffic)
	if tr == nil || len(tr.DeniedBy) == 0 {
		return 0, ""
	}
	top := tr.DeniedBy[0]
	for _, c := range tr.DeniedBy[1:] {
		if c.Count > top.Count {
			top = c
		}
	}
	for _, ru := range r.Rules {
		if ru.Policy != top.Policy || ru.Rule != top.Rule || ru.Window <= 0 || ru.Limit <= 0 {
			continue
		}
		per := float64(ru.Limit) * float64(r.Timeline.Bucket) / float64(ru.Window)
		return per, fmt.Sprintf("limit %s: %s per key (%s per bar)", ru.Rule, termsCell(ru), trimFloat(per))
	}
	return 0, ""
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
