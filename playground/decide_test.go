package playground

import (
	"strings"
	"testing"
	"time"
)

// twoAMinute is a policy whose limit three requests reach.
var twoAMinute = map[string]string{"p.hcl": `policy "api" {
  rule "per_user" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 2
    window    = "1m"
  }
}
`}

func TestSessionDecide(t *testing.T) {
	var s Session
	alice := map[string]string{"user": "alice"}
	two := int64(2)
	steps := []struct {
		name    string
		files   map[string]string
		req     DecideRequest
		reset   bool // Reset before the request
		allowed bool
		decider string
		remain  int64
		fresh   bool
		at      time.Duration
		err     string
	}{
		{name: "first", req: DecideRequest{Attrs: alice}, allowed: true, remain: 1, fresh: true},
		{name: "second", req: DecideRequest{Attrs: alice}, allowed: true, remain: 0},
		{name: "third denied", req: DecideRequest{Attrs: alice}, decider: "api.per_user", remain: 0},
		{name: "another key", req: DecideRequest{Attrs: map[string]string{"user": "bob"}, Cost: &two}, allowed: true, remain: 0},
		{name: "a bad time", req: DecideRequest{Attrs: alice, At: "soon"}, err: `time "soon"`},
		{name: "the next window", req: DecideRequest{Attrs: alice, At: "1m"}, allowed: true, remain: 1, at: time.Minute},
		{name: "the time kept", req: DecideRequest{Attrs: alice}, allowed: true, remain: 0, at: time.Minute},
		{name: "the clock back", req: DecideRequest{Attrs: alice, At: "59s"}, err: "the clock does not go back"},
		{name: "reset", reset: true, req: DecideRequest{Attrs: alice}, allowed: true, remain: 1, fresh: true},
		{name: "a cost too big", req: DecideRequest{Attrs: alice, Cost: &two}, decider: "api.per_user", remain: 1},
		{name: "changed files", files: map[string]string{"p.hcl": strings.Replace(twoAMinute["p.hcl"], "limit     = 2", "limit     = 3", 1)},
			req: DecideRequest{Attrs: alice}, allowed: true, remain: 2, fresh: true},
	}
	for _, st := range steps {
		files := twoAMinute
		if st.files != nil {
			files = st.files
		}
		if st.reset {
			s.Reset()
		}
		r := s.Decide(files, st.req)
		if st.err != "" {
			if !strings.Contains(r.Error, st.err) {
				t.Errorf("%s: error %q, want one with %q", st.name, r.Error, st.err)
			}
			continue
		}
		if r.Error != "" {
			t.Errorf("%s: error %q", st.name, r.Error)
			continue
		}
		if r.Allowed != st.allowed || r.Decider != st.decider || r.Fresh != st.fresh || r.At != int64(st.at) || len(r.Rules) != 1 || r.Rules[0].Remaining != st.remain {
			t.Errorf("%s: %+v; want allowed %v, decider %q, fresh %v, at %v, one rule with %d remaining", st.name, r, st.allowed, st.decider, st.fresh, st.at, st.remain)
			continue
		}
		if x := r.Rules[0]; x.Policy != "api" || x.Rule != "per_user" || x.Limit == 0 || (!x.Allowed && (x.RetryAfter <= 0 || r.RetryAfter != x.RetryAfter)) {
			t.Errorf("%s: the rule %+v, retry-after %d", st.name, x, r.RetryAfter)
		}
	}
}

func TestSessionDecideErrors(t *testing.T) {
	var s Session
	neg := int64(-1)
	r := s.Decide(twoAMinute, DecideRequest{Cost: &neg})
	if r.Error != "cost -1 is negative" {
		t.Errorf("a negative cost: error %q", r.Error)
	}
	r = s.Decide(map[string]string{"p.hcl": `policy "api" { rule "r" { algorithm = "fixed_windwo" } }`}, DecideRequest{})
	if r.Error == "" || len(r.Diagnostics) == 0 || r.Diagnostics[0].File != "p.hcl" || r.Diagnostics[0].Line != 1 {
		t.Errorf("files with an error: %+v; want the error and its diagnostics", r)
	}
	// No rule applies: allowed, from no rule.
	r = s.Decide(map[string]string{"p.hcl": `policy "api" {
  match = request.path == "/x"
  rule "r" {
    algorithm = "fixed_window"
    key       = "k"
    limit     = 1
    window    = "1s"
  }
}
`}, DecideRequest{Attrs: map[string]string{"path": "/y"}})
	if r.Error != "" || !r.Allowed || len(r.Rules) != 0 || r.Source != "no_rules" {
		t.Errorf("a request no rule applies to: %+v", r)
	}
}
