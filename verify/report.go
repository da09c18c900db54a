package verify

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

// Report is what a simulation measured. It implements dsl.Outcome, so a scenario's
// expectations can be checked against it. Durations are in nanoseconds in JSON (the
// fields ending in _ns); the virtual clock itself has microsecond resolution.
type Report struct {
	Scenario string        `json:"scenario,omitempty"`
	Policies []string      `json:"policies"`
	Seed     int64         `json:"seed"`
	Trace    bool          `json:"trace,omitempty"` // replayed a trace
	Duration time.Duration `json:"duration_ns"`
	// Start is the instant virtual time 0 stood for, when the scenario set one
	// (start_time); zero otherwise.
	Start    time.Time        `json:"start_time,omitzero"`
	Requests int64            `json:"requests"`
	Allowed  int64            `json:"allowed"`
	Traffic  []*TrafficReport `json:"traffic"`
	Rules    []*RuleReport    `json:"rules"`
	Expect   []ExpectResult   `json:"expect"`
	Timeline Timeline         `json:"timeline"`
	// Engine is the engine's configuration, when the scenario declares faults or a deny
	// cache; nil otherwise (the engine on luahost, nothing that can fail).
	Engine *EngineReport `json:"engine,omitempty"`
	// Faults are the scenario's faults, in time order, with what each did.
	Faults []*FaultReport `json:"faults,omitempty"`
	// Leases is what quota leases (dsl.Rule.LeaseSize) saved the run; nil when no rule
	// is leased.
	Leases *LeaseReport `json:"leases,omitempty"`
	// Changes are the scenario's override and list changes, in time order.
	Changes []ChangeReport `json:"changes,omitempty"`

	allowedAt map[string][]int64
}

// LeaseReport counts a run's calls to Redis beside its decisions, where rules are served
// from quota leases: a decision that some rule applied to makes at least one call without
// leases, and none when its leased rules spent from a slice and no other rule applied.
type LeaseReport struct {
	Decisions int64 `json:"decisions"`  // decisions that some rule applied to
	InProcess int64 `json:"in_process"` // of those, made from leases with no call to Redis
	// Calls are every call the instances made to Redis: the rules' checks, the leases'
	// takes and their returns.
	Calls int64 `json:"calls"`
}

// ChangeReport is one override or list change of a scenario (dsl.Change): when, and what.
type ChangeReport struct {
	At time.Duration `json:"at_ns"`
	// Kind is "override" or "list".
	Kind string `json:"kind"`
	// For is how long the override lasts; 0 until cleared (or for a clearing change).
	For    time.Duration `json:"for_ns,omitempty"`
	Change string        `json:"change"` // "per_user for user=acme: rate=100/s burst=200"
}

// TrafficReport is one traffic source's outcome.
type TrafficReport struct {
	Name     string `json:"name"`
	Pattern  string `json:"pattern,omitempty"`
	Clients  int    `json:"clients,omitempty"`
	Requests int64  `json:"requests"`
	Allowed  int64  `json:"allowed"`
	Denied   int64  `json:"denied"`
	// Units is what each request asks for (engine.AllowN's n, or AllowAtMost's with
	// AtMost); Granted sums what the allowed ones were granted.
	Units   int64 `json:"units"`
	AtMost  bool  `json:"at_most,omitempty"`
	Granted int64 `json:"granted"`
	// Waited counts the allowed requests that waited for their turn first (max_delay),
	// MaxWait is the longest wait and TotalWait their sum; a request that waited counts
	// as allowed when its wait ended.
	Waited    int64         `json:"waited,omitempty"`
	MaxWait   time.Duration `json:"max_wait_ns,omitempty"`
	TotalWait time.Duration `json:"total_wait_ns,omitempty"`
	// Settled counts the allowed requests that settled their true cost after the fact
	// (actual), SettledCost what those costs came to, Owed how much of it was over their
	// estimates (charged as a debt) and Returned how much was under (the refunds asked;
	// each gives back at most what its charge still weighs).
	Settled     int64 `json:"settled,omitempty"`
	SettledCost int64 `json:"settled_cost,omitempty"`
	Owed        int64 `json:"owed,omitempty"`
	Returned    int64 `json:"returned,omitempty"`
	// Unlimited counts requests no rule applied to (allowed without a check).
	Unlimited int64       `json:"unlimited"`
	DeniedBy  []RuleCount `json:"denied_by"` // by deciding rule, in order of first denial
	Retry     RetryStats  `json:"retry_after"`
	// Decided counts the requests by how they were decided: all by Redis unless the
	// scenario has faults or a deny cache.
	Decided Decisions `json:"decided"`
}

