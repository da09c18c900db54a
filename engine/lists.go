package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

// ListMember is one rule's key on a runtime list (a rule's exempt or deny list).
type ListMember struct {
	Policy, Rule string
	// Key is the rule's key for the request (its Redis key); the member is
	// algorithms.ListKey(Key, list).
	Key string
	// Member is whether the key is on the list after the call.
	Member bool
}

// ErrNoList reports a list that no rule of the plan names.
var ErrNoList = errors.New("no rule names the list")

// AddToList puts on list the key that every rule naming it (exempt = list("...") or
// deny = list("...")) has for request r: the key the rule would count r under, rendered
// from r's attributes as a decision renders it, whether or not the policy's match and the
// rule's when hold for r (give the attributes the rules' keys read). Every decision of such
// a key reads its membership in the same script call that decides it, so every instance
// sees a change at its next decision. A member has no expiry: it stays until removed.
// With several rules naming the list, each key is its own call (each in its rule's cluster
// slot): a decision sees each rule's membership whole, and a change of several rules may
// be seen by a decision between them. It returns the keys, in the plan's order.
func (e *Engine) AddToList(ctx context.Context, list string, r dsl.Request) ([]ListMember, error) {
	return e.listCall(ctx, list, r, algorithms.ListAdd)
}

// RemoveFromList takes off list the keys AddToList puts on it for r. Removing a key that
// is not on the list is not an error.
func (e *Engine) RemoveFromList(ctx context.Context, list string, r dsl.Request) ([]ListMember, error) {
	return e.listCall(ctx, list, r, algorithms.ListRemove)
}

// InList reports, for every rule naming list, whether the key it has for r is on it.
func (e *Engine) InList(ctx context.Context, list string, r dsl.Request) ([]ListMember, error) {
	return e.listCall(ctx, list, r, algorithms.ListRead)
}

// Lists returns the names of the lists the plan's rules name, each once, in the plan's
// order.
func (e *Engine) Lists() []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range e.plan.policies {
		for _, ru := range p.Rules {
			for _, n := range []string{ru.Lists.Exempt, ru.Lists.Deny} {
				if n != "" && !seen[n] {
					seen[n] = true
					out = append(out, n)
				}
			}
		}
	}
	return out
}

func (e *Engine) listCall(ctx context.Context, list string, r dsl.Request, action algorithms.ListAction) ([]ListMember, error) {
	var out []ListMember
	for _, p := range e.plan.policies {
		for _, ru := range p.Rules {
			if list == "" || ru.Lists.Exempt != list && ru.Lists.Deny != list {
				continue
			}
			rule, err := e.listRule(p, ru, r)
			if err != nil {
				return out, err
			}
			c := algorithms.Call{Op: algorithms.OpList, Now: algorithms.ServerTime, List: list, Action: action, Rules: []algorithms.Rule{rule}}
			if p.Clock == dsl.ClockClient {
				c.Now, c.Skew = e.clock().UnixMicro(), p.ClockSkew
			}
			e.cache.forget(rule.Key)
			rep, _, err := e.call(ctx, &c)
			if err != nil {
				return out, err
			}
			out = append(out, ListMember{Policy: p.Name, Rule: ru.Name, Key: rule.Key, Member: rep.Member})
		}
	}
	if out == nil {
		return nil, fmt.Errorf("%w: no rule of the policies has exempt or deny = list(%q)", ErrNoList, list)
	}
	return out, nil
}

// listRule returns rule ru of policy p as a call's rule for r, of cost 0: its key as a
// decision renders it, its match and when not consulted.
func (e *Engine) listRule(p *dsl.Policy, ru *dsl.Rule, r dsl.Request) (algorithms.Rule, error) {
	shard, err := shardOf(p, r)
	if err != nil {
		return algorithms.Rule{}, err
	}
	c, _, err := e.callRule(nil, p, ru, shard, r, 0)
	if err != nil {
		return algorithms.Rule{}, err
	}
	if ru.Algorithm.HasLease() {
		c.Lease = "list"
	}
	return c, nil
}
