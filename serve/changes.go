package serve

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/rlctl/rlctl/dsl"
)

// ChangeKind says what a reload does to a rule's counters.
type ChangeKind uint8

const (
	// Kept: same policy, rule name, algorithm, key and shard expressions, so the same Redis
	// keys: the counters carry over and are read against the new parameters (a raised
	// limit applies to what was already counted).
	Kept ChangeKind = iota
	// Reset: the key or shard expression changed, so requests map to new keys whose
	// counters start empty; the old keys expire on their own.
	Reset
	// Added: a rule that was not there; its counters start empty.
	Added
	// Removed: a rule that is gone; its keys expire on their own.
	Removed
	// Conflict: the rule kept its name but changed algorithm, so the new algorithm would
	// read state the old one wrote under the same keys (a script error, or a wrong count,
	// until they expire). A reload with a conflict is refused; renaming the rule gives it
	// keys of its own.
	Conflict
)

func (k ChangeKind) String() string {
	switch k {
	case Kept:
		return "kept"
	case Reset:
		return "reset"
	case Added:
		return "added"
	case Removed:
		return "removed"
	case Conflict:
		return "conflict"
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// Change is what a reload does to one rule's counters.
type Change struct {
	Policy, Rule string
	Kind         ChangeKind
	Why          string
	rng          hcl.Range // the new rule's declaration (not for Removed)
}

// Changes compares two loaded policy sets rule by rule, in the new set's order, then the
// removed rules. A rule's counters live under rl:[{shard}:]<policy>:<rule>:<key>, so they
// carry over exactly when those parts render the same: same policy and rule names, same
// key and shard expressions (compared as written, spacing aside), same algorithm.
func Changes(old, cur *dsl.Config) []Change {
	type rule struct {
		p *dsl.Policy
		r *dsl.Rule
	}
	before := map[[2]string]rule{}
	for _, p := range old.Policies {
		for _, r := range p.Rules {
			before[[2]string{p.Name, r.Name}] = rule{p, r}
		}
	}
	var out []Change
	for _, p := range cur.Policies {
		for _, r := range p.Rules {
			id := [2]string{p.Name, r.Name}
			o, ok := before[id]
			delete(before, id)
			c := Change{Policy: p.Name, Rule: r.Name, rng: r.DeclRange}
			switch {
			case !ok:
				c.Kind, c.Why = Added, "a new rule: its counters start empty"
			case o.r.Algorithm.Name != r.Algorithm.Name:
				c.Kind = Conflict
				c.Why = fmt.Sprintf("the rule was %s and is now %s under the same name: its keys hold %s state that %s would read",
					o.r.Algorithm.Name, r.Algorithm.Name, o.r.Algorithm.Name, r.Algorithm.Name)
			case text(old, o.p.Shard) != text(cur, p.Shard):
				c.Kind, c.Why = Reset, fmt.Sprintf("the policy's shard changed (%s → %s): new keys, counters start empty", or(text(old, o.p.Shard)), or(text(cur, p.Shard)))
			case text(old, o.r.Key) != text(cur, r.Key):
				c.Kind, c.Why = Reset, fmt.Sprintf("the key changed (%s → %s): new keys, counters start empty", text(old, o.r.Key), text(cur, r.Key))
			default:
				c.Kind, c.Why = Kept, "same keys: counters carry over"
			}
			out = append(out, c)
		}
	}
	for _, p := range old.Policies {
		for _, r := range p.Rules {
			if _, gone := before[[2]string{p.Name, r.Name}]; gone {
				out = append(out, Change{Policy: p.Name, Rule: r.Name, Kind: Removed, Why: "the rule is gone: its keys expire on their own"})
			}
		}
	}
	return out
}

// conflicting turns the conflicts among changes into errors at the rules' declarations.
func conflicting(cfg *dsl.Config, changes []Change) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, c := range changes {
		if c.Kind != Conflict {
			continue
		}
		rng := c.rng
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("Rule %q of policy %q changed algorithm", c.Rule, c.Policy),
			Detail: c.Why + ". Give the rule a new name so that its counters start empty under keys of their own " +
				"(the old keys expire on their own), or keep the old algorithm.",
			Subject: &rng,
		})
	}
	return diags
}

// text is an expression as written, spacing collapsed; "" for none.
func text(cfg *dsl.Config, e *dsl.Expr) string {
	if e == nil {
		return ""
	}
	return cfg.Source(e.Range())
}

func or(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
