package algorithms

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// layout2 returns the engine script whose fixed_window is the one form of earlier
// versions (every key a hash {w, n} and, for a debt, o, d and l; HMGET to read it),
// testdata/layout2, with the commands it ran.
func layout2(tb testing.TB) *Script {
	tb.Helper()
	src, err := os.ReadFile("testdata/layout2/fixed_window.lua")
	if err != nil {
		tb.Fatal(err)
	}
	algs := make([]*Algorithm, len(builtin))
	for i, a := range builtin {
		algs[i] = a
		if a.Name == "fixed_window" {
			old := *a
			old.Source = string(src)
			old.Commands = []string{"HMGET", "HSET", "HINCRBY", "PEXPIRE"}
			algs[i] = &old
		}
	}
	s, err := Assemble(algs)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// TestFixedWindowUpgradeFromOneForm: keys that fixed_window's earlier script wrote (the
// full form only) decide on the current script as the model does, from any point of a
// trace of checks, refunds, debts and client clocks: the current script reads the old
// form exactly and rewrites a key compact only when it opens a window.
func TestFixedWindowUpgradeFromOneForm(t *testing.T) {
	old := layout2(t)
	rdb := loadRedis(t).rdb
	if _, err := rdb.ScriptLoad(context.Background(), old.Source).Result(); err != nil {
		t.Fatal(err)
	}
	a, _ := Lookup("fixed_window")
	for _, r := range []redis.Cmdable{rdb, nil} {
		ex := upgradeExec{old: old, cur: Default(), rdb: r}
		t.Run(ex.name(), func(t *testing.T) {
			t.Parallel()
			upgradeTraces(t, ex, a, 29, nil)
		})
	}
}

// TestTriedChargesUndoneOnAFailedKey: a stack whose fixed_window rules are tried (charged
// first) and whose later key holds another type fails as the general path does
// (WRONGTYPE), with the tried keys as they were, on luahost and on a real redis-server.
// A record takes the quick path only once a call has completed it, so each rule is called
// before the failing stack.
func TestTriedChargesUndoneOnAFailedKey(t *testing.T) {
	a, _ := Lookup("fixed_window")
	rules := []*Compiled{{Algorithm: a, Params: []int64{5, 60_000_000}}, {Algorithm: a, Params: []int64{7, 60_000_000}}, {Algorithm: a, Params: []int64{9, 60_000_000}}}
	s, err := Assemble(builtin, rules...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	type target struct {
		name  string
		fcall func(keys, argv []string) (any, error)
		do    func(args ...any) (any, error)
	}
	h := luahost.New()
	if _, err := h.FunctionLoad(s.Library, false); err != nil {
		t.Fatal(err)
	}
	rdb := redistest.Shared(t).Client(t)
	if err := rdb.FunctionLoadReplace(ctx, s.Library).Err(); err != nil {
		t.Fatal(err)
	}
	targets := []target{
		{"luahost", func(keys, argv []string) (any, error) { return h.FCall(ctx, s.Function, keys, argv) },
			func(args ...any) (any, error) {
				strs := make([]string, len(args))
				for i, v := range args {
					strs[i] = fmt.Sprint(v)
				}
				return h.Do(ctx, strs...)
			}},
		{"redis", func(keys, argv []string) (any, error) {
			args := make([]any, len(argv))
			for i, v := range argv {
				args[i] = v
			}
			return rdb.FCall(ctx, s.Function, keys, args...).Result()
		},
			func(args ...any) (any, error) { return rdb.Do(ctx, args...).Result() }},
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			base := freshPrefix(t)
			call := func(keys ...string) (any, error) {
				c := Call{Op: OpCheck, Now: ServerTime}
				for i, k := range keys {
					c.Rules = append(c.Rules, Rule{Key: k, Algorithm: a, Cost: 1, Params: rules[i].Params, Compiled: s.Rules[i]})
				}
				argv, err := c.Argv()
				if err != nil {
					t.Fatal(err)
				}
				return tg.fcall(c.Keys(), argv)
			}
			held, fresh, other := base+":held", base+":fresh", base+":other"
			for range 2 { // the records made ready; held charged twice
				if _, err := call(held); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := call(held, fresh, base+":warm"); err != nil {
				t.Fatal(err)
			}
			if _, err := tg.do("DEL", fresh); err != nil {
				t.Fatal(err)
			}
			before, err := tg.do("HGETALL", held)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tg.do("SET", other, "x"); err != nil {
				t.Fatal(err)
			}
			_, err = call(held, fresh, other)
			if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Fatalf("a stack over a string key: %v, want WRONGTYPE", err)
			}
			after, _ := tg.do("HGETALL", held)
			if fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("the held key is %v after the failed call, %v before", after, before)
			}
			if n, _ := tg.do("EXISTS", fresh); fmt.Sprint(n) != "0" {
				t.Errorf("the fresh key exists after the failed call")
			}
		})
	}
}
