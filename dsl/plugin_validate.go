package dsl

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/luahost"
)

// validateWire checks wire parameters w of a rule of algorithm a as every request would:
// a's own Validate, the figures its guarantee takes from them, and for a plugin its Lua
// validate(p), run through the engine script on luahost. A plugin that refuses a rule's
// constant parameters then fails at load time, not on every request.
func (l *loader) validateWire(a *algorithms.Algorithm, w []int64) error {
	if err := a.Validate(w); err != nil {
		return err
	}
	if _, _, err := a.TermsOf(w); err != nil {
		return err
	}
	if _, err := a.AlsoTermsOf(w); err != nil {
		return err
	}
	if isBuiltin(a.Name) || a.Source == "" || !strings.Contains(a.Source, "validate") {
		return nil
	}
	return l.pluginRefuses(a, w)
}

// pluginRefuses runs a plugin's validate(p) on w: a peek on an empty key, which the
// dispatcher refuses with "RLCTL rule 1: <validate's message>" before any check runs.
// Any other failure is not validate's and is left to verify.
func (l *loader) pluginRefuses(a *algorithms.Algorithm, w []int64) error {
	if l.validators == nil {
		l.validators = map[*algorithms.Algorithm]*validator{}
	}
	v, ok := l.validators[a]
	if !ok {
		v = newValidator(a)
		l.validators[a] = v
	}
	if v == nil {
		return nil
	}
	c := algorithms.Call{Op: algorithms.OpCheck, Now: 1, Rules: []algorithms.Rule{{Key: "rl:validate", Algorithm: a, Params: w, Lease: "validate"}}}
	argv, err := c.Argv()
	if err != nil {
		return err
	}
	_, err = v.host.EvalSHA(context.Background(), v.sha, c.Keys(), argv)
	var reply *luahost.ErrorReply
	if errors.As(err, &reply) {
		if msg, found := strings.CutPrefix(reply.Msg, "RLCTL rule 1: "); found {
			return errors.New(a.Name + "'s validate refuses them: " + msg)
		}
	}
	return nil
}

// validator is a host with one plugin's engine script loaded.
type validator struct {
	host *luahost.Host
	sha  string
}

// newValidator returns a validator for a, or nil when its script does not load (the
// plugin checks report why).
func newValidator(a *algorithms.Algorithm) *validator {
	s, err := algorithms.Assemble([]*algorithms.Algorithm{a})
	if err != nil {
		return nil
	}
	h := luahost.New(luahost.WithTimeout(0), luahost.WithInstructionLimit(1_000_000), luahost.WithClock(luahost.NewManualClock(time.Unix(0, 0))))
	sha, err := h.Load(s.Source)
	if err != nil {
		return nil
	}
	return &validator{host: h, sha: sha}
}
