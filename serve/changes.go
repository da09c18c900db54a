package serve

import (
	"fmt"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
)

// ChangeKind says what a reload does to a rule's counters.
type ChangeKind uint8

const (
	// Kept: same policy, rule name, algorithm, key and shard expressions, so the same Redis
	// keys: the counters carry over and are read against the new parameters (a raised
	// limit applies to what was already counted).
	Kept ChangeKind = iota
	// Reset: the algorithm (for a plugin, its source), the key or the shard expression
	// changed, so requests map to other keys, which start empty unless the rule ran that
	// way before and they have not expired yet; the old keys expire on their own. The
	// algorithm is part of every key (engine.AlgorithmTag), so a rule never reads state
	// another algorithm wrote, however many reloads or restarts apart.
	Reset
	// Added: a rule that was not there; its counters start empty.
	Added
	// Removed: a rule that is gone, alone or with its policy; its keys expire on their own.
	// Server.Reload refuses a removal unless Config.AllowRemoval is set.
	Removed
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
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// Change is what a reload does to one rule's counters.
type Change struct {
	Policy, Rule string
	Kind         ChangeKind
	Why          string
}

// Changes compares two loaded policy sets rule by rule, in the new set's order, then the
// removed rules. A rule's counters live under rl:[{shard}:]<policy>:<rule>:<algorithm>:<key>
// (engine/keys.go), so they carry over exactly when those parts render the same: same
// policy and rule names, same algorithm tag (a built-in's name; a plugin's name and source
// hash), same key and shard expressions (compared as written, spacing aside).
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
			c := Change{Policy: p.Name, Rule: r.Name}
			switch {
			case !ok:
				c.Kind, c.Why = Added, "a new rule: its counters start empty"
			case o.r.Algorithm.Name != r.Algorithm.Name:
				c.Kind, c.Why = Reset, fmt.Sprintf("the algorithm changed (%s → %s): new keys, counters start empty", o.r.Algorithm.Name, r.Algorithm.Name)
			case engine.AlgorithmTag(o.r.Algorithm) != engine.AlgorithmTag(r.Algorithm):
				c.Kind, c.Why = Reset, fmt.Sprintf("the plugin's source changed (%s → %s): new keys, counters start empty",
					engine.AlgorithmTag(o.r.Algorithm), engine.AlgorithmTag(r.Algorithm))
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
	kept := map[string]bool{}
	for _, p := range cur.Policies {
		kept[p.Name] = true
	}
	for _, p := range old.Policies {
		for _, r := range p.Rules {
			if _, gone := before[[2]string{p.Name, r.Name}]; gone {
				why := "the rule is gone: its keys expire on their own"
				if !kept[p.Name] {
					why = "the policy is gone: its keys expire on their own"
				}
				out = append(out, Change{Policy: p.Name, Rule: r.Name, Kind: Removed, Why: why})
			}
		}
	}
	return out
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
