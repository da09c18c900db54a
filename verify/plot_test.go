package verify

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// simulateScenario runs one scenario of an example policy.
func simulateScenario(t *testing.T, path, name string) *Report {
	t.Helper()
	cfg := load(t, path)
	for _, s := range cfg.Scenarios {
		if s.Name == name {
			r, err := Simulate(cfg, s)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("%s has no scenario %q", path, name)
	return nil
}

func series(t *testing.T, r *Report, name string) *Series {
	t.Helper()
	for _, s := range r.Timeline.Traffic {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no traffic %q", name)
	return nil
}

// The plot's limit is where the rule counts it: a key's cost within the window, not the
// limit spread over a bar. The scraper of outage.hcl sends 15 requests per bar while its
// limit is 100 a minute (2.5 per bar): its key chart reaches the limit and never passes it.
func TestPlotChartsTheLimitAsTheRuleCounts(t *testing.T) {
	t.Parallel()
	r := simulateScenario(t, "../policies/outage.hcl", "search_stall")
	scraper := series(t, r, "scraper")
	if slices.Max(scraper.Allowed) <= 3 {
		t.Fatalf("the scraper's bars reach %d: the case this test is about is gone", slices.Max(scraper.Allowed))
	}
	k := scraper.Key
	if k == nil || k.Policy != "search" || k.Rule != "per_ip" || k.Per != "1m" {
		t.Fatalf("scraper's key chart: %+v, want search.per_ip within 1m", k)
	}
	if got := slices.Max(k.Counted); got != 100 {
		t.Errorf("the scraper's key reached %d within a minute, want its limit 100", got)
	}
	sampled := 0
	for b := range k.Counted {
		if k.Limit[b] == 0 {
			continue
		}
		sampled++
		if k.Limit[b] != 100 || k.Counted[b] > k.Limit[b] || k.Bound[b] != 100 {
			t.Errorf("bucket %d: counted %d, limit %d, bound %d; want at most the exact limit 100", b, k.Counted[b], k.Limit[b], k.Bound[b])
		}
	}
	// The stall's buckets are decided in process: no sample of Redis's count there.
	if sampled == 0 || sampled == len(k.Counted) {
		t.Errorf("%d of %d buckets sampled; want all but the stall's", sampled, len(k.Counted))
	}
	if users := series(t, r, "users"); users.Key != nil {
		t.Errorf("users were never denied, yet charted with %s.%s", users.Key.Policy, users.Key.Rule)
	}
	var svg bytes.Buffer
	if err := r.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"search.per_ip, as it counts", `stroke-dasharray="6 4"`, ">100</text>"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("the plot lacks %q", want)
		}
	}
}

// An override's new limit is charted from the change on, and the chart of a rate shows
// the bound its algorithm allows by design above the limit.
func TestPlotChartsOverrides(t *testing.T) {
	t.Parallel()
	r := simulateScenario(t, "../policies/overrides.hcl", "upgrade")
	k := series(t, r, "acme").Key
	if k == nil || k.Rule != "per_tenant" {
		t.Fatalf("acme's key chart: %+v", k)
	}
	var limits []int64
	for b := range k.Limit {
		if k.Limit[b] > 0 && (len(limits) == 0 || limits[len(limits)-1] != k.Limit[b]) {
			limits = append(limits, k.Limit[b])
		}
		// Within a window (two bars) of an override's end, the count still holds what the
		// override let through.
		changed := b >= 2 && (k.Limit[b-1] != k.Limit[b] || k.Limit[b-2] != k.Limit[b])
		if k.Counted[b] > k.Bound[b] && !changed {
			t.Errorf("bucket %d: counted %d above the bound %d", b, k.Counted[b], k.Bound[b])
		}
		if k.Limit[b] > 0 && k.Bound[b] <= k.Limit[b] {
			t.Errorf("bucket %d: gcra's bound %d is not above its limit %d", b, k.Bound[b], k.Limit[b])
		}
	}
	if fmt.Sprint(limits) != "[20 200 20]" {
		t.Errorf("acme's limit over time: %v, want 20, then the override's 200, then 20 again", limits)
	}
	var svg bytes.Buffer
	if err := r.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(svg.String(), "by design (dotted)") {
		t.Error("the plot does not say what the dotted line is")
	}
}

// A calendar rule counts in its period, exactly: its bound is its limit.
func TestPlotChartsCalendarPeriods(t *testing.T) {
	t.Parallel()
	r := simulateScenario(t, "../policies/calendar.hcl", "month_end")
	k := series(t, r, "acme").Key
	if k == nil || k.Per != "day" {
		t.Fatalf("acme's key chart: %+v, want a daily period", k)
	}
	for b := range k.Limit {
		if k.Bound[b] != k.Limit[b] || k.Counted[b] > k.Limit[b] {
			t.Errorf("bucket %d: counted %d, limit %d, bound %d", b, k.Counted[b], k.Limit[b], k.Bound[b])
		}
	}
}
