package algorithms

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// compile returns calls with every rule replaced by a compiled rule of one script
// assembled for them: one compiled rule per distinct (algorithm, parameters, shadow), each
// leaving a random subset of its parameters (and always its lease) to the call.
func compile(rng *rand.Rand, calls []Call) (*Script, []Call, error) {
	var rules []*Compiled
	index := map[string]int{}
	out := make([]Call, len(calls))
	type ref struct{ call, rule, compiled int }
	var refs []ref
	for i, c := range calls {
		out[i] = c
		out[i].Rules = slices.Clone(c.Rules)
		for j, r := range c.Rules {
			id := fmt.Sprint(r.Algorithm.Name, r.Params, r.Shadow, r.Box, r.Overridable, r.Lists, r.Calendar)
			k, ok := index[id]
			if !ok {
				cr := &Compiled{Algorithm: r.Algorithm, Shadow: r.Shadow, Box: r.Box, Overridable: r.Overridable, Lists: r.Lists, Calendar: r.Calendar, Params: slices.Clone(r.Params)}
				for p := range r.Params {
					if r.Algorithm.IsLeaseSlot(p) || rng.IntN(3) == 0 {
						cr.Vary = append(cr.Vary, p)
					}
				}
				rules = append(rules, cr)
				k = len(rules) - 1
				index[id] = k
			}
			refs = append(refs, ref{i, j, k})
		}
	}
	s, err := Assemble(builtin, rules...)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range refs {
		out[r.call].Rules[r.rule].Compiled = s.Rules[r.compiled]
	}
	return s, out, nil
}

// compiledExec runs traces as compiled rules of a script assembled per trace, on a real
// Redis by EVALSHA of Source or FCALL of Library, or on luahost (hostExec).
type compiledExec struct {
	rdb   redis.Cmdable // nil: luahost
	fcall bool
}

func (e compiledExec) name() string {
	switch {
	case e.rdb == nil:
		return "luahost (compiled)"
	case e.fcall:
		return "redis (compiled, FCALL)"
	}
	return "redis (compiled, EVALSHA)"
}

func (e compiledExec) run(calls []Call) ([]Reply, error) {
	rng := rand.New(rand.NewPCG(uint64(len(calls)), uint64(len(calls[0].Rules))))
	s, compiled, err := compile(rng, calls)
	if err != nil {
		return nil, err
	}
	if e.rdb == nil {
		return hostExec{script: s}.run(compiled)
	}
	ctx := context.Background()
	if e.fcall {
		if err := e.rdb.FunctionLoadReplace(ctx, s.Library).Err(); err != nil {
			return nil, fmt.Errorf("FUNCTION LOAD: %w", err)
		}
		defer e.rdb.FunctionDelete(ctx, s.Function)
		return fcallExec{rdb: e.rdb, script: s}.run(compiled)
	}
	if err := e.rdb.ScriptLoad(ctx, s.Source).Err(); err != nil {
		return nil, err
	}
	return redisExec{rdb: e.rdb, script: s}.run(compiled)
}

// fcallExec is redisExec with FCALL of the script's library function.
type fcallExec struct {
	rdb    redis.Cmdable
	script *Script
}

