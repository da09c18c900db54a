package main

import (
	"strings"
	"testing"
)

func TestSizeFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{"0", 0, ""},
		{"2048", 2048, ""},
		{"64MiB", 64 << 20, ""},
		{"1.5GiB", 3 << 29, ""},
		{"100KB", 100_000, ""},
		{"64mb", 0, "unknown unit"},
		{"-1", 0, "does not start with a number"},
		{"0.5B", 0, "whole number"},
		{"", 0, "does not start with a number"},
	} {
		var f sizeFlag
		err := f.Set(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one saying %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || int64(f) != tc.want):
			t.Errorf("%q: %d, %v; want %d", tc.in, f, err, tc.want)
		}
	}
}
