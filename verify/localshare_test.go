package verify

import (
	"os"
	"strings"
	"testing"
)

// TestSimulateLocalShareFleet: policies/fleet.hcl's outage, three instances sharing one
// Redis that refuses connections for one window. With local_share = 3 each instance's
// fallback admits a third of the limit, and the scraper gets exactly the limit (90)
// during the outage, so every expectation holds; without it each instance admits the
// whole limit, 270 in all, and the scenario's expectations catch it.
func TestSimulateLocalShareFleet(t *testing.T) {
	src, err := os.ReadFile("../policies/fleet.hcl")
	if err != nil {
		t.Fatal(err)
	}
	whole := strings.Replace(string(src), "local_share = 3", "", 1)
	if whole == string(src) {
		t.Fatal("policies/fleet.hcl sets no local_share = 3")
	}
	for _, c := range []struct {
		name    string
		src     string
		allowed int64
		pass    bool
	}{
		{"shared", string(src), 90, true},
		{"whole", whole, 270, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := parse(t, map[string]string{"fleet.hcl": c.src})
			r, err := Simulate(cfg, cfg.Scenarios[0])
			if err != nil {
				t.Fatal(err)
			}
			if r.Engine == nil || r.Engine.Instances != 3 || len(r.Faults) != 1 {
				t.Fatalf("engine %+v, %d faults; want 3 instances and one fault", r.Engine, len(r.Faults))
			}
			var scraper *FaultTraffic
			for _, ft := range r.Faults[0].Traffic {
				if ft.Name == "scraper" {
					scraper = ft
				}
			}
			if scraper == nil || scraper.Requests != 600 || scraper.Allowed != c.allowed || scraper.Decided.Local != 600 {
				t.Errorf("the scraper during the outage: %+v, want 600 requests decided locally, %d allowed", scraper, c.allowed)
			}
			for _, x := range r.Expect {
				if want := c.pass || !strings.HasPrefix(x.Name, "fleet_keeps") && !strings.HasPrefix(x.Name, "at_most_twice"); x.Pass != want || x.Error != "" {
					t.Errorf("expectation %s: pass %v (%s), want %v", x.Name, x.Pass, x.Error, want)
				}
			}
		})
	}
}

// The README's local_share example is policies/fleet.hcl's, and its report excerpt is
// what simulating that policy prints.
func TestReadmeLocalShareExample(t *testing.T) {
	checkReadmeExample(t, "policies/fleet.hcl", "lookup_outage", "local_share = 3")
}
