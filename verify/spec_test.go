package verify

import (
	"math/rand/v2"
	"testing"

	"github.com/rlctl/rlctl/algorithms"
)

// rateBoundAt is the rate statement's figure for dt: floor(bound × (limit + (dt + skew) ×
// rate / period)), exactly.
func rateBoundAt(s spec, dt int64) int64 {
	return s.bound.Num * (s.limit*s.period + (dt+s.skew)*s.rate) / (s.period * s.bound.Den)
}

// worstRate is the quadratic definition of the rate bound, to check spec.worst's linear
// scan against.
func worstRate(s spec, gs []grant) (allowed, bound int64, found bool) {
	var bestNum, bestDen int64 = 0, 1
	for i := range gs {
		var sum int64
		for j := i; j < len(gs); j++ {
			sum += gs[j].cost
			b := rateBoundAt(s, gs[j].at-gs[i].at)
			if sum > b && (!found || sum*bestDen > bestNum*b) {
				allowed, bound, found = sum, b, true
				bestNum, bestDen = sum, b
			}
		}
	}
	return
}

func TestRateBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 2000 {
		s := spec{shape: algorithms.ShapeRate, limit: 1 + rng.Int64N(5), rate: 1 + rng.Int64N(3), period: 1 + rng.Int64N(100), bound: algorithms.Exact}
		if n%3 == 1 {
			s.bound = algorithms.Ratio{Num: 1 + rng.Int64N(5), Den: 1 + rng.Int64N(3)}
			s.bound.Num += s.bound.Den // above 1
		}
		if n%4 == 2 {
			s.skew = rng.Int64N(50)
		}
		var gs []grant
		var at int64
		for range rng.IntN(12) {
			at += rng.Int64N(60)
			gs = append(gs, grant{at: at, cost: 1 + rng.Int64N(3), endStep: -1})
		}
		e := s.worst(gs, s.bound)
		_, _, found := worstRate(s, gs)
		if found != (e != nil) {
			t.Fatalf("case %d: %+v %+v: linear found %v, quadratic %v", n, s, gs, e, found)
		}
		if e != nil {
			var sum int64
			for k := e.from; k <= e.to; k++ {
				sum += gs[k].cost
			}
			if sum != e.allowed || e.allowed <= e.bound || e.bound != rateBoundAt(s, gs[e.to].at-gs[e.from].at) {
				t.Fatalf("case %d: excess %+v inconsistent with %+v", n, e, gs)
			}
		}
	}
}

// A run of the redis.call race that stopped at a round whose call raised an error (as a
// shrink may try) counts the rounds it ran, and never indexes past them.
func TestRaceExcessOfAStoppedRun(t *testing.T) {
	sub := &subject{spec: spec{limit: 1}}
	rounds := []raceRound{{clients: []raceClient{{cost: 1}, {cost: 1}}}, {clients: []raceClient{{cost: 1}, {cost: 1}}}}
	run := &raceRun{allowed: [][]bool{{true}}, failed: 1}
	if over, total := raceExcess(sub, rounds, run); over != 0 || total != 1 {
		t.Fatalf("excess %d of %d, want 0 of 1", over, total)
	}
}
