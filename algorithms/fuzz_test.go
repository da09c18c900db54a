package algorithms

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// byteSource is a rand.Source that reads its numbers from fuzz input and, once the input
// is spent, continues with a fixed PCG stream (a constant stream would make rand's
// rejection sampling loop forever).
type byteSource struct {
	b    []byte
	rest rand.PCG
}

func (s *byteSource) Uint64() uint64 {
	if len(s.b) == 0 {
		return s.rest.Uint64()
	}
	var buf [8]byte
	n := copy(buf[:], s.b)
	s.b = s.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

// FuzzTrace draws a trace of stacked calls from the fuzz input and requires luahost (the
// engine script on a virtual clock, with expiry) to answer every call exactly as the
// reference model does, and to leave no key once every reset-after has passed.
func FuzzTrace(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte("sliding window with a heavy previous window"))
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	ex := hostExec{script: Default()}
	f.Fuzz(func(t *testing.T, data []byte) {
		rng := rand.New(&byteSource{b: data})
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
