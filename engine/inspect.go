package engine

import (
	"context"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

// Inspection is what one rule sees for a request, charging nothing (Engine.Inspect): the
// verdict a peek gets, and what the rule keeps beside the key.
type Inspection struct {
	RuleResult
	// BlockedUntil is the end of the penalty box's block running for the key; the zero
	// Time: none (or the rule has no box).
	BlockedUntil time.Time
	// Override is the override in force for the key; nil: none (or the rule is not
	// overridable).
	Override *Override
	// Lists are the rule's lists, and whether the key is on each.
	Lists []ListState
}

// ListState is a key's membership of one of its rule's lists.
type ListState struct {
	List   string
	Deny   bool // the rule's deny list; else its exempt list
	Member bool
}

// Inspect returns, for every rule that applies to request r, what it sees: the verdict of
// a peek (Engine.Peek: remaining, retry-after, reset-after; a blocked key is denied until
// its block's end), the block running, the override in force and the key's list
// memberships. It charges nothing. It costs one script call for the peek and one for each
// rule with a penalty box, an override or lists (OpInspect, each in its rule key's slot),
// so the reads are each atomic but not one snapshot: a change between them may show in
// one and not another. An override whose end has come is ended by the read, as a
// decision would end it.
func (e *Engine) Inspect(ctx context.Context, r dsl.Request) ([]Inspection, error) {
	d, err := e.Peek(ctx, r)
	if err != nil {
		return nil, err
	}
	rules, _, _, err := e.collect(r, 0, 0, nil, nil)
	if err != nil {
		return nil, err
	}
	out := make([]Inspection, 0, len(d.Rules))
	for _, rr := range d.Rules {
		in := Inspection{RuleResult: rr}
		for _, p := range rules {
			if p.policy.Name != rr.Policy || p.rule.Name != rr.Rule || p.call.Key != rr.Key || !p.rule.HasFurtherKeys() {
				continue
			}
			if err := e.inspectFurther(ctx, p, &in); err != nil {
				return nil, err
			}
			break
		}
		out = append(out, in)
	}
	return out, nil
}

// inspectFurther fills in what rule p keeps beside its key.
func (e *Engine) inspectFurther(ctx context.Context, p pending, in *Inspection) error {
	c := algorithms.Call{Op: algorithms.OpInspect, Now: algorithms.ServerTime, Rules: []algorithms.Rule{p.call}}
	c.Rules[0].Cost = 0
	if p.client {
		c.Now, c.Skew = e.clock().UnixMicro(), p.policy.ClockSkew
	}
	rep, _, err := e.call(ctx, &c)
	if err != nil {
		return err
	}
	f := rep.Further
	if f == nil {
		return nil
	}
	if f.BlockEnd > 0 {
		in.BlockedUntil = time.UnixMicro(f.BlockEnd)
	}
	if o := f.Override; o != nil {
		a := p.call.Algorithm
		in.Override = &Override{
			Policy: p.policy.Name, Rule: p.rule.Name, Key: p.call.Key,
			Figures: a.DescribeParams(o.Params), Own: a.DescribeParams(p.call.Params), Limit: a.Describe(o.Params),
		}
		if o.Until > 0 {
			in.Override.Until = time.UnixMicro(o.Until)
		}
	}
	if l := p.rule.Lists; l.Exempt != "" {
		in.Lists = append(in.Lists, ListState{List: l.Exempt, Member: f.Exempt})
	}
	if l := p.rule.Lists; l.Deny != "" {
		in.Lists = append(in.Lists, ListState{List: l.Deny, Deny: true, Member: f.Deny})
	}
	return nil
}
