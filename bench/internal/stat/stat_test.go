package stat

import (
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{3, 1, 2}, 2},
		{[]float64{3, 1, 2, 10}, 2.5},
	} {
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
	xs := []float64{3, 1, 2}
	Median(xs)
	if xs[0] != 3 || xs[1] != 1 || xs[2] != 2 {
		t.Errorf("Median sorted its argument: %v", xs)
	}
}

func TestMap(t *testing.T) {
	got := Map([]int{1, 2, 3}, func(i int) float64 { return float64(i) / 2 })
	if len(got) != 3 || got[0] != 0.5 || got[1] != 1 || got[2] != 1.5 {
		t.Errorf("Map = %v", got)
	}
}

func TestThousands(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 12345: "12,345",
		1234567.4: "1,234,567", 999999.6: "1,000,000", -1234: "-1,234", -123: "-123"} {
		if got := Thousands(v); got != want {
			t.Errorf("Thousands(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestLoadavg(t *testing.T) {
	got := Loadavg()
	if got != "unknown" && len(strings.Fields(got)) != 3 {
		t.Errorf("Loadavg = %q", got)
	}
}
