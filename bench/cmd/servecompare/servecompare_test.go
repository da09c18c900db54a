package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/dsl"
)

// TestRaise: both configs get every limit raised, and the raised policy still loads
// (a limit too large for fixed_window's exact arithmetic would not).
func TestRaise(t *testing.T) {
	dir := t.TempDir()
	testdata := filepath.Join("..", "..", "..", "serve", "testdata", "envoy")
	hcl, yaml := filepath.Join(dir, "p", "edge.hcl"), filepath.Join(dir, "r", "edge.yaml")
	if err := raise(filepath.Join(testdata, "edge.hcl"), hcl, `(?m)^(\s*limit\s*=\s*)\d+$`, 1000000); err != nil {
		t.Fatal(err)
	}
	if err := raise(filepath.Join(testdata, "ratelimit.yaml"), yaml, `(?m)^(\s*requests_per_unit:\s*)\d+$`, 1000000); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{hcl: "limit     = 1000000\n", yaml: "requests_per_unit: 1000000\n"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), want); n != 3 {
			t.Errorf("%s: %d × %q, want 3:\n%s", path, n, want, b)
		}
	}
	if _, diags := dsl.Load(filepath.Dir(hcl)); diags.HasErrors() {
		t.Fatalf("the raised policy does not load: %v", diags)
	}
	if err := raise(filepath.Join(testdata, "edge.hcl"), hcl, `(?m)^(\s*nothing\s*=\s*)\d+$`, 1); err == nil {
		t.Error("no limits matched, and raise did not say so")
	}
}

func TestPercentile(t *testing.T) {
	lat := make([]time.Duration, 200)
	for i := range lat {
		lat[i] = time.Duration(i + 1)
	}
	for p, want := range map[int]time.Duration{50: 100, 99: 198, 100: 200, 1: 2} {
		if got := percentile(lat, p); got != want {
			t.Errorf("p%d = %d, want %d", p, got, want)
		}
	}
}
