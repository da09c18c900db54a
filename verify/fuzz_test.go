package verify

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/algorithms"
)

// fuzzScales are the windows, periods and TTLs a fuzzed rule draws from, in µs.
var fuzzScales = []int64{1, 7, 1000, 999_999, 1_000_000, 60_000_000}

// fuzzSubject decodes a rule from the first bytes: a built-in algorithm and small
// parameters.
func fuzzSubject(data []byte) (*subject, []byte) {
	at := func(i int) int {
		if i < len(data) {
			return int(data[i])
		}
		return 0
	}
	algs := algorithms.Builtin()
	a := algs[at(0)%len(algs)]
	var w []int64
	k := 1
	for _, p := range a.Params {
		switch p.Kind {
		case algorithms.Count:
			w = append(w, 1+int64(at(k)%9))
		case algorithms.Duration:
			w = append(w, fuzzScales[at(k)%len(fuzzScales)])
		case algorithms.Rate:
			w = append(w, 1+int64(at(k)%5), fuzzScales[at(k+1)%len(fuzzScales)])
			k++
		case algorithms.Lease:
			w = append(w, 0)
		}
		k++
	}
	return newSubject(a, w, "fuzz"), data[min(k, len(data)):]
}

// fuzzSteps decodes a trace: per step, a byte choosing how far the clock moves (not at
// all, 1µs, a little, to 1µs before or onto a window boundary, a window, past every TTL)
// and a byte choosing the cost (0 to the capacity + 2) or a release of the oldest lease.
func fuzzSteps(s *subject, data []byte) []step {
	w := max(s.spec.window, 1)
	var steps []step
	var now int64
	var held []step
	for i := 0; i+1 < len(data) && len(steps) < 64; i += 2 {
		switch d := data[i]; d % 8 {
		case 0:
		case 1:
			now++
		case 2:
			now += int64(d) * max(w/256, 1)
		case 3: // 1µs before the next window boundary
			now = (base+now)/w*w + w - base - 1
		case 4: // onto it
			now = (base+now)/w*w + w - base
		case 5:
			now += w
		case 6:
			now += 3*w + int64(d)
		case 7:
			now += int64(d) * 1000
		}
		c := data[i+1]
		if c >= 250 && len(held) > 0 && s.lease >= 0 {
			steps = append(steps, step{at: now, cost: held[0].cost, release: true, lease: held[0].lease})
			held = held[1:]
			continue
		}
		st := step{at: now, cost: int64(c) % (s.spec.limit + 3), lease: len(steps) + 1}
		steps = append(steps, st)
		held = append(held, st)
	}
	return steps
}

// FuzzVerify drives the property checkers over fuzzed traces of every built-in algorithm
// on the real engine script: each must hold its limit (exactly, or within the documented
// bound for fixed_window and sliding_window), give sound and sufficient retry-after,
// change nothing on a denial or a peek, and leave no key after its last reset-after. The
// seed corpus (testdata/fuzz/FuzzVerify) starts one trace per algorithm.
func FuzzVerify(f *testing.F) {
	g, err := newRig(algorithms.Default())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sub, rest := fuzzSubject(data)
		steps := fuzzSteps(sub, rest)
		res, g, err := sub.run(g, steps)
		if err != nil {
			t.Fatalf("%s %s: %v", sub.alg.Name, describeParams(sub.alg, sub.params), err)
		}
		for _, v := range []*violation{
			checkLimit(sub, steps, res),
			checkRetry(sub, steps, res),
			checkAtomic1(sub, g, steps, res),
			checkExpiry(sub, g, steps, res),
		} {
			if v != nil && v.status == Fail {
				t.Fatalf("%s %s: %s\n%s", sub.alg.Name, describeParams(sub.alg, sub.params), v.msg, renderSteps(sub, steps, res, v.mark))
			}
		}
	})
}

func renderSteps(sub *subject, steps []step, res []result, mark []int) string {
	var b strings.Builder
	for _, s := range sub.counterexample(steps, res, mark, len(steps)).Steps {
		m := " "
		if s.Mark {
			m = ">"
		}
		fmt.Fprintf(&b, "%s %s %s: %s\n", m, fmtExact(s.At), s.Request, s.Result)
	}
	return b.String()
}