// RuleCount is a number of requests attributed to a rule.
type RuleCount struct {
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
	Count  int64  `json:"count"`
}

// RetryStats measures retry-after advice. A denial's advice is honoured when the same
// request, retried exactly at the advised instant, would have passed given the rest of the
// traffic (a peek then, which charges nothing, says so). Below 100% means other clients
// took the freed capacity first (shared keys), or the advice is wrong; rlctl verify checks
// it with no other traffic.
type RetryStats struct {
	Advised  int64 `json:"advised"`  // denials with a finite retry-after
	Honoured int64 `json:"honoured"` // of those, retries at the advised instant that would pass
	Never    int64 `json:"never"`    // denials whose cost exceeds the rule's capacity
	// Listed are denials by a deny list, whose retry-after is a floor the list states
	// (deny_retry), not a promise to pass: not probed.
	Listed int64 `json:"listed,omitempty"`
}

// RuleReport is one rule's outcome over every key it kept.
type RuleReport struct {
	Policy    string `json:"policy"`
	Rule      string `json:"rule"`
	Algorithm string `json:"algorithm"`
	Shadow    bool   `json:"shadow,omitempty"`
	Limit     int64  `json:"limit"` // the largest seen (parameters may vary by request)
	// Terms are the rule's limit in words (algorithms' Algorithm.Describe: "20/h, burst
	// 5"), one for each distinct limit its requests were checked against, in the order
	// first seen.
	Terms   []string      `json:"terms,omitempty"`
	Window  time.Duration `json:"window_ns"` // the longest seen; see engine.RuleResult.Window
	Keys    int           `json:"keys"`      // distinct keys
	Checked int64         `json:"checked"`   // requests the rule applied to
	Charged int64         `json:"charged"`   // cost charged by allowed requests
	Denied  int64         `json:"denied"`    // requests denied with this rule deciding
	// WouldDeny counts requests this rule alone would have denied: for a shadow rule, what
	// enforcing it would do.
	WouldDeny int64      `json:"would_deny"`
	Worst     *Peak      `json:"worst,omitempty"`
	Retry     RetryStats `json:"retry_after"`
}

// Peak kinds.
const (
	PeakWindow   = "window"    // cost allowed within one window-long interval
	PeakPeriod   = "period"    // cost allowed within one calendar period (Peak.Period)
	PeakInFlight = "in_flight" // leases held at once (requests not yet finished)
)

// Peak is a rule's worst key: the highest ratio of Allowed to Limit.
type Peak struct {
	Kind    string        `json:"kind"`
	Key     string        `json:"key"`
	Allowed int64         `json:"allowed"`
	Limit   int64         `json:"limit"`
	Bound   int64         `json:"bound,omitempty"` // the most the algorithm allows by design; 0 unknown
	Window  time.Duration `json:"window_ns,omitempty"`
	// Period, for a calendar rule (kind "period"), is the calendar period: "the month from
	// 2027-03-01 00:00:00 CET to 2027-04-01 00:00:00 CEST".
	Period string        `json:"period,omitempty"`
	At     time.Duration `json:"at_ns"` // when the interval ended (since the start)
}

// ExpectResult is one expectation's verdict.
type ExpectResult struct {
	Name  string `json:"name"`
	Expr  string `json:"expr"`
	Pass  bool   `json:"pass"`
	Error string `json:"error,omitempty"`
}

// Timeline counts allowed and denied requests per time bucket and traffic source.
type Timeline struct {
	Bucket  time.Duration `json:"bucket_ns"`
	Traffic []*Series     `json:"traffic"`
}

