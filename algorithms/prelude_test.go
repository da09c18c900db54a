package algorithms

import (
	"context"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/lua"
	"github.com/rlctl/rlctl/luahost"
)

// preludeProbe runs the prelude's rounding on ARGV: for each x, floor(x) and whether x is
// whole (1/0, by floor(x) == x, int_arg's test); then for each a, b, floor(a / b) and
// ceil(a / b), as the algorithms divide (idiv and cdiv are the same under a name).
const preludeProbe = `
bind()
local out = {}
local nx = tonumber(ARGV[1])
for i = 2, nx + 1 do
  local x = tonumber(ARGV[i])
  out[#out + 1] = floor(x)
  out[#out + 1] = floor(x) == x and 1 or 0
end
for i = nx + 2, #ARGV, 2 do
  local a, b = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  out[#out + 1] = floor(a / b)
  out[#out + 1] = ceil(a / b)
end
return out
`

// TestPreludeRounding holds the prelude's division (floor and ceil of a double quotient)
// and its test of a whole number to exact integer arithmetic, on real Redis and on
// luahost, at the edges of doubles' integers (2^51 to 2^53) and at random.
func TestPreludeRounding(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	xs := []float64{0, 0.5, -0.5, 1, -1, 1.5, -1.5, 2.5, 1e15 + 0.5, 1780000000000000, 1780000000000000.5,
		1<<51 - 1, 1<<51 - 0.5, 1 << 51, 1<<51 + 0.5, -(1<<51 - 1), -(1 << 51), -(1<<51 + 0.5), 1 << 52, 1 << 53, -(1 << 53)}
	for range 300 {
		x := (r.Float64()*2 - 1) * math.Ldexp(1, r.IntN(54))
		if r.IntN(3) == 0 {
			x = math.Trunc(x)
		}
		xs = append(xs, x)
	}
	type pair struct{ a, b int64 }
	pairs := []pair{{0, 1}, {1, 1}, {-1, 2}, {1 << 53, 1}, {-(1 << 53), 1}, {1<<53 - 1, 3}, {1 << 52, 2}, {1780000000000000, 60000000}, {-(1<<52 + 1), 2}}
	for range 300 {
		b := r.Int64N(1<<uint(r.IntN(40))) + 1
		a := r.Int64N(1<<53) - r.Int64N(1<<53)
		if r.IntN(2) == 0 {
			a = r.Int64N(1 << uint(r.IntN(54)))
		}
		pairs = append(pairs, pair{a, b})
	}
	// The quotients a double division is most likely to round to the next integer: just
	// below or above a multiple of b, with a near 2^53 and b of every size.
	for range 600 {
		b := r.Int64N(1<<uint(1+r.IntN(52))) + 1
		k := (1<<53 - r.Int64N(1<<uint(r.IntN(50)))) / b
		a := k*b - 1 - r.Int64N(min(b, 4))
		if r.IntN(2) == 0 {
			a = k*b - b + 1 + r.Int64N(min(b, 4)) // just above (k-1)*b
		}
		if r.IntN(2) == 0 {
			a = -a
		}
		pairs = append(pairs, pair{a, b})
	}
	argv := []string{strconv.Itoa(len(xs))}
	var want []int64
	for _, x := range xs {
		argv = append(argv, strconv.FormatFloat(x, 'g', -1, 64))
		f := math.Floor(x)
		isInt := int64(0)
		if f == x {
			isInt = 1
		}
		want = append(want, int64(f), isInt)
	}
	for _, p := range pairs {
		argv = append(argv, strconv.FormatInt(p.a, 10), strconv.FormatInt(p.b, 10))
		q, m := new(big.Int), new(big.Int)
		q.DivMod(big.NewInt(p.a), big.NewInt(p.b), m) // Euclidean; b > 0: floor
		c := q.Int64()
		if m.Sign() != 0 {
			c++
		}
		want = append(want, q.Int64(), c)
	}
	src := lua.Source("prelude.lua") + preludeProbe
	check := func(name string, got any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		vals, ok := got.([]any)
		if !ok || len(vals) != len(want) {
			t.Fatalf("%s: %d values, want %d", name, len(vals), len(want))
		}
		for i, v := range vals {
			if v != want[i] {
				if i < 2*len(xs) {
					t.Errorf("%s: x = %v: %s = %v, want %v", name, xs[i/2], []string{"floor", "whole"}[i%2], v, want[i])
				} else {
					p := pairs[(i-2*len(xs))/2]
					t.Errorf("%s: a = %d, b = %d: %s = %v, want %v", name, p.a, p.b, []string{"floor(a / b)", "ceil(a / b)"}[i%2], v, want[i])
				}
			}
		}
	}
	h := luahost.New()
	got, err := h.Eval(context.Background(), src, nil, argv)
	check("luahost", got, err)
	rdb := redistest.Shared(t).Client(t)
	got, err = rdb.Eval(context.Background(), src, nil, argv).Result()
	check("redis", got, err)
}
