package engine

import (
	"fmt"
	"os"
	"runtime"
	"strings"
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
	// Phantom counts charges on Redis beyond what callers saw Redis allow; LeasesHeld the
	// leases Redis holds after every caller released its own.
	Phantom, LeasesHeld int64
	// DegradedBy is the backend failures behind degraded decisions, most frequent first.
	DegradedBy string
}

// reliabilityEnv names the file that TestFaults and TestClusterNodeDown append their
// tables to.
const reliabilityEnv = "RLCTL_RELIABILITY"

// reportFaults logs the table of rows and, when RLCTL_RELIABILITY names a file, appends it
// there under title.
func reportFaults(t *testing.T, title string, rows []faultRow) {
	table := faultTable(rows)
	t.Logf("%s\n%s", title, table)
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
	if _, err := f.WriteString(head + table + "\n"); err != nil {
		t.Errorf("%s: %v", reliabilityEnv, err)
	}
}

// faultTable renders rows as a markdown table.
func faultTable(rows []faultRow) string {
	var b strings.Builder
	b.WriteString("| fault | on_error | decisions | by Redis | degraded | caller errors | cancelled | p99 | max | recovery | goroutines left | phantom charges | leases held |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		recovery := "none"
		if r.Recovery > 0 {
			recovery = ms(r.Recovery)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %s | %s | %s | %d | %d | %d |\n",
			r.Fault, r.Mode, r.Decisions, r.FromRedis, r.Degraded, r.CallerErrors, r.Cancelled,
			ms(r.P99), ms(r.Max), recovery, r.Leaked, r.Phantom, r.LeasesHeld)
	}
	return b.String()
}

// ms formats d in milliseconds with one decimal.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}