// Series is one traffic source's counts per bucket.
type Series struct {
	Name    string  `json:"name"`
	Allowed []int64 `json:"allowed"`
	Denied  []int64 `json:"denied"`
	// Key follows the rule that denied most of the source's requests as that rule counts;
	// nil when no rule denied any.
	Key *KeySeries `json:"key,omitempty"`
}

// KeySeries is one rule's count as the rule itself keeps it, seen at one traffic
// source's requests: per bucket, of the keys those requests were checked on there, the
// one whose count was the largest share of its limit, with the cost charged to it within
// the window that ended at the request (a calendar rule: in the period so far), its limit
// and the most its algorithm allows by design (the limit when that is exact). A bucket
// without a request of the source is zero in all three.
type KeySeries struct {
	Policy  string  `json:"policy"`
	Rule    string  `json:"rule"`
	Per     string  `json:"per"` // what a count spans: "1m", or a calendar unit ("month")
	Counted []int64 `json:"counted"`
	Limit   []int64 `json:"limit"`
	Bound   []int64 `json:"bound"`
}

// Failed returns the expectations that did not pass.
func (r *Report) Failed() []ExpectResult {
	var out []ExpectResult
	for _, x := range r.Expect {
		if !x.Pass {
			out = append(out, x)
		}
	}
	return out
}

// topDenier returns the rule that denied most of tr's requests (the first of a tie), or
// nil.
func (tr *TrafficReport) topDenier() *RuleCount {
	var top *RuleCount
	for i := range tr.DeniedBy {
		if top == nil || tr.DeniedBy[i].Count > top.Count {
			top = &tr.DeniedBy[i]
		}
	}
	return top
}

