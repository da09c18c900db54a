package playground

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
	"github.com/rlctl/rlctl/verify"
)

// DecideRequest is one request for Session.Decide.
type DecideRequest struct {
	Attrs map[string]string `json:"attrs"` // request.NAME for each NAME; a missing one is ""
	Cost  *int64            `json:"cost"`  // the request's units (AllowN's n); nil for 1
	// At is when the request arrives on the session's virtual clock, as time since the
	// session started ("0s", "1.5s", "2m"); "" for the time of the last decision. It never
	// goes back: a time before the last decision's is refused.
	At string `json:"at"`
}

// RuleDecision is one rule's verdict (engine.RuleResult). Durations are in nanoseconds;
// RetryAfter is -1 when no wait lets the request pass (its cost exceeds the rule's
// capacity).
type RuleDecision struct {
	Policy     string `json:"policy"`
	Rule       string `json:"rule"`
	Algorithm  string `json:"algorithm"`
	Shadow     bool   `json:"shadow"` // reported, never enforced
	Allowed    bool   `json:"allowed"`
	Limit      int64  `json:"limit"`
	Remaining  int64  `json:"remaining"`
	RetryAfter int64  `json:"retry_after_ns"`
	ResetAfter int64  `json:"reset_after_ns"`
	Cost       int64  `json:"cost"` // what the rule was charged: the units times its cost
	Key        string `json:"key"`  // the Redis key
}

// DecideResult is what Session.Decide decided.
type DecideResult struct {
	Allowed bool `json:"allowed"`
	// Decider is "policy.rule" of the first enforcing rule that denied; "" when allowed.
	Decider    string         `json:"decider"`
	RetryAfter int64          `json:"retry_after_ns"` // when denied, as RuleDecision's; 0 when allowed
	Source     string         `json:"source"`         // engine.Source: "redis", or "no_rules" when no rule applies
	Rules      []RuleDecision `json:"rules"`          // the rules that applied, in policy and declaration order
	At         int64          `json:"at_ns"`          // when it was decided: time since the session started
	// Fresh is true when this decision started the session's state: the first, the first
	// after Reset, or the first on changed files.
	Fresh       bool         `json:"fresh"`
	Diagnostics []Diagnostic `json:"diagnostics"`
	// Error says why nothing was decided: the files have errors ("2 problems"), the
	// request is wrong (a bad cost or time, a policy expression that fails on it), or the
	// script failed; "" when decided.
	Error string `json:"error,omitempty"`
}

// decideSteps is the most Lua instructions one decision may run: as verify's, so that a
// plugin that loops fails the decision rather than hanging the page.
const decideSteps = 1_000_000

// Session decides requests on files with the engine on an in-process Redis (luahost) and
// a virtual clock, keeping what each decision charged for the next: repeated decisions
// reach the limits. Changed files or Reset start it over: no key, the clock at 0. The
// zero Session is ready to use; it is not safe for concurrent use.
type Session struct {
	files string // the JSON of the files eng was built from; "" for none
	eng   *engine.Engine
	clock *luahost.ManualClock
	at    time.Duration // the last decision's time
}

// Reset forgets what the decisions charged and sets the clock back to 0.
func (s *Session) Reset() { *s = Session{} }

// Decide decides req on files, as engine.AllowN does, at req.At.
func (s *Session) Decide(files map[string]string, req DecideRequest) (r DecideResult) {
	r = DecideResult{Rules: []RuleDecision{}, Diagnostics: []Diagnostic{}}
	cost := int64(1)
	if req.Cost != nil {
		cost = *req.Cost
	}
	if cost < 0 {
		r.Error = fmt.Sprintf("cost %d is negative", cost)
		return r
	}
	key, err := json.Marshal(files) // sorted keys: the same files, the same text
	if err != nil {
		r.Error = err.Error()
		return r
	}
	if string(key) != s.files || s.eng == nil {
		var text strings.Builder
		cfg, ds, problems := load(&text, files)
		if r.Diagnostics, r.Error = ds, problems; problems != "" {
			s.Reset()
			return r
		}
		plan, err := engine.Compile(cfg)
		if err != nil {
			s.Reset()
			r.Error = err.Error()
			return r
		}
		clock := luahost.NewManualClock(verify.Epoch)
		host := luahost.New(luahost.WithClock(clock), luahost.WithCommands(plan.Script().Commands()...),
			luahost.WithTimeout(0), luahost.WithInstructionLimit(decideSteps))
		*s = Session{files: string(key), clock: clock,
			eng: engine.New(engine.NewLocal(host), plan, engine.WithClock(clock.Now), engine.WithTimeout(0))}
		r.Fresh = true
	}
	at := s.at
	if req.At != "" {
		if at, err = time.ParseDuration(req.At); err != nil {
			r.Error = fmt.Sprintf("time %q: want a duration such as 1s or 2m30s", req.At)
			return r
		}
		if at < s.at {
			r.Error = fmt.Sprintf("time %v is before the last decision's, %v: the clock does not go back (Reset starts it at 0)", at, s.at)
			return r
		}
	}
	s.at = at
	s.clock.Set(verify.Epoch.Add(at))
	r.At = int64(at)
	d, err := s.eng.AllowN(context.Background(), engine.Attrs(req.Attrs), cost)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Allowed, r.RetryAfter, r.Source = d.Allowed, int64(d.RetryAfter), d.Source.String()
	if d.Decider >= 0 {
		r.Decider = d.Rules[d.Decider].Policy + "." + d.Rules[d.Decider].Rule
	}
	for _, x := range d.Rules {
		r.Rules = append(r.Rules, RuleDecision{Policy: x.Policy, Rule: x.Rule, Algorithm: x.Algorithm, Shadow: x.Shadow,
			Allowed: x.Allowed, Limit: x.Limit, Remaining: x.Remaining, RetryAfter: int64(x.RetryAfter),
			ResetAfter: int64(x.ResetAfter), Cost: x.Cost, Key: x.Key})
	}
	return r
}
