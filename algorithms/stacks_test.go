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

// TestUnrolledStacksDecideAsTheGeneralPath runs the same random checks of stacks of two to
// five compiled rules (shadow or not, costs 0 to 3, over shared keys) through the library
// form with FCALL, where stacks of up to four complete records take the unrolled path
// (stack<n>), and through the script form with EVAL, where every call takes the general
// path: the replies and the keys' contents must be the same after every call.
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
		n := 2 + r.IntN(4)
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
