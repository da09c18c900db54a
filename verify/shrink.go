package verify

// shrinkRuns bounds the reruns one shrink may make.
const shrinkRuns = 400

// shrinkSlice removes elements of xs while fails still holds and returns the smallest
// failing slice it finds: chunks first (halves, quarters, …), then single elements, until
// no single element can go or *runs is spent. fails(xs) must be true.
func shrinkSlice[T any](xs []T, fails func([]T) bool, runs *int) []T {
	n := 2
	for len(xs) >= 2 && *runs > 0 {
		chunk := (len(xs) + n - 1) / n
		removed := false
		for start := 0; start < len(xs) && *runs > 0; start += chunk {
			try := append(append(make([]T, 0, len(xs)), xs[:start]...), xs[min(start+chunk, len(xs)):]...)
			*runs--
			if fails(try) {
				xs, removed = try, true
				n = max(n-1, 2)
				break
			}
		}
		if !removed {
			if chunk == 1 {
				break
			}
			n = min(2*n, len(xs))
		}
	}
	return xs
}

// simplify tries, for each element in turn, the simpler variants that simpler proposes,
// keeping the first that still fails.
func simplify[T any](xs []T, simpler func(T) []T, fails func([]T) bool, runs *int) []T {
	for i := 0; i < len(xs) && *runs > 0; i++ {
		for _, v := range simpler(xs[i]) {
			if *runs <= 0 {
				break
			}
			try := append([]T(nil), xs...)
			try[i] = v
			*runs--
			if fails(try) {
				xs = try
				break
			}
		}
	}
	return xs
}

// shrinkSteps shrinks a failing single-rule trace: fewer steps, then smaller costs.
func shrinkSteps(steps []step, fails func([]step) bool) []step {
	runs := shrinkRuns
	steps = shrinkSlice(steps, fails, &runs)
	steps = simplify(steps, func(st step) []step {
		if st.release || st.cost <= 1 {
			return nil
		}
		a, b := st, st
		a.cost, b.cost = 1, st.cost/2
		return []step{a, b}
	}, fails, &runs)
	return shrinkSlice(steps, fails, &runs)
}
