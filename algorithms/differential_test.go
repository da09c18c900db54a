package algorithms

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/internal/traces"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// traceCount is the number of random traces per algorithm (traces.Count).
func traceCount() int { return traces.Count(testing.Short() || raceEnabled) }

// sameAlgorithm draws keys that all use algorithm a, with different parameters.
func sameAlgorithm(a *Algorithm) func(*rand.Rand, string) []traceKey {
	return func(rng *rand.Rand, prefix string) []traceKey {
		keys := make([]traceKey, 1+rng.IntN(3))
		for i := range keys {
			keys[i] = traceKey{key: fmt.Sprintf("%sk%d", prefix, i), alg: a, params: randomParams(rng, a)}
			keys[i].box = randomBox(rng, a, keys[i].params)
			keys[i].ovr = a.Overridable() && rng.IntN(3) == 0
			keys[i].lists = randomLists(rng)
			keys[i].key = boxedKey(keys[i])
		}
		return keys
	}
}

// mixed draws keys of different algorithms, for stacked calls.
func mixed(rng *rand.Rand, prefix string) []traceKey {
	keys := make([]traceKey, 2+rng.IntN(3))
	for i := range keys {
		a := builtin[rng.IntN(len(builtin))]
		keys[i] = traceKey{key: fmt.Sprintf("%sk%d", prefix, i), alg: a, params: randomParams(rng, a)}
		keys[i].box = randomBox(rng, a, keys[i].params)
		keys[i].ovr = a.Overridable() && rng.IntN(3) == 0
		keys[i].lists = randomLists(rng)
		keys[i].key = boxedKey(keys[i])
	}
	return keys
}

func loadRedis(t *testing.T) redisExec {
	t.Helper()
	rdb := redistest.Shared(t).Client(t)
	s := Default()
	sha, err := rdb.ScriptLoad(context.Background(), s.Source).Result()
	if err != nil {
		t.Fatalf("SCRIPT LOAD: %v", err)
	}
	if sha != s.SHA1 {
		t.Fatalf("Redis computed SHA1 %s, Assemble %s", sha, s.SHA1)
	}
	return redisExec{rdb: rdb, script: s}
}

// TestRedisMatchesModel runs random traces per algorithm (and mixed stacks) on a real
// redis-server and compares every reply with the reference model.
func TestRedisMatchesModel(t *testing.T) { matchesModel(t, loadRedis(t)) }

// TestLuahostMatchesModel runs the same random traces on luahost with a virtual clock, so
// keys expire on the trace's clock: expiry must never change a decision, and every key
// must be gone once its reset-after has passed.
func TestLuahostMatchesModel(t *testing.T) { matchesModel(t, hostExec{script: Default()}) }

// matchesModel runs traceCount traces per algorithm, and of mixed stacks, on ex.
func matchesModel(t *testing.T, ex executor) {
	for _, a := range builtin {
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			checkTraces(t, ex, 1, traceCount(), 40, sameAlgorithm(a))
		})
	}
	t.Run("mixed", func(t *testing.T) {
		t.Parallel()
		checkTraces(t, ex, 2, traceCount(), 40, mixed)
	})
}
