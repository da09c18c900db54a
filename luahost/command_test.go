package luahost

import "testing"

// lowerOption is lowerASCII, and allocates nothing for a known option in upper case.
func TestLowerOption(t *testing.T) {
	for _, s := range []string{"PX", "px", "Px", "WITHSCORES", "withScores", "LIMIT", "XYZ", "", "ÉX", "KEEPTTL"} {
		if got, want := lowerOption(s), lowerASCII(s); got != want {
			t.Errorf("lowerOption(%q) = %q, want %q", s, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = lowerOption("WITHSCORES") }); n != 0 {
		t.Errorf("lowerOption(\"WITHSCORES\") allocates %v times", n)
	}
}
