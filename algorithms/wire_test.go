package algorithms

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/luahost"
)

// TestDecodeReplyNamesRuleAndField checks the errors of replies a plugin's check can
// produce by returning the wrong shape: each names the rule, the field and the value's
// index, and quotes check's contract. Lua false reaches Go as nil; Lua nil ends the array.
func TestDecodeReplyNamesRuleAndField(t *testing.T) {
	head := []any{int64(1), int64(0), int64(5), int64(5)}
	rule := []any{int64(1), int64(9), int64(0), int64(100), int64(10)}
	reply := func(parts ...[]any) []any {
		var v []any
		for _, p := range parts {
			v = append(v, p...)
		}
		return v
	}
	for _, tc := range []struct {
		name     string
		reply    any
		n        int
		want     string
		contract bool // the error quotes CheckContract
	}{
		{"false allowed", reply(head, []any{nil, int64(9), int64(0), int64(100), int64(10)}), 1,
			"rule 1's allowed (value 5) is false, want an integer", true},
		{"string remaining", reply(head, []any{int64(1), "lots", int64(0), int64(100), int64(10)}), 1,
			`rule 1's remaining (value 6) is the string "lots", want an integer`, true},
		{"nil retry_after", reply(head, []any{int64(1), int64(9)}), 1,
			"rule 1's retry_after_us (value 7) is nil (a Lua nil cuts the reply short), want an integer", true},
		{"nothing returned", reply(head, rule), 2,
			"rule 2's allowed (value 10) is nil (a Lua nil cuts the reply short)", true},
		{"table limit", reply(head, rule, []any{int64(1), int64(9), int64(0), int64(100), []any{int64(1)}}), 2,
			"rule 2's limit (value 14) is a table, want an integer", true},
		{"bad header", reply([]any{int64(1), int64(0), "x", int64(5)}, rule), 1,
			"value 3 is string, want an integer", false},
		{"too many values", reply(head, rule, []any{int64(1)}), 1,
			"10 values for 1 rules, want 9", false},
		{"not an array", int64(1), 1, "int64, want an array", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeReply(tc.reply, tc.n)
			if !errors.Is(err, ErrReply) {
				t.Fatalf("error %v, want ErrReply", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
			if got := strings.Contains(err.Error(), CheckContract); got != tc.contract {
				t.Errorf("error %q quotes the contract: %v, want %v", err, got, tc.contract)
			}
		})
	}
	if r, err := DecodeReply(reply(head, rule), 1); err != nil || !r.Allowed || r.Rules[0].Remaining != 9 {
		t.Errorf("a well-formed reply: %+v, %v", r, err)
	}
}

// TestPluginWrongShapeReply runs plugins whose check returns the wrong shape through
// values the static checks cannot see, in the engine script on luahost, and checks the
// error that reaches the caller.
func TestPluginWrongShapeReply(t *testing.T) {
	for _, tc := range []struct{ ret, want string }{
		{"local ok = false\n  return ok, p[1], 0, 0, p[1]", "rule 1's allowed (value 5) is false"},
		{"local ok = true\n  return ok, p[1], 0, 0, p[1]", ""}, // Redis sends true as 1
		{"local left\n  return 1, left, 0, 0, p[1]", "rule 1's remaining (value 6) is nil (a Lua nil cuts the reply short)"},
		{"local s = 'soon'\n  return 1, p[1], 0, s, p[1]", `rule 1's reset_after_us (value 8) is the string "soon"`},
	} {
		src := "params = {'pos'}\nfunction check(key, now, cost, p)\n  " + tc.ret + "\nend\nfunction commit(key, w) end\n"
		plugin := &Algorithm{Name: "shape", Params: []Param{{Name: "limit", Kind: Count}}, Source: src}
		s, err := Assemble([]*Algorithm{plugin})
		if err != nil {
			t.Fatal(err)
		}
		h := luahost.New(luahost.WithTimeout(0), luahost.WithInstructionLimit(1e9), luahost.WithCommands(s.Commands()...))
		c := &Call{Op: OpCheck, Now: 1_764_472_786_000_000, Rules: []Rule{{Key: "k", Algorithm: plugin, Cost: 1, Params: []int64{5}}}}
		argv, err := c.Argv()
		if err != nil {
			t.Fatal(err)
		}
		v, err := h.Eval(context.Background(), s.Source, c.Keys(), argv)
		if err != nil {
			t.Fatal(err)
		}
		_, err = DecodeReply(v, 1)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.ret, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), CheckContract)):
			t.Errorf("%q: error %v, want one with %q and the contract", tc.ret, err, tc.want)
		}
	}
}

// TestDelayReplyBeyondMax: a delay reply whose wait is beyond the call's max delay, below
// -1, or disagrees with its verdict is malformed; a well-formed one decodes.
func TestDelayReplyBeyondMax(t *testing.T) {
	c := &Call{Op: OpDelay, MaxDelay: 1000, Rules: []Rule{{Key: "k", Algorithm: builtin[0], Params: []int64{1, 1}}}}
	reply := func(allowed, wait int64) any {
		return []any{allowed, 1 - allowed, int64(5), int64(5), allowed, int64(0), int64(0), int64(0), int64(1), wait}
	}
	for _, bad := range []any{reply(1, 1001), reply(1, -2), reply(0, 10), reply(1, -1)} {
		if _, err := DecodeCallReply(c, bad); !errors.Is(err, ErrReply) {
			t.Errorf("%v: %v, want ErrReply", bad, err)
		}
	}
	r, err := DecodeCallReply(c, reply(1, 1000))
	if err != nil || !r.Allowed || r.Delay != 1000 {
		t.Fatalf("a wait of the max: %+v %v", r, err)
	}
}