func (e fcallExec) run(calls []Call) ([]Reply, error) {
	ctx := context.Background()
	pipe := e.rdb.TxPipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i := range calls {
		argv, err := calls[i].Argv()
		if err != nil {
			return nil, err
		}
		keys := calls[i].Keys()
		cmds[i] = pipe.FCall(ctx, e.script.Function, keys, anys(argv)...)
		persist(ctx, pipe, &calls[i])
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.As(err, new(redis.Error)) {
		return nil, err
	}
	out := make([]Reply, len(calls))
	for i, cmd := range cmds {
		v, err := cmd.Result()
		r, err := decode(&calls[i], v, err)
		if err != nil {
			return nil, fmt.Errorf("call %d: %w", i+1, err)
		}
		out[i] = r
	}
	return out, nil
}

// TestCompiledMatchesModel: rules compiled into the script decide as the reference model
// does (and so as the same rules written out in ARGV), on luahost and on a real Redis in
// both of the script's forms.
func TestCompiledMatchesModel(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	n := max(traceCount()/10, 20)
	for _, ex := range []compiledExec{{}, {rdb: rdb}, {rdb: rdb, fcall: true}} {
		t.Run(ex.name(), func(t *testing.T) {
			t.Parallel()
			checkTraces(t, ex, 3, n, 40, mixed)
		})
	}
}

// TestCompiledRulesRejectMalformedCalls: a call naming a compiled rule the script does
// not have, or sending the wrong number of varying values, is an RLCTL error reply in both
// forms; the well-formed call succeeds.
func TestCompiledRulesRejectMalformedCalls(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := context.Background()
	gcra, _ := Lookup("gcra")
	conc, _ := Lookup("concurrency")
	s, err := Assemble(builtin,
		&Compiled{Algorithm: gcra, Params: []int64{10, 1_000_000, 5}},
		&Compiled{Algorithm: conc, Params: []int64{3, 60_000_000, 0}, Vary: []int{0, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptLoad(ctx, s.Source).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.FunctionLoadReplace(ctx, s.Library).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.FunctionDelete(context.Background(), s.Function) })
	head := []string{Protocol, "check", "1800000000000000", "", ""}
	call := func(n string, rest ...string) []string { return append(append(slices.Clone(head), n), rest...) }
	cases := map[string]struct {
		keys []string
		argv []string
	}{
		"index 0":        {[]string{"k"}, call("1", "@0", "1")},
		"index 3":        {[]string{"k"}, call("1", "@3", "1")},
		"index word":     {[]string{"k"}, call("1", "@one", "1")},
		"index fraction": {[]string{"k"}, call("1", "@1.5", "1")},
		"bare @":         {[]string{"k"}, call("1", "@", "1")},
		"cost":           {[]string{"k"}, call("1", "@1", "-1")},
		"extra value":    {[]string{"k"}, call("1", "@1", "1", "10")},
		"missing lease":  {[]string{"k"}, call("1", "@2", "1", "3")},
		"bad max":        {[]string{"k"}, call("1", "@2", "1", "0", "lease")},
		"two, short":     {[]string{"k", "k2"}, call("2", "@1", "1", "@2", "1", "3")},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			for form, run := range map[string]func() error{
				"EVALSHA": func() error { return rdb.EvalSha(ctx, s.SHA1, c.keys, anys(c.argv)...).Err() },
				"FCALL":   func() error { return rdb.FCall(ctx, s.Function, c.keys, anys(c.argv)...).Err() },
			} {
				err := run()
				if err == nil || !strings.HasPrefix(err.Error(), "RLCTL") {
					t.Errorf("%s: want an RLCTL error reply, got %v", form, err)
				}
			}
		})
	}
	ok := call("2", "@1", "1", "@2", "1", "3", "lease-1")
	if err := rdb.EvalSha(ctx, s.SHA1, []string{"ok1", "ok2"}, anys(ok)...).Err(); err != nil {
		t.Fatalf("EVALSHA of the well-formed call: %v", err)
	}
	if err := rdb.FCall(ctx, s.Function, []string{"ok3", "ok4"}, anys(ok)...).Err(); err != nil {
		t.Fatalf("FCALL of the well-formed call: %v", err)
	}
}

// TestScriptFormsShareTheirBody: the EVAL form and the library form are the same code, the
// body, with one line that runs its main function; so whichever form a server runs,
// luahost, simulate and verify run that code too.
func TestScriptFormsShareTheirBody(t *testing.T) {
	gcra, _ := Lookup("gcra")
	s, err := Assemble(builtin, &Compiled{Algorithm: gcra, Params: []int64{10, 1_000_000, 5}})
	if err != nil {
		t.Fatal(err)
	}
	if want := s.Body + "\nreturn main(KEYS, ARGV)\n"; s.Source != want {
		t.Errorf("Source is not Body and the call of main")
	}
	if want := "#!lua name=" + s.Function + "\n" + s.Body + "\nredis.register_function('" + s.Function + "', main)\n"; s.Library != want {
		t.Errorf("Library is not Body and the registration of main")
	}
	if !strings.HasPrefix(s.Function, "rlctl_") || len(s.Function) != len("rlctl_")+24 {
		t.Errorf("Function %q", s.Function)
	}
	other, _ := Assemble(builtin, &Compiled{Algorithm: gcra, Params: []int64{10, 1_000_000, 6}})
	if other.Function == s.Function || other.SHA1 == s.SHA1 {
		t.Errorf("different rules share a name: %s %s", s.Function, other.Function)
	}
}

