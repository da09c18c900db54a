package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

// Override is one key's override of an overridable rule, as the engine reads it.
type Override struct {
	Policy, Rule string
	// Key is the rule's key for the request (its Redis key).
	Key string
	// Figures are the parameters the rule takes for the key, in the words of
	// algorithms.Algorithm.DescribeParams ("rate=100/s burst=200"); Own the rule's own.
	Figures, Own string
	// Limit describes Figures as a limit ("100/s, burst 200").
	Limit string
	// Until is when the override ends; the zero Time: when it is cleared.
	Until time.Time
}

// ErrNotOverridable reports an override asked of a rule that takes none, or of a rule that
// does not apply to the request that names the key.
var ErrNotOverridable = errors.New("rule takes no override for this request")

// SetOverride gives the key that rule ruleName of policy policyName has for request r the
// figures set (parameter name to value, written as in a policy: "rate": "100/s",
// "burst": "200"; the rule's other parameters keep theirs) until until (the zero Time:
// until cleared). The override lives in the backend beside the key's state, and every
// decision of the key reads it in the same script call, so no decision sees half of a
// change. The key's state is converted to the new figures in the same call that writes
// them (algorithms.Override says how each algorithm carries what it counted). A rule must
// be overridable (overridable = true) and apply to r.
func (e *Engine) SetOverride(ctx context.Context, r dsl.Request, policyName, ruleName string, set map[string]string, until time.Time) error {
	p, err := e.overridable(r, policyName, ruleName)
	if err != nil {
		return err
	}
	figures, _, err := p.rule.Figures(r, set)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrRequest, err)
	}
	o := &algorithms.Override{Params: figures}
	if !until.IsZero() {
		if !until.After(e.clock()) {
			return fmt.Errorf("%w: until %s has passed", ErrRequest, until.Format(time.RFC3339Nano))
		}
		if latest := time.UnixMicro(algorithms.MaxInt); until.After(latest) {
			return fmt.Errorf("%w: until %s is past the latest instant the engine keeps, %s", ErrRequest, until.Format(time.RFC3339Nano), latest.UTC().Format(time.RFC3339))
		}
		o.Until = until.UnixMicro()
	}
	_, err = e.overrideCall(ctx, p, func(c *algorithms.Call) { c.Override = o })
	return err
}

// ClearOverride removes the override of the key rule ruleName of policy policyName has for
// request r, converting the key's state back to the rule's own figures. Clearing a key
// with none is not an error.
func (e *Engine) ClearOverride(ctx context.Context, r dsl.Request, policyName, ruleName string) error {
	p, err := e.overridable(r, policyName, ruleName)
	if err != nil {
		return err
	}
	_, err = e.overrideCall(ctx, p, func(*algorithms.Call) {})
	return err
}

// Override returns the override in force for the key rule ruleName of policy policyName
// has for request r, or nil when it has none. An override whose end has come is ended by
// the read, as a decision would end it.
func (e *Engine) Override(ctx context.Context, r dsl.Request, policyName, ruleName string) (*Override, error) {
	p, err := e.overridable(r, policyName, ruleName)
	if err != nil {
		return nil, err
	}
	rep, err := e.overrideCall(ctx, p, func(c *algorithms.Call) { c.Read = true })
	if err != nil || rep.Override == nil {
		return nil, err
	}
	a := p.call.Algorithm
	o := &Override{
		Policy: p.policy.Name, Rule: p.rule.Name, Key: p.call.Key,
		Figures: a.DescribeParams(rep.Override.Params), Own: a.DescribeParams(p.call.Params),
		Limit: a.Describe(rep.Override.Params),
	}
	if rep.Override.Until > 0 {
		o.Until = time.UnixMicro(rep.Override.Until)
	}
	return o, nil
}

// overridable returns the pending call of rule ruleName of policy policyName for r.
func (e *Engine) overridable(r dsl.Request, policyName, ruleName string) (pending, error) {
	rules, _, _, err := e.collect(r, 1, 0, nil, nil)
	if err != nil {
		return pending{}, err
	}
	for _, p := range rules {
		if p.policy.Name == policyName && p.rule.Name == ruleName {
			if !p.rule.Overridable {
				return pending{}, fmt.Errorf("%w: policy %q rule %q is not overridable (add overridable = true to it)", ErrNotOverridable, policyName, ruleName)
			}
			return p, nil
		}
	}
	return pending{}, fmt.Errorf("%w: policy %q has no rule %q that applies to the request", ErrNotOverridable, policyName, ruleName)
}

// overrideCall runs an OpOverride call for p, as set shapes it, on the engine's clock.
func (e *Engine) overrideCall(ctx context.Context, p pending, set func(*algorithms.Call)) (algorithms.Reply, error) {
	e.cache.forget(p.call.Key)
	c := algorithms.Call{Op: algorithms.OpOverride, Now: algorithms.ServerTime, Rules: []algorithms.Rule{p.call}}
	c.Rules[0].Cost = 0
	if p.client {
		c.Now, c.Skew = e.clock().UnixMicro(), p.policy.ClockSkew
	}
	set(&c)
	rep, _, err := e.call(ctx, &c)
	return rep, err
}
