// Package traces holds what the random-trace tests of the engine script share: how many
// traces a run draws, and how a trace's clock moves.
package traces

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"strconv"
)

// Count is the number of random traces per case: RLCTL_TRACES when set (make test's
// differential stage runs 1000 without the race detector), else 1000, or 200 when light
// (under -short or the race detector).
func Count(light bool) int {
	if n, err := strconv.Atoi(os.Getenv("RLCTL_TRACES")); err == nil && n > 0 {
		return n
	}
	if light {
		return 200
	}
	return 1000
}

// StepTime advances a trace's clock from now (µs), scale being the trace's time scale:
// not at all, a little, about a window, or past every TTL.
func StepTime(rng *rand.Rand, now, scale int64) int64 {
	switch x := rng.IntN(20); {
	case x < 3:
		return now
	case x < 12:
		return now + rng.Int64N(scale/4+2)
	case x < 18:
		return now + rng.Int64N(2*scale+2)
	default:
		return now + scale*int64(2+rng.IntN(5)) + rng.Int64N(10_000_000_000)
	}
}

// ByteSource is a rand.Source that reads its numbers from fuzz input and, once the input
// is spent, continues with a fixed PCG stream (a constant stream would make rand's
// rejection sampling loop forever).
type ByteSource struct {
	b    []byte
	rest rand.PCG
}

// NewByteSource returns a source that reads b first.
func NewByteSource(b []byte) *ByteSource { return &ByteSource{b: b} }

// Uint64 implements rand.Source.
func (s *ByteSource) Uint64() uint64 {
	if len(s.b) == 0 {
		return s.rest.Uint64()
	}
	var buf [8]byte
	n := copy(buf[:], s.b)
	s.b = s.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}
