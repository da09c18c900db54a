package verify

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Probes run beside the simulation give the report that probes run in line give, byte
// for byte, for every scenario of the example policies (faults, deny caches and
// maxmemory included, whose probes stay in line).
func TestProbesBesideSameReport(t *testing.T) {
	t.Parallel()
	paths, _ := filepath.Glob("../policies/*.hcl")
	probed := false
	for _, path := range paths {
		cfg := load(t, path)
		for _, s := range cfg.Scenarios {
			if skipLongUnderRace(t, path, s.Name) {
				continue // see longUnderRace
			}
			var want []byte
			for _, workers := range []int{1, 3} {
				r, err := Simulate(cfg, s, WithWorkers(workers))
				if err != nil {
					t.Fatalf("%s %s: %v", path, s.Name, err)
				}
				got := report(t, r)
				if workers == 1 {
					want = got
					for _, tr := range r.Traffic {
						probed = probed || tr.Retry.Honoured > 0
					}
					continue
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s scenario %q: the report with %d workers differs from the one with probes in line", path, s.Name, workers)
				}
			}
		}
	}
	if !probed {
		t.Fatal("no scenario's probes passed: the comparison shows nothing")
	}
}

// A probe that fails fails the run with the error the same probe gives in line: the first
// failing probe's, in the simulation's order, even though the simulation went on past it.
func TestProbesBesideSameError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/careless_window.lua")
	if err != nil {
		t.Fatal(err)
	}
	// Every peek raises an error naming the key and the instant it was asked at.
	lua := strings.Replace(string(src), "  if cost == 0 then\n", "  if cost == 0 then\n    error('peek of ' .. key .. ' at ' .. now)\n", 1)
	if lua == string(src) {
		t.Fatal("the plugin's peek is not where the test expects it")
	}
	if err := os.WriteFile(filepath.Join(dir, "careless_window.lua"), []byte(lua), 0o644); err != nil {
		t.Fatal(err)
	}
	// careless_window.hcl's algorithm and policy, with a scenario whose denials are probed.
	policy, err := os.ReadFile("testdata/careless_window.hcl")
	if err != nil {
		t.Fatal(err)
	}
	hcl := string(policy) + `
scenario "s" {
  policy   = "careless"
  duration = "1m"
  traffic "t" {
    clients = 5
    request = { user = "u${client}" }
    rate    = "3/s"
    pattern = "poisson"
  }
}
`
	if err := os.WriteFile(filepath.Join(dir, "p.hcl"), []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := load(t, filepath.Join(dir, "p.hcl"))
	var want string
	for _, workers := range []int{1, 2, 3} {
		_, err := Simulate(cfg, cfg.Scenarios[0], WithWorkers(workers))
		if err == nil {
			t.Fatalf("%d workers: the failing peeks did not fail the run", workers)
		}
		if workers == 1 {
			want = err.Error()
			if !strings.Contains(want, "peek of ") {
				t.Fatalf("the run failed otherwise: %v", err)
			}
			continue
		}
		if err.Error() != want {
			t.Errorf("%d workers: %v\nin line: %s", workers, err, want)
		}
	}
}
