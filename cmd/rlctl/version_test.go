package main

import (
	"runtime/debug"
	"testing"
)

// TestVersionOf: rlctl version reads the module version, the VCS revision, its time and
// whether the tree was modified from the build information.
func TestVersionOf(t *testing.T) {
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "-compiler", Value: "gc"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-03-01T12:00:00Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	for _, tc := range []struct {
		name     string
		bi       *debug.BuildInfo
		override string
		want     string
	}{
		{"go install @latest", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/rlctl/rlctl", Version: "v1.2.0"}},
			"", "v1.2.0, go1.26.0"},
		{"source build", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs("false")},
			"", "(devel), revision 0123456789abcdef0123456789abcdef01234567 of 2026-03-01T12:00:00Z, go1.26.0"},
		{"modified tree", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")},
			"", "(devel), revision 0123456789abcdef0123456789abcdef01234567 of 2026-03-01T12:00:00Z with local modifications, go1.26.0"},
		{"-buildvcs=false", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			"", "(devel), go1.26.0"},
		{"-ldflags -X main.version", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			"1.2.0-deb1", "1.2.0-deb1, go1.26.0"},
		{"no build information", nil, "", "(unknown)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionOf(tc.bi, tc.override); got != tc.want {
				t.Errorf("versionOf = %q, want %q", got, tc.want)
			}
		})
	}
}
