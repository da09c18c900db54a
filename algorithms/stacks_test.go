package algorithms

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/rlctl/rlctl/luahost"
)

// stackParams are small limits, so that random traffic is often denied.
var stackParams = map[string][]int64{
	"gcra":           {1, 1_000_000, 3},
	"token_bucket":   {3, 1, 1_000_000},
	"leaky_bucket":   {3, 1, 1_000_000},
	"fixed_window":   {3, 1_000_000},
	"sliding_window": {3, 1_000_000},
	"sliding_log":    {3, 1_000_000},
}

// TestUnrolledStacksDecideAsTheGeneralPath runs the same random checks of one to five
// compiled rules (shadow or not, costs 0 to 3, over shared keys) through the library form
// with FCALL, where a call of one complete record or a stack of up to four takes the
// dispatcher's quick path (quick, stack<n>), and through the script form with EVAL, where
// no record is complete when a call starts and every call takes one or the general path:
// the replies and the keys' contents must be the same after every call.
func TestUnrolledStacksDecideAsTheGeneralPath(t *testing.T) {
	names := []string{"gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_window", "sliding_log"}
	r := rand.New(rand.NewPCG(3, 5))
	var rules []*Compiled
	for i := range 12 {
		a, _ := Lookup(names[i%len(names)])
		rules = append(rules, &Compiled{Algorithm: a, Params: stackParams[a.Name], Shadow: i%5 == 4})
	}
	s, err := Assemble(builtin, rules...)
	if err != nil {
		t.Fatal(err)
	}
	clock := luahost.NewManualClock(time.Unix(1_800_000_000, 0))
	fast := luahost.New(luahost.WithClock(clock))
	general := luahost.New(luahost.WithClock(clock))
	if _, err := fast.FunctionLoad(s.Library, false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allowed, denied := 0, 0
	for i := range 3000 {
		clock.Advance(time.Duration(r.IntN(400_000)) * time.Microsecond)
		n := 1 + r.IntN(5)
		c := Call{Op: OpCheck, Now: ServerTime}
		for _, k := range r.Perm(len(rules))[:n] {
			c.Rules = append(c.Rules, Rule{Key: fmt.Sprintf("k%d:%d", k, r.IntN(3)), Algorithm: rules[k].Algorithm,
				Cost: int64(r.IntN(4)), Params: rules[k].Params, Shadow: rules[k].Shadow, Compiled: s.Rules[k]})
		}
		argv, err := c.Argv()
		if err != nil {
			t.Fatal(err)
		}
		got, gerr := fast.FCall(ctx, s.Function, c.Keys(), argv)
		want, werr := general.Eval(ctx, s.Source, c.Keys(), argv)
		if !reflect.DeepEqual(got, want) || (gerr == nil) != (werr == nil) {
			t.Fatalf("call %d (%d rules): unrolled %v, %v; general %v, %v", i, n, got, gerr, want, werr)
		}
		if reply, ok := got.([]any); ok && reply[0] == int64(1) {
			allowed++
		} else {
			denied++
		}
		for _, k := range c.Keys() {
			a, _ := fast.Dump(k)
			b, _ := general.Dump(k)
			if a != b {
				t.Fatalf("call %d: key %s is %q after the unrolled path, %q after the general one", i, k, a, b)
			}
		}
	}
	if allowed < 300 || denied < 300 {
		t.Fatalf("%d allowed, %d denied: the traffic does not exercise both outcomes", allowed, denied)
	}
	// A repeated key is the general path's error on both.
	c := Call{Op: OpCheck, Now: ServerTime, Rules: []Rule{
		{Key: "same", Algorithm: rules[0].Algorithm, Cost: 1, Params: rules[0].Params, Compiled: s.Rules[0]},
		{Key: "same", Algorithm: rules[1].Algorithm, Cost: 1, Params: rules[1].Params, Compiled: s.Rules[1]},
	}}
	argv, _ := c.Argv()
	_, gerr := fast.FCall(ctx, s.Function, c.Keys(), argv)
	_, werr := general.Eval(ctx, s.Source, c.Keys(), argv)
	if gerr == nil || werr == nil {
		t.Fatalf("a repeated key: unrolled %v, general %v; want the key error from both", gerr, werr)
	}
}

// checkPeekProbe calls a built-in's check at ARGV[2] with cost ARGV[3] and parameters
// ARGV[4..] and, when it allows a charge, check with cost 0 at the same instant: {1,
// the remaining and reset_after the first returned for a peek, then the peek's allowed,
// remaining and reset_after}; {0} otherwise.
const checkPeekProbe = `
local function probe(KEYS, ARGV)
  bind()
  local params, _, check = load_algorithm(ARGV[1])
  local p = {}
  for i = 1, #params do
    local v = ARGV[3 + i]
    if params[i] ~= 'str' then
      v = tonumber(v)
    end
    p[i] = v
  end
  local now, cost = tonumber(ARGV[2]), tonumber(ARGV[3])
  local ok, _, _, _, _, _, pr, ps = check(KEYS[1], now, cost, p)
  if ok ~= 1 or cost == 0 then
    return {0}
  end
  local ok0, re0, _, rs0 = check(KEYS[1], now, 0, p)
  return {1, pr, ps, ok0, re0, rs0}
end
return probe(KEYS, ARGV)
`

// Every built-in's check, when it allows a charge, also returns the remaining and
// reset_after of a peek at the same instant (which a denied unrolled stack reports for
// its rules that would have allowed): exactly what check with cost 0 returns, over random
// traffic that moves each key through its states, client clocks that go back included.
func TestCheckReturnsItsPeek(t *testing.T) {
	s := Default()
	params := map[string][]int64{"concurrency": {3, 2_000_000, 0}}
	for name, p := range stackParams {
		params[name] = p
	}
	r := rand.New(rand.NewPCG(9, 4))
	ctx := context.Background()
	for _, a := range builtin {
		h := luahost.New()
		allowed := 0
		now := int64(1_800_000_000_000_000)
		for i := range 1500 {
			now += int64(r.IntN(500_000)) - 50_000 // sometimes behind: a client clock
			cost := int64(r.IntN(4))
			rule := Rule{Key: "k", Algorithm: a, Cost: cost, Params: params[a.Name], Lease: fmt.Sprintf("l%d", i)}
			argv := []string{a.Name, fmt.Sprint(now), fmt.Sprint(cost)}
			for j, v := range rule.Params {
				if a.IsLeaseSlot(j) {
					argv = append(argv, rule.Lease)
				} else {
					argv = append(argv, fmt.Sprint(v))
				}
			}
			got, err := h.Eval(ctx, s.Body+checkPeekProbe, []string{"k"}, argv)
			if err != nil {
				t.Fatalf("%s: %v", a.Name, err)
			}
			if v := got.([]any); v[0] == int64(1) {
				allowed++
				if v[3] != int64(1) || v[1] != v[4] || v[2] != v[5] {
					t.Fatalf("%s at %d, cost %d: check returned peek remaining %v, reset %v; a peek returns allowed %v, remaining %v, reset %v",
						a.Name, now, cost, v[1], v[2], v[3], v[4], v[5])
				}
			}
			// Then the call itself, which moves the key on.
			c := Call{Op: OpCheck, Now: now, Rules: []Rule{rule}}
			args, err := c.Argv()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.Eval(ctx, s.Source, c.Keys(), args); err != nil {
				t.Fatalf("%s: %v", a.Name, err)
			}
		}
		if allowed < 100 {
			t.Errorf("%s: only %d of the calls allowed a charge", a.Name, allowed)
		}
	}
}
