package engine

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// faultRow is what one fault under one on_error mode measured.
type faultRow struct {
	Fault, Mode string
	// Decisions counts the calls that returned, FromRedis those Redis decided, Degraded those
	// decided by on_error; CallerErrors are errors other than the caller's own context's,
	// Cancelled the calls that returned their caller's context error.
	Decisions, FromRedis, Degraded, CallerErrors, Cancelled int
	P99, Max                                                time.Duration
	// Recovery is from the fault's end to the first decision by Redis after it; 0 when none
	// came.
	Recovery time.Duration
	// Leaked is the goroutines left above the count before the engine's calls.
	Leaked int
	// Lost counts the degraded decisions whose call was sent and got no answer (a network
	// error or the deadline): such a call may have run. Phantom counts charges on Redis
	// beyond what callers saw Redis allow and beyond Lost; LeasesHeld the leases Redis
	// holds after every caller released its own.
	Lost, Phantom, LeasesHeld int64
	// LateCharged counts, for a fault that stalls the server, the charges on Redis beyond
	// what callers saw Redis allow, beyond the calls whose connection failed and beyond the
	// calls in flight when the stall began: charges by calls sent into the stall, unanswered
	// at their deadline, that the server ran when it resumed.
	LateCharged int64
	stalls      bool // the fault stalls the server: LateCharged is measured
	// DegradedBy counts the backend failures behind degraded decisions, by kind.
	DegradedBy map[string]int
	// Lease is what a leased row measured on its quota key; nil for the other rows.
	Lease *leaseRow
}

// reliabilityEnv names the file that TestFaults and TestClusterNodeDown append their
// tables to.
const reliabilityEnv = "RLCTL_RELIABILITY"

// reportFaults logs the table of rows and, when RLCTL_RELIABILITY names a file, appends it
// there under title.
func reportFaults(t *testing.T, title string, rows []faultRow) {
	table := faultTable(rows)
	t.Logf("%s\n%s\n%s", title, table, leaseTable(rows))
	path := os.Getenv(reliabilityEnv)
	if path == "" {
		return
	}
	race := ""
	if raceEnabled {
		race = ", -race"
	}
	head := fmt.Sprintf("### %s\n\n%d callers, deadline %v, breaker %d failures / %v cooldown; GOMAXPROCS %d%s.\n\n",
		title, faultCallers, faultTimeout, faultFailures, faultCooldown, runtime.GOMAXPROCS(0), race)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("%s: %v", reliabilityEnv, err)
		return
	}
	defer f.Close()
	out := head + table + "\n" + failureTable(rows) + "\n"
	if lt := leaseTable(rows); lt != "" {
		out += lt + "\n"
	}
	if _, err := f.WriteString(out); err != nil {
		t.Errorf("%s: %v", reliabilityEnv, err)
	}
}

// faultTable renders rows as a markdown table.
func faultTable(rows []faultRow) string {
	var b strings.Builder
	b.WriteString("| fault | on_error | decisions | by Redis | degraded | caller errors | cancelled | p99 | max | recovery | goroutines left | unanswered calls | phantom charges | late calls charged | leases held |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		recovery := "none"
		if r.Recovery > 0 {
			recovery = ms(r.Recovery)
		}
		late := "—"
		if r.stalls {
			late = fmt.Sprint(r.LateCharged)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %s | %s | %s | %d | %d | %d | %s | %d |\n",
			r.Fault, r.Mode, r.Decisions, r.FromRedis, r.Degraded, r.CallerErrors, r.Cancelled,
			ms(r.P99), ms(r.Max), recovery, r.Leaked, r.Lost, r.Phantom, late, r.LeasesHeld)
	}
	return b.String()
}