func (r *Report) traffic(name string) *TrafficReport {
	for _, t := range r.Traffic {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Outcome returns the report as a dsl.Outcome, for dsl.Expect.Check.
func (r *Report) Outcome() dsl.Outcome { return outcome{r} }

// outcome adapts a Report to dsl.Outcome (whose method names are the Report's fields).
type outcome struct{ r *Report }

func (o outcome) Requests(traffic string) int64 {
	if t := o.r.traffic(traffic); t != nil {
		return t.Requests
	}
	return 0
}

func (o outcome) Granted(traffic string) int64 {
	if t := o.r.traffic(traffic); t != nil {
		return t.Granted
	}
	return 0
}

func (o outcome) Allowed(traffic string) int64 {
	if t := o.r.traffic(traffic); t != nil {
		return t.Allowed
	}
	return 0
}

// DeniedBy counts traffic's requests denied with a rule of that name deciding, in any of
// the report's policies.
func (o outcome) DeniedBy(traffic, rule string) int64 {
	var n int64
	if t := o.r.traffic(traffic); t != nil {
		for _, c := range t.DeniedBy {
			if c.Rule == rule {
				n += c.Count
			}
		}
	}
	return n
}

// MaxAllowedIn is the most of traffic's requests allowed within any half-open interval of
// length span.
func (o outcome) Waited(traffic string) int64 {
	if t := o.r.traffic(traffic); t != nil {
		return t.Waited
	}
	return 0
}

func (o outcome) MaxWait(traffic string) time.Duration {
	if t := o.r.traffic(traffic); t != nil {
		return t.MaxWait
	}
	return 0
}

func (o outcome) Settled(traffic string) int64 {
	if t := o.r.traffic(traffic); t != nil {
		return t.SettledCost
	}
	return 0
}

func (o outcome) Owed(traffic string) int64 {
	if t := o.r.traffic(traffic); t != nil {
		return t.Owed
	}
	return 0
}

func (o outcome) MaxAllowedIn(traffic string, span time.Duration) int64 {
	return o.r.MaxAllowedIn(traffic, span)
}

func (o outcome) DuringFault(traffic string) (requests, allowed int64) {
	for _, f := range o.r.Faults {
		for _, t := range f.Traffic {
			if t.Name == traffic {
				requests += t.Requests
				allowed += t.Allowed
			}
		}
	}
	return requests, allowed
}

func (o outcome) decided(traffic string) Decisions {
	if t := o.r.traffic(traffic); t != nil {
		return t.Decided
	}
	return Decisions{}
}

func (o outcome) DecidedBy(traffic, how string) int64 {
	d := o.decided(traffic)
	switch how {
	case "redis":
		return d.Redis
	case "local":
		return d.Local
	case "fail_open":
		return d.FailOpen
	case "fail_deny":
		return d.FailDeny
	case "cache":
		return d.Cache
	}
	return 0
}

func (o outcome) TimedOut(traffic string) int64    { return o.decided(traffic).TimedOut }
func (o outcome) BreakerOpen(traffic string) int64 { return o.decided(traffic).BreakerOpen }

func (o outcome) Recovery(traffic string) time.Duration {
	var longest time.Duration
	for _, f := range o.r.Faults {
		for _, t := range f.Traffic {
			if t.Name == traffic {
				longest = max(longest, t.Recovery)
			}
		}
	}
	return longest
}

func (o outcome) PhantomCharges() int64 { return o.r.PhantomCharges() }

// PhantomCharges returns the number of calls that stalled servers ran after their callers
// stopped waiting and that charged their rules all the same.
func (r *Report) PhantomCharges() int64 {
	var n int64
	for _, f := range r.Faults {
		if f.Late != nil {
			n += f.Late.Charged
		}
	}
	return n
}

// MaxAllowedIn returns the most of traffic's requests allowed within any half-open
// interval of length span.
func (r *Report) MaxAllowedIn(traffic string, span time.Duration) int64 {
	times := r.allowedAt[traffic]
	us := span.Microseconds()
	if us <= 0 {
		return 0
	}
	best, i := 0, 0
	for j := range times {
		for times[j]-times[i] >= us {
			i++
		}
		best = max(best, j-i+1)
	}
	return int64(best)
}

// niceSteps are the row widths a text timeline uses, in microseconds.
var niceSteps = []int64{
	1, 2, 5, 10, 20, 50, 100, 200, 500,
	1e3, 2e3, 5e3, 10e3, 20e3, 50e3, 100e3, 200e3, 500e3,
	1e6, 2e6, 5e6, 10e6, 15e6, 30e6,
	60e6, 120e6, 300e6, 600e6, 900e6, 1800e6,
	3600e6, 7200e6, 3 * 3600e6, 6 * 3600e6, 12 * 3600e6,
	86400e6, 2 * 86400e6, 7 * 86400e6, 14 * 86400e6, 30 * 86400e6, 90 * 86400e6, 365 * 86400e6,
}

// timelineRows is the most rows the text timeline has; the stored timeline is ten times
// finer, for plots.
const timelineRows = 24

func (s *sim) setupTimeline() {
	span := max(s.end-s.origin, 1)
	row := niceSteps[len(niceSteps)-1]
	for _, st := range niceSteps {
		if (span+st-1)/st <= timelineRows {
			row = st
			break
		}
	}
	s.bucket = max(row/10, 1)
	n := (span + s.bucket - 1) / s.bucket
	s.r.Timeline.Bucket = time.Duration(s.bucket) * time.Microsecond
	for _, ts := range s.tlist {
		ts.tl = &Series{Name: ts.rep.Name, Allowed: make([]int64, n), Denied: make([]int64, n)}
		s.r.Timeline.Traffic = append(s.r.Timeline.Traffic, ts.tl)
	}
}

// fmtDur prints a duration compactly: 10m, 1m30s, 250ms, 1.5s (algorithms.FormatDuration).
func fmtDur(d time.Duration) string { return algorithms.FormatDuration(d.Microseconds()) }

func pct(n, of int64) string {
	if of == 0 {
		return "-"
	}
	p := 100 * float64(n) / float64(of)
	if n == of {
		return "100%"
	}
	if p > 99.9 && n < of {
		return ">99.9%"
	}
	if p < 0.1 && n > 0 {
		return "<0.1%"
	}
	return strconv.FormatFloat(p, 'f', 1, 64) + "%"
}

// ruleName is a rule's name in a report: qualified by its policy when the report has more
// than one.
func (r *Report) ruleName(policy, rule string) string {
	if len(r.Policies) > 1 {
		return policy + "." + rule
	}
	return rule
}

// WriteText writes the report for a person: the outcome per traffic source and per rule,
// the expectations, and a timeline of allowed and denied requests with ASCII bars.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	head := "replay"
	if r.Scenario != "" {
		head = fmt.Sprintf("scenario %q", r.Scenario)
	}
	pol := "policy " + strconv.Quote(strings.Join(r.Policies, ", "))
	if len(r.Policies) != 1 {
		pol = fmt.Sprintf("%d policies", len(r.Policies))
	}
	fmt.Fprintf(ew, "%s · %s · %s of virtual time", head, pol, fmtDur(r.Duration))
	if !r.Start.IsZero() {
		fmt.Fprintf(ew, " from %s", r.Start.Format(time.RFC3339))
	}
	if !r.Trace {
		fmt.Fprintf(ew, " · seed %d", r.Seed)
	}
	fmt.Fprintf(ew, "\n%d requests: %d allowed, %d denied (%s)\n\n", r.Requests, r.Allowed, r.Requests-r.Allowed, pct(r.Requests-r.Allowed, r.Requests))

	tb := table{head: []string{"traffic", "clients", "pattern", "requests", "allowed", "denied", "denied %", "retry-after ok"}, left: 3}
	for _, t := range r.Traffic {
		clients, pattern := strconv.Itoa(t.Clients), t.Pattern
		if r.Trace {
			clients, pattern = "-", "trace"
		}
		tb.add(t.Name, clients, pattern, itoa(t.Requests), itoa(t.Allowed), itoa(t.Denied), pct(t.Denied, t.Requests), retryCell(t.Retry))
	}
	tb.write(ew)
	for _, t := range r.Traffic {
		var parts []string
		for _, c := range t.DeniedBy {
			parts = append(parts, fmt.Sprintf("%s %d", r.ruleName(c.Policy, c.Rule), c.Count))
		}
		if t.Decided.FailDeny > 0 {
			parts = append(parts, fmt.Sprintf("on_error = \"deny\" %d", t.Decided.FailDeny))
		}
		if t.Decided.Errors > 0 {
			parts = append(parts, fmt.Sprintf("engine errors %d", t.Decided.Errors))
		}
		if len(parts) > 0 {
			fmt.Fprintf(ew, "  %s denied by: %s\n", t.Name, strings.Join(parts, ", "))
		}
		if t.Unlimited > 0 {
			fmt.Fprintf(ew, "  %s: %d %s no rule (the policy did not match, no rule applied, or an unlimited block replaced them), allowed unlimited\n",
				t.Name, t.Unlimited, plural(t.Unlimited, "request matched", "requests matched"))
		}
	}
	for _, t := range r.Traffic {
		if t.AtMost {
			fmt.Fprintf(ew, "  %s granted %d of the %d units asked (up to %d a request)\n", t.Name, t.Granted, t.Requests*t.Units, t.Units)
		}
		if t.Waited > 0 {
			fmt.Fprintf(ew, "  %s waited for its turn: %d requests, %s on average, %s at most\n", t.Name, t.Waited, fmtDur((t.TotalWait / time.Duration(t.Waited)).Round(time.Millisecond)), fmtDur(t.MaxWait.Round(time.Millisecond)))
		}
		if t.Settled > 0 {
			fmt.Fprintf(ew, "  %s settled %d requests at a true cost of %d units against estimates of %d: %d over them (owed), %d under (refunds asked)\n", t.Name, t.Settled, t.SettledCost, t.Settled*t.Units, t.Owed, t.Returned)
		}
	}
	fmt.Fprintln(ew)

	if l := r.Leases; l != nil {
		fmt.Fprintf(ew, "leases: %d of %d decisions made in process (%s), no call to Redis; %d calls to Redis in all, takes and returns included, where each decision alone makes one at least\n\n",
			l.InProcess, l.Decisions, pct(l.InProcess, l.Decisions), l.Calls)
	}
	tb = table{head: []string{"rule", "algorithm", "limit", "keys", "checked", "denied", "worst key", "retry-after ok"}, left: 3, text: map[int]bool{6: true}}
	for _, ru := range r.Rules {
		name := r.ruleName(ru.Policy, ru.Rule)
		denied := strconv.FormatInt(ru.Denied, 10)
		if ru.Shadow {
			name += " (shadow)"
			denied = fmt.Sprintf("would %d", ru.WouldDeny)
		}
		tb.add(name, ru.Algorithm, termsCell(ru), strconv.Itoa(ru.Keys), itoa(ru.Checked), denied, peakCell(ru.Worst), retryCell(ru.Retry))
	}
	tb.write(ew)
	for _, ru := range r.Rules {
		if p := ru.Worst; p != nil {
			fmt.Fprintf(ew, "  %s worst key %s: %s\n", r.ruleName(ru.Policy, ru.Rule), p.Key, peakSentence(p))
		}
	}
	r.writeFaults(ew)
	if len(r.Changes) > 0 {
		fmt.Fprintln(ew)
		fmt.Fprintln(ew, "changes")
		overrides := false
		for _, c := range r.Changes {
			fmt.Fprintf(ew, "  at %s  %-8s  %s\n", fmtDur(c.At), c.Kind, c.Change)
			overrides = overrides || c.Kind == "override"
		}
		if overrides {
			fmt.Fprintln(ew, "  (from its change on, a key overridden is left out of its rule's worst key: it has other figures)")
		}
	}

	if len(r.Expect) > 0 {
		fmt.Fprintln(ew)
		fmt.Fprintln(ew, "expect")
		width := 0
		for _, x := range r.Expect {
			width = max(width, len(x.Name))
		}
		for _, x := range r.Expect {
			verdict := "ok  "
			if !x.Pass {
				verdict = "FAIL"
			}
			fmt.Fprintf(ew, "  %s  %-*s  %s\n", verdict, width, x.Name, x.Expr)
			if x.Error != "" {
				fmt.Fprintf(ew, "        error: %s\n", x.Error)
			}
		}
		if f := len(r.Failed()); f > 0 {
			fmt.Fprintf(ew, "  %d of %d expectations failed\n", f, len(r.Expect))
		} else {
			fmt.Fprintf(ew, "  all %d expectations hold\n", len(r.Expect))
		}
	}
	fmt.Fprintln(ew)
	r.writeTimeline(ew)
	return ew.err
}

func retryCell(s RetryStats) string {
	cell := "-"
	if s.Advised > 0 {
		cell = pct(s.Honoured, s.Advised) + " of " + strconv.FormatInt(s.Advised, 10)
	}
	if s.Never > 0 {
		cell += fmt.Sprintf(" (+%d never)", s.Never)
	}
	if s.Listed > 0 {
		cell += fmt.Sprintf(" (+%d deny list)", s.Listed)
	}
	return cell
}

// termsCell is a rule's limit in words: its terms, the first two when its parameters
// gave more.
func termsCell(ru *RuleReport) string {
	switch n := len(ru.Terms); {
	case n == 0:
		return "-"
	case n <= 2:
		return strings.Join(ru.Terms, "; ")
	default:
		return fmt.Sprintf("%s; … (%d limits)", strings.Join(ru.Terms[:2], "; "), n)
	}
}

// peakCell is a rule's worst key: allowed/limit, then "~ by design (≤ N)" when the
// excess is within what the algorithm allows by design, and "! over the bound of N" (or
// "! no bound stated") only for a real breach.
func peakCell(p *Peak) string {
	if p == nil {
		return "-"
	}
	cell := fmt.Sprintf("%d/%d", p.Allowed, p.Limit)
	switch p.Kind {
	case PeakInFlight:
		cell += " in flight"
	case PeakPeriod:
		cell += " per period"
	default:
		cell += " per " + fmtDur(p.Window)
	}
	switch {
	case p.Allowed <= p.Limit:
	case p.Bound > 0 && p.Allowed <= p.Bound:
		cell += fmt.Sprintf(" ~ by design (≤ %d)", p.Bound)
	case p.Bound > 0:
		cell += fmt.Sprintf(" ! over the bound of %d", p.Bound)
	default:
		cell += " ! no bound stated"
	}
	return cell
}

func peakSentence(p *Peak) string {
	var s string
	switch p.Kind {
	case PeakInFlight:
		s = fmt.Sprintf("%d in flight at %s against a limit of %d", p.Allowed, fmtDur(p.At.Round(time.Millisecond)), p.Limit)
	case PeakPeriod:
		s = fmt.Sprintf("%d allowed in %s against a limit of %d", p.Allowed, p.Period, p.Limit)
	default:
		s = fmt.Sprintf("%d allowed in the %s ending at %s against a limit of %d", p.Allowed, fmtDur(p.Window), fmtDur(p.At.Round(time.Millisecond)), p.Limit)
	}
	switch {
	case p.Allowed <= p.Limit:
	case p.Bound > 0 && p.Allowed <= p.Bound:
		s += fmt.Sprintf(": within what the algorithm allows by design, up to %d", p.Bound)
	case p.Bound > 0:
		s += fmt.Sprintf(" — ABOVE the algorithm's bound of %d", p.Bound)
	default:
		s += " (the plugin states no bound)"
	}
	return s
}

// timelineWidth is the widest bar of the text timeline.
const timelineWidth = 50

func (r *Report) writeTimeline(w io.Writer) {
	tl := r.Timeline
	if len(tl.Traffic) == 0 || len(tl.Traffic[0].Allowed) == 0 {
		return
	}
	n := len(tl.Traffic[0].Allowed)
	per := 10
	rows := (n + per - 1) / per
	allowed := make([]int64, rows)
	denied := make([]int64, rows)
	for _, s := range tl.Traffic {
		for i := range n {
			allowed[i/per] += s.Allowed[i]
			denied[i/per] += s.Denied[i]
		}
	}
	var top int64
	for i := range rows {
		top = max(top, allowed[i]+denied[i])
	}
	scale := max((top+timelineWidth-1)/timelineWidth, 1)
	bucket := tl.Bucket * time.Duration(per)
	faults := ""
	if len(r.Faults) > 0 {
		faults = "; [fault] while one is in force"
	}
	fmt.Fprintf(w, "timeline: one row per %s; # allowed, - denied, one mark per %d %s; then allowed/sent per traffic%s\n", fmtDur(bucket), scale, plural(scale, "request", "requests"), faults)
	labels := make([]string, rows)
	lw := 0
	for i := range rows {
		labels[i] = fmtDur(bucket * time.Duration(i))
		lw = max(lw, len(labels[i]))
	}
	for i := range rows {
		a, d := marks(allowed[i], scale), marks(denied[i], scale)
		bar := strings.Repeat("#", a) + strings.Repeat("-", d)
		fmt.Fprintf(w, "  %*s |%-*s|", lw, labels[i], timelineWidth, bar)
		for _, s := range tl.Traffic {
			var sa, sd int64
			for j := i * per; j < min((i+1)*per, n); j++ {
				sa += s.Allowed[j]
				sd += s.Denied[j]
			}
			fmt.Fprintf(w, "  %s %d/%d", s.Name, sa, sa+sd)
		}
		from := bucket * time.Duration(i)
		for _, f := range r.Faults {
			if f.At < from+bucket && (f.At+f.For > from || f.At >= from) {
				fmt.Fprintf(w, "  [%s]", f.Kind)
			}
		}
		for _, c := range r.Changes {
			if c.At >= from && c.At < from+bucket {
				fmt.Fprintf(w, "  [%s]", c.Kind)
			}
			if end := c.At + c.For; c.For > 0 && end >= from && end < from+bucket {
				fmt.Fprintf(w, "  [%s ends]", c.Kind)
			}
		}
		fmt.Fprintln(w)
	}
}

// marks is how many marks n requests take at scale requests per mark: at least one for
// any request, so a trickle stays visible.
func marks(n, scale int64) int {
	if n == 0 {
		return 0
	}
	return int(max((n+scale/2)/scale, 1))
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// errWriter remembers the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	_, e.err = e.w.Write(p)
	return len(p), nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// table is a text table: the first `left` columns and those in text are aligned left, the
// rest right, two spaces apart.
type table struct {
	head []string
	rows [][]string
	left int
	text map[int]bool
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	width := make([]int, len(t.head))
	for _, row := range append([][]string{t.head}, t.rows...) {
		for i, c := range row {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	for _, row := range append([][]string{t.head}, t.rows...) {
		var b strings.Builder
		for i, c := range row {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < t.left || t.text[i] {
				b.WriteString(c)
				if i < len(row)-1 {
					b.WriteString(pad)
				}
			} else {
				b.WriteString(pad)
				b.WriteString(c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}
