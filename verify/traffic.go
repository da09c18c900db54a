package verify

import (
	"container/heap"
	"hash/fnv"
	"math"
	"math/bits"
	"math/rand/v2"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

// This file generates a scenario's arrivals: one generator per client of each traffic
// block, merged in time order by a heap. Times are microseconds since the Unix epoch.

// gen yields one client's arrival instants in increasing order, as clumps: count requests
// at the same instant.
type gen interface {
	// next returns the next clump at or after the previous one, and false when the client
	// has nothing more to send before stop.
	next() (at int64, count int, ok bool)
}

// mulDiv returns floor(a*b/c) for a, b >= 0 and c > 0, without overflow in between; it
// saturates at MaxInt64.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// window is where a traffic block sends: [start, stop) in absolute microseconds.
type window struct{ start, stop int64 }

// newGen returns the generator of client c of traffic t against policy p, the scenario
// starting at origin. Poisson arrivals draw from a stream of their own, seeded by the
// scenario seed, the traffic's name and the client, so adding a client or a traffic block
// changes no other client's arrivals.
func newGen(t *dsl.Traffic, p *dsl.Policy, c int, origin, seed int64) gen {
	w := window{origin + t.Start.Microseconds(), origin + t.Stop.Microseconds()}
	per := t.Rate.Per.Microseconds()
	n := max(t.Rate.N, 1)
	clients := int64(max(t.Clients, 1))
	// Clients of a steady pattern are spread evenly over one interval, so 100 clients at
	// 1/s are 100 requests a second, not a burst of 100 every second.
	phase := mulDiv(int64(c), per, n*clients)
	switch t.Pattern {
	case dsl.PatternPoisson:
		h := fnv.New64a()
		h.Write([]byte(t.Name))
		rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()^uint64(c)*0x9e3779b97f4a7c15))
		return &poissonGen{w: w, mean: float64(per) / float64(n), rng: rng, t: float64(w.start)}
	case dsl.PatternBurst:
		b := int64(max(t.Burst, 1))
		return &stepGen{w: w, phase: phase * b, num: per * b, den: n, count: int(b)}
	case dsl.PatternRamp:
		return &rampGen{w: w, perN: float64(per) / float64(n), frac: (float64(c) + 0.5) / float64(clients)}
	case dsl.PatternEdge:
		per, n := edgePeriod(p, t.Rate)
		return newEdgeGen(w, per, n)
	default:
		return &stepGen{w: w, phase: phase, num: per, den: n, count: 1}
	}
}

// stepGen sends count requests at start + phase + floor(k*num/den), k = 0, 1, …: evenly
// spaced, with no drift however the interval rounds.
type stepGen struct {
	w        window
	phase    int64
	num, den int64
	count    int
	k        int64
}

func (g *stepGen) next() (int64, int, bool) {
	at := g.w.start + g.phase + mulDiv(g.k, g.num, g.den)
	if at >= g.w.stop || at < g.w.start {
		return 0, 0, false
	}
	g.k++
	return at, g.count, true
}

// poissonGen sends requests as a Poisson process: exponential gaps of the given mean.
type poissonGen struct {
	w    window
	mean float64
	rng  *rand.Rand
	t    float64
}

func (g *poissonGen) next() (int64, int, bool) {
	g.t += g.rng.ExpFloat64() * g.mean
	at := int64(g.t)
	if g.t >= float64(g.w.stop) || at >= g.w.stop {
		return 0, 0, false
	}
	return at, 1, true
}

// rampGen raises the rate linearly from 0 at start to N/Per at stop. The expected count by
// time x is Λ(x) = (x-start)² / (2·D·Per/N) with D = stop-start; the k-th arrival of a
// client is where Λ reaches k + frac, frac spreading the clients over one arrival.
type rampGen struct {
	w    window
	perN float64 // Per/N: the interval at full rate
	frac float64
	k    int64
}

func (g *rampGen) next() (int64, int, bool) {
	d := float64(g.w.stop - g.w.start)
	at := g.w.start + int64(math.Sqrt(2*d*g.perN*(float64(g.k)+g.frac)))
	if at >= g.w.stop {
		return 0, 0, false
	}
	g.k++
	return at, 1, true
}

// edgePeriod returns the period the edge pattern straddles, and the requests per period,
// for traffic at rate r against policy p. Rates are stored reduced ("5/m" is 1 per 12s),
// so the period as written is lost; the pattern straddles the longest window of p's
// rules (the window of a window guarantee, for constant parameters) that is a whole
// number of the rate's periods, and falls back to the rate's period.
func edgePeriod(p *dsl.Policy, r dsl.Rate) (per, n int64) {
	per, n = r.Per.Microseconds(), max(r.N, 1)
	if p == nil || per <= 0 {
		return per, n
	}
	best := per
	for _, ru := range p.Rules {
		if ru.Algorithm.Guarantee.Shape != algorithms.ShapeWindow {
			continue
		}
		var wire []int64
		for _, prm := range ru.Params {
			if prm.Const == nil {
				wire = nil
				break
			}
			wire = append(wire, prm.Const...)
		}
		if t, ok, err := ru.Algorithm.TermsOf(wire); ok && err == nil {
			if w := t.Interval; w > best && w%per == 0 {
				best = w
			}
		}
	}
	return best, n * (best / per)
}

// edgeGen straddles period boundaries (multiples of Per since the epoch, as fixed windows
// are aligned): ceil(N/2) requests 1ms before each boundary and the rest at it.
type edgeGen struct {
	w         window
	per       int64
	early, on int
	boundary  int64
	sentEarly bool
}

// edgeLead is how long before a boundary the first clump of the edge pattern arrives.
const edgeLead = 1000

func newEdgeGen(w window, per, n int64) *edgeGen {
	b := (w.start + edgeLead + per - 1) / per * per // the first boundary whose lead is in w
	return &edgeGen{w: w, per: per, early: int((n + 1) / 2), on: int(n / 2), boundary: b}
}

func (g *edgeGen) next() (int64, int, bool) {
	for {
		if !g.sentEarly {
			at := g.boundary - edgeLead
			if at >= g.w.stop {
				return 0, 0, false
			}
			g.sentEarly = true
			if at >= g.w.start && g.early > 0 {
				return at, g.early, true
			}
			continue
		}
		at := g.boundary
		g.boundary += g.per
		g.sentEarly = false
		if at >= g.w.stop {
			return 0, 0, false
		}
		if g.on > 0 {
			return at, g.on, true
		}
	}
}

// event kinds, in the order they run at one instant: a request that finished at t gives
// its lease back before one arriving at t asks, an override made at t is in force for
// the requests at t, and a retry probe sees the instant as the denied client would,
// before that instant's arrivals.
const (
	evRelease = iota
	evChange
	evProbe
	evArrival
)

// event is one entry of the simulation's queue.
type event struct {
	at   int64
	kind int
	seq  uint64 // insertion order: ties run first in, first out
	src  int    // evArrival: index into the simulation's sources
	left int    // evArrival: requests left in the clump
	req  *pendingReq
	chg  *dsl.Change // evChange
}

// eventQueue is a min-heap of events by (at, kind, seq).
type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if a.at != b.at {
		return a.at < b.at
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.seq < b.seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}

// scheduler is the time-ordered queue with its insertion counter.
type scheduler struct {
	q   eventQueue
	seq uint64
}

func (s *scheduler) push(e *event) {
	e.seq = s.seq
	s.seq++
	heap.Push(&s.q, e)
}

func (s *scheduler) pop() *event { return heap.Pop(&s.q).(*event) }

func (s *scheduler) empty() bool { return len(s.q) == 0 }
