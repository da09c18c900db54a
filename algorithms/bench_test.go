package algorithms

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rlctl/rlctl/luahost"
)

// benchParams are typical production parameters per algorithm.
var benchParams = map[string][]int64{
	"fixed_window":   {100, 60_000_000},
	"sliding_log":    {100, 60_000_000},
	"sliding_window": {100, 60_000_000},
	"token_bucket":   {100, 10, 1_000_000},
	"leaky_bucket":   {100, 10, 1_000_000},
	"gcra":           {10, 1_000_000, 100},
	"concurrency":    {100, 30_000_000, 0},
}

// benchForm is one way of running the engine script on a host: the Source form with
// EVALSHA (the whole chunk runs on every call) or the library form with FCALL (the library
// runs once, at FUNCTION LOAD).
type benchForm struct {
	name string
	load func(h *luahost.Host, s *Script) error
	call func(ctx context.Context, h *luahost.Host, s *Script, keys, argv []string) error
}

var benchForms = []benchForm{
	{
		name: "evalsha",
		load: func(h *luahost.Host, s *Script) error { _, err := h.Load(s.Source); return err },
		call: func(ctx context.Context, h *luahost.Host, s *Script, keys, argv []string) error {
			_, err := h.EvalSHA(ctx, s.SHA1, keys, argv)
			return err
		},
	},
	{
		name: "fcall",
		load: func(h *luahost.Host, s *Script) error { _, err := h.FunctionLoad(s.Library, true); return err },
		call: func(ctx context.Context, h *luahost.Host, s *Script, keys, argv []string) error {
			_, err := h.FCall(ctx, s.Function, keys, argv)
			return err
		},
	},
}

// BenchmarkLuahost measures decisions of the engine script on luahost, the embedded
// backend and the engine of every simulation: one rule of each algorithm, and a stack of
// three rules in one call (gcra per address, token_bucket per user, sliding_window per
// tenant), in both of the script's forms with the rules written out, and with the rules
// compiled into the script as the engine runs them (fcall-compiled: FCallBounded), each on
// a host with the default settings. The clock advances 1ms per call over 1,000 keys per
// rule so that most calls are allowed and state stays bounded; stack3-denied is the stack
// on one key per rule, where nearly every call is denied. lua-steps/op, the Lua
// instructions per call (of the first 2,000 calls, counted on a second host), does not
// depend on the machine's speed or load: it compares script changes where timings cannot.
func BenchmarkLuahost(b *testing.B) {
	s := Default()
	type stack struct {
		name string
		algs []*Algorithm
		keys int // per rule; 0: 1,000
	}
	var stacks []stack
	for _, a := range builtin {
		stacks = append(stacks, stack{a.Name, []*Algorithm{a}, 0})
	}
	pick := func(name string) *Algorithm { a, _ := s.Algorithm(name); return a }
	three := []*Algorithm{pick("gcra"), pick("token_bucket"), pick("sliding_window")}
	// stack3-denied is the same stack on one key per rule: gcra allows 10 a second and
	// the calls come 1,000 a second, so nearly every call is denied, with the other two
	// rules reported as a peek, as a flood meets a stack.
	stacks = append(stacks, stack{"stack3", three, 0}, stack{"stack3-denied", three, 1})
	for _, st := range stacks {
		// The stack's rules compiled into a script, as engine.Compile writes a plan's:
		// calls name them and send their cost (and a lease) only.
		var compiled []*Compiled
		for _, a := range st.algs {
			c := &Compiled{Algorithm: a, Params: benchParams[a.Name]}
			for j := range a.WireLen() {
				if a.IsLeaseSlot(j) {
					c.Vary = append(c.Vary, j)
				}
			}
			compiled = append(compiled, c)
		}
		cs, err := Assemble(builtin, compiled...)
		if err != nil {
			b.Fatal(err)
		}
		// fcall-compiled calls as engine.Local does: a script of built-ins only with
		// FCallBounded.
		bounded := benchForm{name: "fcall-compiled", load: benchForms[1].load,
			call: func(ctx context.Context, h *luahost.Host, s *Script, keys, argv []string) error {
				_, err := h.FCallBounded(ctx, s.Function, keys, argv)
				return err
			},
		}
		forms := append(slices.Clone(benchForms), bounded)
		for _, form := range forms {
			b.Run(st.name+"/"+form.name, func(b *testing.B) {
				s := s
				if form.name == "fcall-compiled" {
					s = cs
				}
				argvs := make([][]string, 1000)
				keys := make([][]string, 1000)
				for i := range argvs {
					c := Call{Op: OpCheck, Now: ServerTime}
					for r, a := range st.algs {
						rule := Rule{
							Key: fmt.Sprintf("bench:%d:%d", r, i%cmp.Or(st.keys, len(argvs))), Algorithm: a, Cost: 1, Params: benchParams[a.Name], Lease: "l",
						}
						if s == cs {
							rule.Compiled = cs.Rules[r]
						}
						c.Rules = append(c.Rules, rule)
					}
					argv, err := c.Argv()
					if err != nil {
						b.Fatal(err)
					}
					argvs[i], keys[i] = argv, c.Keys()
				}
				ctx := context.Background()
				// The same calls on a host that counts instructions (with the watched
				// FCall for fcall-compiled): the first 2,000 calls' mean.
				clock := luahost.NewManualClock(time.Unix(1_800_000_000, 0))
				counting := luahost.New(luahost.WithClock(clock), luahost.WithCommands(s.Commands()...), luahost.WithInstructionLimit(1<<40))
				count := form
				if form.name == "fcall-compiled" {
					count = benchForms[1]
				}
				if err := count.load(counting, s); err != nil {
					b.Skip(err)
				}
				var steps uint64
				for i := range 2000 {
					clock.Advance(time.Millisecond)
					if err := count.call(ctx, counting, s, keys[i%1000], argvs[i%1000]); err != nil {
						b.Fatal(err)
					}
					steps += counting.Steps()
				}

				clock = luahost.NewManualClock(time.Unix(1_800_000_000, 0))
				h := luahost.New(luahost.WithClock(clock), luahost.WithCommands(s.Commands()...))
				if err := form.load(h, s); err != nil {
					b.Skip(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					clock.Advance(time.Millisecond)
					if err := form.call(ctx, h, s, keys[i%1000], argvs[i%1000]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
				b.ReportMetric(float64(steps)/2000, "lua-steps/op")
			})
		}
	}
}
