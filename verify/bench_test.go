package verify

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkSimulate measures simulated decisions per second of wall time on each example
// policy's scenario: every request is one engine-script call on luahost with all the
// policy's applicable rules, and every denial gets a peek at its advised retry-after
// (calls/s counts both).
func BenchmarkSimulate(b *testing.B) {
	paths, _ := filepath.Glob("../policies/*.hcl")
	for _, path := range paths {
		cfg := load(b, path)
		s := cfg.Scenarios[0]
		b.Run(strings.TrimSuffix(filepath.Base(path), ".hcl"), func(b *testing.B) {
			b.ReportAllocs()
			var decisions, calls int64
			start := time.Now()
			for b.Loop() {
				r, err := Simulate(cfg, s)
				if err != nil {
					b.Fatal(err)
				}
				decisions += r.Requests
				calls += r.Requests
				for _, t := range r.Traffic {
					calls += t.Retry.Advised
				}
			}
			sec := time.Since(start).Seconds()
			b.ReportMetric(float64(decisions)/sec, "decisions/s")
			b.ReportMetric(float64(calls)/sec, "calls/s")
		})
	}
}

// BenchmarkCheck measures verify's generated requests per second on one rule.
func BenchmarkCheck(b *testing.B) {
	cfg := load(b, "testdata/fixed_window.hcl")
	b.ReportAllocs()
	var calls int
	start := time.Now()
	for b.Loop() {
		f, err := Check(cfg, WithBudget(2000))
		if err != nil {
			b.Fatal(err)
		}
		calls += f.Calls
	}
	b.ReportMetric(float64(calls)/time.Since(start).Seconds(), "calls/s")
}

// BenchmarkCheckWorkers measures Check on the built-in algorithms with 1 worker and with
// GOMAXPROCS workers, side by side.
func BenchmarkCheckWorkers(b *testing.B) {
	cfg := load(b, "testdata/builtins.hcl")
	for _, n := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var calls int
			start := time.Now()
			for b.Loop() {
				f, err := Check(cfg, WithBudget(1000), WithWorkers(n))
				if err != nil {
					b.Fatal(err)
				}
				calls += f.Calls
			}
			b.ReportMetric(float64(calls)/time.Since(start).Seconds(), "calls/s")
		})
	}
}