// ms formats d in milliseconds with one decimal.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// leaseTable renders the quota-key figures of the leased rows ("" when there are none).
func leaseTable(rows []faultRow) string {
	var b strings.Builder
	for _, r := range rows {
		lr := r.Lease
		if lr == nil {
			continue
		}
		if b.Len() == 0 {
			fmt.Fprintf(&b, "| leased row | on_error | decisions from a lease | takes | takes failed | takes unanswered | units admitted | units held | Redis's count | forgotten by the restart | admitted + held beyond the count | units lost (count − admitted − held) | what unanswered calls may have taken (takes and failed refunds × %d, calls × 1) |\n", quotaLease)
			b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		}
		forgotten := "—"
		if lr.Forgotten >= 0 {
			forgotten = fmt.Sprint(lr.Forgotten)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %s | %d | %d | %d |\n",
			r.Fault, r.Mode, lr.FromLease, lr.Takes, lr.TakesFailed, lr.TakesUnanswered, lr.Admitted, lr.Held, lr.Count,
			forgotten, lr.Over, lr.Lost, lr.Bound)
	}
	if b.Len() == 0 {
		return ""
	}
	b.WriteString("\n")
	b.WriteString(countsTable("| leased fault | failures of takes (all modes) |", rows, func(r faultRow) (map[string]int, bool) {
		if r.Lease == nil {
			return nil, false
		}
		return r.Lease.TakeErrs, true
	}))
	return b.String()
}

// failureTable lists, per fault, the backend failures behind its degraded decisions in
// every mode.
func failureTable(rows []faultRow) string {
	return countsTable("| fault | backend failures behind degraded decisions (all modes) |", rows, func(r faultRow) (map[string]int, bool) {
		return r.DegradedBy, true
	})
}

// countsTable is a table of head's two columns: per fault, in the rows' order, the
// failures by kind that counts gives of each of its rows, summed over its modes; rows
// counts skips (ok false) are left out.
func countsTable(head string, rows []faultRow, counts func(faultRow) (map[string]int, bool)) string {
	var b strings.Builder
	b.WriteString(head + "\n|---|---|\n")
	var order []string
	byFault := map[string]map[string]int{}
	for _, r := range rows {
		n, ok := counts(r)
		if !ok {
			continue
		}
		if byFault[r.Fault] == nil {
			byFault[r.Fault] = map[string]int{}
			order = append(order, r.Fault)
		}
		for k, c := range n {
			byFault[r.Fault][k] += c
		}
	}
	for _, f := range order {
		list := failureList(byFault[f])
		if list == "" {
			list = "none"
		}
		fmt.Fprintf(&b, "| %s | %s |\n", f, strings.ReplaceAll(list, "|", "\\|"))
	}
	return b.String()
}

// errCounts counts the backend failures behind degraded decisions, by kind.
type errCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *errCounts) add(err error) {
	kind := failureKind(err)
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[kind]++
	c.mu.Unlock()
}

func (c *errCounts) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// failureKind is an error's message without what varies between occurrences: the
// addresses of a network error, the script location of a Redis error reply.
func failureKind(err error) string {
	if err == nil {
		return "<nil>"
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if f := strings.Fields(msg); len(f) > 2 && f[1] == "tcp" { // "read tcp a->b: i/o timeout"
		msg = f[0] + " tcp: " + msg[strings.LastIndex(msg, ": ")+2:]
	}
	msg, _, _ = strings.Cut(msg, " script:")
	if len(msg) > 70 {
		msg = msg[:70] + "…"
	}
	return msg
}

// failureList renders counts, most frequent first.
func failureList(counts map[string]int) string {
	kinds := slices.Collect(maps.Keys(counts))
	slices.SortFunc(kinds, func(a, b string) int {
		if c := counts[b] - counts[a]; c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for i, k := range kinds {
		kinds[i] = fmt.Sprintf("%s ×%d", k, counts[k])
	}
	return strings.Join(kinds, ", ")
}

func TestFailureKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "<nil>"},
		{fmt.Errorf("read tcp 127.0.0.1:59612->127.0.0.1:37533: i/o timeout"), "read tcp: i/o timeout"},
		{fmt.Errorf("dial tcp 127.0.0.1:33899: connect: connection refused"), "dial tcp: connection refused"},
		{fmt.Errorf("OOM command not allowed when used memory > 'maxmemory'. script: 9f0c, on @user_script:12."),
			"OOM command not allowed when used memory > 'maxmemory'."},
		{fmt.Errorf("EOF"), "EOF"},
	} {
		if got := failureKind(tc.err); got != tc.want {
			t.Errorf("failureKind(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
