package algorithms

import (
	"math/rand/v2"
	"testing"

	"github.com/rlctl/rlctl/internal/traces"
)

// FuzzTrace draws a trace of stacked calls from the fuzz input and requires luahost (the
// engine script on a virtual clock, with expiry) to answer every call exactly as the
// reference model does, and to leave no key once every reset-after has passed.
func FuzzTrace(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte("sliding window with a heavy previous window"))
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	ex := hostExec{script: Default()}
	f.Fuzz(func(t *testing.T, data []byte) {
		rng := rand.New(traces.NewByteSource(data))
		calls, want, err := genTrace(rng, mixed(rng, "f:"), 1+rng.IntN(24))
		if err != nil {
			t.Fatal(err)
		}
		rn := &runner{ex: ex, base: "fuzz"}
		m, w, g, err := rn.compare(calls, want)
		if err != nil {
			t.Fatalf("%v\n%s", err, formatTrace(calls))
		}
		if m >= 0 {
			t.Fatalf("call %d differs from the reference model:\n%s  want %+v\n  got  %+v", m+1, formatTrace(calls[:m+1]), w, g)
		}
	})
}
