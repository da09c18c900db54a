package verify

import (
	"bytes"
	"os"
	"slices"
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
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	policy, err := os.ReadFile("../policies/fleet.hcl")
	if err != nil {
		t.Fatal(err)
	}
	const command = "$ rlctl simulate -scenario lookup_outage policies/fleet.hcl\n"
	var example, excerpt string
	for _, b := range strings.Split(string(readme), "```")[1:] {
		switch {
		case strings.HasPrefix(b, "hcl\n") && strings.Contains(b, "local_share = 3"):
			example = b
		case strings.HasPrefix(b, "\n"+command):
			excerpt = b
		}
	}
	if example == "" || excerpt == "" {
		t.Fatalf("README lacks the local_share example or its report excerpt")
	}
	for _, line := range strings.Split(strings.TrimPrefix(example, "hcl\n"), "\n") {
		if strings.TrimSpace(line) != "..." && !bytes.Contains(policy, []byte(line+"\n")) {
			t.Errorf("README line %q is not in policies/fleet.hcl", line)
		}
	}
	cfg := load(t, "../policies/fleet.hcl")
	r, err := Simulate(cfg, cfg.Scenarios[0])
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(text.String(), "\n")
	for _, line := range strings.Split(strings.TrimPrefix(excerpt, "\n"+command), "\n") {
		if line != "..." && line != "" && !slices.Contains(lines, line) {
			t.Errorf("README line %q is not in the report:\n%s", line, text.String())
		}
	}
}
