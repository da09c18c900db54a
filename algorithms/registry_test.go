package algorithms

import (
	"regexp"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/lua"
)

// luaParams reads the params table an algorithm's Lua declares: "params = {'nat', 'pos'}".
var luaParams = regexp.MustCompile(`(?m)^params = \{([^}]*)\}`)

// TestLuaKindsMatchRegistry: every built-in's Lua declares, per wire value, the kind its
// registry entry gives (Param.luaKind), so the dispatcher holds each value to the same
// lower bound as Validate: 'nat' exactly where a parameter may be 0.
func TestLuaKindsMatchRegistry(t *testing.T) {
	for _, a := range builtin {
		m := luaParams.FindStringSubmatch(a.Source)
		if m == nil {
			t.Fatalf("%s.lua declares no params table", a.Name)
		}
		var want []string
		for _, p := range a.Params {
			for _, k := range p.luaKind() {
				want = append(want, "'"+k+"'")
			}
		}
		if got := strings.Join(strings.Fields(strings.ReplaceAll(m[1], ",", " ")), ", "); got != strings.Join(want, ", ") {
			t.Errorf("%s.lua: params = {%s}, the registry gives {%s}", a.Name, got, strings.Join(want, ", "))
		}
	}
}

// protocolKinds is the ARGV contract of Protocol: the kinds of every built-in's wire values.
// A change to it changes what callers may send, so it comes with a new Protocol (in
// wire.go and lua/prelude.lua) and a new entry here.
var protocolKinds = map[string]string{
	"5": "fixed_window nat pos; sliding_log pos pos; sliding_window nat pos; token_bucket pos pos pos; leaky_bucket pos pos pos; gcra pos pos pos; concurrency pos pos str",
	// 6: the same kinds; a rule written out may carry a penalty box (flags bit 2).
	"6": "fixed_window nat pos; sliding_log pos pos; sliding_window nat pos; token_bucket pos pos pos; leaky_bucket pos pos pos; gcra pos pos pos; concurrency pos pos str",
	// 7: the same kinds; a rule written out may be overridable (flags bit 3), and op
	// "override" sets or clears a key's override.
	"7": "fixed_window nat pos; sliding_log pos pos; sliding_window nat pos; token_bucket pos pos pos; leaky_bucket pos pos pos; gcra pos pos pos; concurrency pos pos str",
}

// TestProtocolNamesTheContract: the prelude speaks Protocol, and Protocol names the
// parameter kinds the built-ins declare, so a script whose contract changed cannot answer
// to the old version.
func TestProtocolNamesTheContract(t *testing.T) {
	if want := `local PROTOCOL = "` + Protocol + `"`; !strings.Contains(lua.Source("prelude.lua"), want) {
		t.Fatalf("lua/prelude.lua does not say %s (algorithms.Protocol)", want)
	}
	var parts []string
	for _, a := range builtin {
		kinds := []string{a.Name}
		for _, p := range a.Params {
			kinds = append(kinds, p.luaKind()...)
		}
		parts = append(parts, strings.Join(kinds, " "))
	}
	got := strings.Join(parts, "; ")
	if want, ok := protocolKinds[Protocol]; !ok || got != want {
		t.Fatalf("protocol %s: the built-ins' parameter kinds are\n\t%s\nwant\n\t%s\nA change to what a call may send is a new protocol: raise Protocol and PROTOCOL, and add it to protocolKinds.", Protocol, got, want)
	}
}

// TestParamLowerBound: a parameter's lower bound is its declaration (Param.Zero), held by
// Validate, TermsOf and Share alike: fixed_window's and sliding_window's limit may be 0,
// every other numeric value is at least 1, and no value is negative.
func TestParamLowerBound(t *testing.T) {
	for _, a := range builtin {
		ok := make([]int64, a.WireLen())
		for i := range ok {
			ok[i] = 1000
		}
		if err := a.Validate(ok); err != nil {
			t.Fatalf("%s %v: %v", a.Name, ok, err)
		}
		for i := range ok {
			p, _ := a.paramAt(i)
			if p.Kind == Lease {
				continue
			}
			w := append([]int64(nil), ok...)
			w[i] = 0
			err := a.Validate(w)
			zero := a.Name == "fixed_window" || a.Name == "sliding_window"
			if zero && i == 0 {
				if err != nil {
					t.Errorf("%s: a limit of 0 refused: %v", a.Name, err)
				}
				if tm, has, err := a.TermsOf(w); err != nil || !has || tm.Amount != 0 {
					t.Errorf("%s %v: terms %+v, %v, %v; want an amount of 0", a.Name, w, tm, has, err)
				}
				if s, err := a.Share(w, 3); err != nil || s[0] != 0 {
					t.Errorf("%s %v shared among 3: %v, %v; want a limit of 0", a.Name, w, s, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), "must be positive") {
				t.Errorf("%s: value %d = 0 accepted or misreported: %v", a.Name, i+1, err)
			}
			w[i] = -1
			if err := a.Validate(w); err == nil {
				t.Errorf("%s: value %d = -1 accepted", a.Name, i+1)
			}
		}
	}
	fw, _ := Lookup("fixed_window")
	if s, err := fw.Share([]int64{2, 1000}, 3); err != nil || s[0] != 1 {
		t.Errorf("fixed_window limit 2 shared among 3: %v, %v; want 1 each", s, err)
	}
}
