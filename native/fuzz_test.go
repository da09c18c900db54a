package native

import (
	"math/rand/v2"
	"testing"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/internal/traces"
)

// FuzzNative draws a short trace from the fuzz input (an algorithm or a stack of mixed
// ones, their parameters, the calls' ops, costs and clocks, the steps of the server's
// clock) and requires the store beside its host to answer every call exactly as luahost
// alone does, and to hold the same keys after each, as TestNativeMatchesLua does (without
// Redis).
func FuzzNative(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte("a token bucket in debt, then a peek"))
	f.Add([]byte{5, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7})
	s := diffScript()
	f.Fuzz(func(t *testing.T, data []byte) {
		rng := rand.New(traces.NewByteSource(data))
		var a *algorithms.Algorithm
		if i := rng.IntN(len(decidable) + 1); i < len(decidable) {
			a = mustAlg(decidable[i])
		}
		ck := &checker{t: t, s: s}
		ck.run(rng, a, 1+rng.IntN(24))
	})
}