// TestAssembleRejectsBadCompiledRules: compiled rules are checked when the script is
// assembled.
func TestAssembleRejectsBadCompiledRules(t *testing.T) {
	gcra, _ := Lookup("gcra")
	conc, _ := Lookup("concurrency")
	plugin := &Algorithm{Name: "other", Params: gcra.Params}
	for name, c := range map[string]*Compiled{
		"no algorithm":      {Params: []int64{1}},
		"not in the script": {Algorithm: plugin, Params: []int64{1, 1, 1}},
		"short":             {Algorithm: gcra, Params: []int64{10, 1_000_000}},
		"invalid":           {Algorithm: gcra, Params: []int64{0, 1_000_000, 5}},
		"too large":         {Algorithm: gcra, Params: []int64{1, MaxInt, MaxInt}},
		"lease constant":    {Algorithm: conc, Params: []int64{3, 60_000_000, 0}},
		"vary unordered":    {Algorithm: conc, Params: []int64{3, 60_000_000, 0}, Vary: []int{2, 0}},
		"vary out of range": {Algorithm: conc, Params: []int64{3, 60_000_000, 0}, Vary: []int{2, 3}},
	} {
		if _, err := Assemble(builtin, c); err == nil {
			t.Errorf("%s: assembled", name)
		}
	}
}

// TestGCRAOverAnotherType: a gcra key that holds another type (a layout of an earlier
// version) reads as no key, and the next charge overwrites it, on luahost and on Redis.
func TestGCRAOverAnotherType(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := context.Background()
	gcra, _ := Lookup("gcra")
	s, err := Assemble(builtin, &Compiled{Algorithm: gcra, Params: []int64{1, 1_000_000, 2}})
	if err != nil {
		t.Fatal(err)
	}
	h := luahost.New(luahost.WithClock(luahost.NewManualClock(time.UnixMicro(1_800_000_000_000_000))))
	if _, err := h.Load(s.Source); err != nil {
		t.Fatal(err)
	}
	key := "gcra-over-hash:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() { rdb.Del(context.Background(), key) })
	argv := []string{Protocol, "check", "1800000000000000", "", "", "1", "@1", "1"}
	for _, run := range []struct {
		name string
		do   func(args ...any) error
		eval func() (any, error)
		typ  func() (string, error)
	}{
		{"luahost",
			func(args ...any) error { _, err := h.Do(ctx, strs(args)...); return err },
			func() (any, error) { return h.EvalSHA(ctx, s.SHA1, []string{key}, argv) },
			func() (string, error) { r, err := h.Do(ctx, "TYPE", key); return fmt.Sprint(r), err }},
		{"redis",
			func(args ...any) error { return rdb.Do(ctx, args...).Err() },
			func() (any, error) { return rdb.Eval(ctx, s.Source, []string{key}, argv).Result() },
			func() (string, error) { return rdb.Type(ctx, key).Result() }},
	} {
		if err := run.do("HSET", key, "w", "1", "n", "1"); err != nil {
			t.Fatal(err)
		}
		got, err := run.eval()
		if err != nil {
			t.Fatalf("%s: %v", run.name, err)
		}
		r, err := DecodeReply(got, 1)
		if err != nil || !r.Allowed || r.Rules[0].Remaining != 1 {
			t.Errorf("%s: over a hash the first charge got %+v, %v; want allowed with 1 left", run.name, r, err)
		}
		if typ, err := run.typ(); typ != "string" || err != nil {
			t.Errorf("%s: the key is a %s (%v) after the charge, want the string gcra writes", run.name, typ, err)
		}
	}
}

func strs(args []any) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = fmt.Sprint(a)
	}
	return out
}
