package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/cli"
	"github.com/rlctl/rlctl/serve"
)

var cmdCompile = &command{
	name:  "compile",
	args:  "[-json] [-from OLD] FILE|DIR...",
	short: "show the plan: algorithms, parameters, keys, ARGV layout, script",
	long: `Compile validates policies and prints what the engine will run: for each rule its
algorithm, resolved parameters, the Redis key layout (with the cluster hash tag when the
policy has a shard), the rule's slice of the script's ARGV and its worst case on Redis (the
commands and elements one call may touch, the bytes and entries one key may hold, and
whether they pass the policy's budget); then the engine script's SHA1, its algorithms and
the Redis commands it may call.

With -from, compile also says what replacing the policies at OLD (a file or directory: the
ones running now) with these does to each rule's counters, as rlctl serve reloads them or a
deployment switches: kept (same policy and rule names, algorithm, key and shard, so the same
Redis keys: the counters carry over and are read against the new parameters), reset (the
algorithm, key or shard changed: new keys, counters start empty), added, or removed (its
keys expire on their own; rlctl serve refuses a reload that removes a rule or a policy
unless it runs with -allow-removal).

  -json      print the plan as JSON
  -from OLD  compare with the policies at OLD
`,
	run: func(e *env, args []string) error {
		fs := flags("compile")
		asJSON := fs.Bool("json", false, "")
		from := fs.String("from", "", "")
		if err := parse(e, fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			return errUsage
		}
		cfg, diags := load(e, fs.Args())
		if cfg == nil {
			if *asJSON {
				if err := cli.WriteLoadErrorJSON(e.stdout, diags, nil); err != nil {
					return err
				}
			}
			return errFailed
		}
		plan, err := engine.Compile(cfg)
		if err != nil {
			return err
		}
		out := describe(cfg, plan)
		removed := false
		if *from != "" {
			old, diags := load(e, []string{*from})
			if old == nil {
				if *asJSON {
					if err := cli.WriteLoadErrorJSON(e.stdout, diags, map[string]any{"from": *from}); err != nil {
						return err
					}
				}
				return errFailed
			}
			out.Changes = []changeOut{}
			for _, c := range serve.Changes(old, cfg) {
				out.Changes = append(out.Changes, changeOut{Policy: c.Policy, Rule: c.Rule, Change: c.Kind.String(), Why: c.Why})
				removed = removed || c.Kind == serve.Removed
			}
		}
		if removed {
			defer fmt.Fprintln(e.stderr, "rlctl: hint: rlctl serve refuses a reload that removes a rule or a policy unless it runs with -allow-removal")
		}
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetEscapeHTML(false) // expressions hold && and <, which are not HTML
			enc.SetIndent("", "  ")
			if err := enc.Encode(out); err != nil {
				return err
			}
		} else {
			printPlan(e, out, *from)
		}
		return nil
	},
}

type planOut struct {
	Script   scriptOut   `json:"script"`
	Policies []policyOut `json:"policies"`
	// Changes, with -from: per rule, what replacing the old policies does to its counters.
	Changes []changeOut `json:"changes,omitempty"`
}

type changeOut struct {
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
	Change string `json:"change"` // kept, reset, added, removed
	Why    string `json:"why"`
}

type scriptOut struct {
	SHA1       string   `json:"sha1"`
	Protocol   string   `json:"protocol"`
	Algorithms []string `json:"algorithms"`
	Commands   []string `json:"commands"`
}

type policyOut struct {
	Name    string `json:"name"`
	Match   string `json:"match,omitempty"`
	Shard   string `json:"shard,omitempty"`
	OnError string `json:"on_error"`
	// LocalShare is the policy's local_share when above 1: the instances among which the
	// on_error = "local" fallback divides every rule's limit.
	LocalShare int64     `json:"local_share,omitempty"`
	Clock      string    `json:"clock"`
	Rules      []ruleOut `json:"rules"`
}

type ruleOut struct {
	Name      string `json:"name"`
	Algorithm string `json:"algorithm"`
	When      string `json:"when,omitempty"`
	Cost      string `json:"cost"`
	Shadow    bool   `json:"shadow,omitempty"`
	// BlockFor and BlockMax are the rule's penalty box (block_for, block_max) as written in
	// policies ("1m"); absent without one.
	BlockFor string `json:"block_for,omitempty"`
	BlockMax string `json:"block_max,omitempty"`
	// LeaseSize and LeaseFor are the rule's quota lease (lease_size, lease_for as written,
	// "" for the window); absent without one.
	LeaseSize int64  `json:"lease_size,omitempty"`
	LeaseFor  string `json:"lease_for,omitempty"`
	// Limit is the rule's limit in words, as simulate and verify show it ("20/h, burst
	// 5"); "" when a parameter is evaluated per request.
	Limit  string     `json:"limit,omitempty"`
	Params []paramOut `json:"params"`
	Key    string     `json:"key"`
	Argv   []string   `json:"argv"`
	// WorstCase is the rule's worst case on Redis; absent when a parameter's values are
	// not known at load time or a plugin declares none, and NoWorstCase says which.
	WorstCase   *worstOut `json:"worst_case,omitempty"`
	NoWorstCase string    `json:"no_worst_case,omitempty"`
}

// worstOut is a rule's worst case on Redis (algorithms.Work) and the budget it is held to.
type worstOut struct {
	Commands     int64  `json:"commands"`      // per call
	Elements     int64  `json:"elements"`      // touched per call
	Steps        int64  `json:"steps"`         // commands + elements
	BudgetSteps  int64  `json:"budget_steps"`  // the policy's budget.work
	KeyType      string `json:"key_type"`      // string, hash, list or zset
	Entries      int64  `json:"entries"`       // held per key
	MemoryBytes  int64  `json:"memory_bytes"`  // per key, less its name
	BudgetMemory int64  `json:"budget_memory"` // the policy's budget.memory
	Why          string `json:"why,omitempty"` // why there are no figures, when there are none
}

type paramOut struct {
	Name  string  `json:"name"`
	Wire  []int64 `json:"wire,omitempty"` // constant wire values
	Expr  string  `json:"expr,omitempty"` // evaluated per request
	Value string  `json:"value"`          // for people
}

func describe(cfg *dsl.Config, plan *engine.Plan) planOut {
	s := plan.Script()
	out := planOut{Script: scriptOut{SHA1: s.SHA1, Protocol: algorithms.Protocol, Commands: s.Commands()}}
	for _, a := range s.Algorithms {
		out.Script.Algorithms = append(out.Script.Algorithms, a.Name)
	}
	src := func(e *dsl.Expr) string {
		if e == nil {
			return ""
		}
		return cfg.Source(e.Range())
	}
	for _, p := range cfg.Policies {
		po := policyOut{Name: p.Name, Match: src(p.Match), Shard: src(p.Shard), OnError: or(p.OnError, dsl.OnErrorAllow), Clock: or(p.Clock, dsl.ClockServer)}
		if p.LocalShare > 1 {
			po.LocalShare = p.LocalShare
		}
		for _, r := range p.Rules {
			ro := ruleOut{Name: r.Name, Algorithm: r.Algorithm.Name, When: src(r.When), Cost: or(src(r.Cost), "1"), Shadow: r.Shadow}
			argv := []string{r.Algorithm.Name, "<cost>", "<flags: 1=shadow>"}
			if r.LeaseSize > 0 {
				ro.LeaseSize = r.LeaseSize
				if r.LeaseFor > 0 {
					ro.LeaseFor = algorithms.FormatDuration(r.LeaseFor)
				}
			}
			if b := r.Box; b.For > 0 {
				ro.BlockFor = algorithms.FormatDuration(b.For)
				if b.Escalates() {
					ro.BlockMax = algorithms.FormatDuration(b.Max)
				}
				argv = []string{r.Algorithm.Name, "<cost>", "<flags: 2=box, +1=shadow>", fmt.Sprint(b.For), fmt.Sprint(b.Max)}
			}
			var wire []int64 // nil once a parameter is evaluated per request
			for _, pr := range r.Params {
				if pr.Const == nil {
					wire = nil
					break
				}
				wire = append(wire, pr.Const...)
			}
			if wire != nil {
				ro.Limit = r.Describe(wire)
			}
			for _, pr := range r.Params {
				po := paramOut{Name: pr.Name}
				switch {
				case pr.Kind == algorithms.Lease:
					po.Value = "a fresh lease id per request"
					argv = append(argv, "<lease id>")
				case pr.Const != nil:
					po.Wire, po.Value = pr.Const, human(pr.Kind, pr.Const)
					for _, v := range pr.Const {
						argv = append(argv, fmt.Sprint(v))
					}
				default:
					po.Expr = src(pr.Expr)
					po.Value = "per request: " + po.Expr
					argv = append(argv, "<"+pr.Name+">")
				}
				ro.Params = append(ro.Params, po)
			}
			key := "rl:"
			if p.Shard != nil {
				key += "{" + keyPart(cfg, p.Shard) + "}:"
			}
			id := p.Name + ":" + r.Name + ":" + engine.AlgorithmTag(r.Algorithm) + ":" + keyPart(cfg, r.Key)
			if len(r.Algorithm.Keys) > 0 || r.Box.For > 0 {
				// Further keys (a plugin's, a box): the identity in braces (see engine's key
				// layout).
				id = "{" + id + "}"
			}
			ro.Key = key + id
			ro.Argv = argv
			switch w := r.Work; {
			case w != nil:
				ro.WorstCase = &worstOut{Commands: w.Commands, Elements: w.Elements, Steps: w.Steps(), BudgetSteps: p.Budget.Work,
					KeyType: w.Type.String(), Entries: w.Entries, MemoryBytes: w.Memory, BudgetMemory: p.Budget.Memory}
			case r.Algorithm.Complexity.Of == nil:
				ro.NoWorstCase = "not declared: the algorithm has no work block"
			default:
				ro.NoWorstCase = "not known: a parameter is computed per request"
			}
			po.Rules = append(po.Rules, ro)
		}
		out.Policies = append(out.Policies, po)
	}
	return out
}

// keyPart shows a shard or key in the key layout: a constant as the text the engine
// writes, when it writes it unescaped (engine/keys.go), and anything read from the
// request as its source in angle brackets.
func keyPart(cfg *dsl.Config, e *dsl.Expr) string {
	if len(e.Attrs()) == 0 {
		if v, err := e.String(noRequest{}); err == nil && plainKeyPart(v) {
			return v
		}
	}
	return "<" + cfg.Source(e.Range()) + ">"
}

// noRequest is a request without attributes, for evaluating constants.
type noRequest struct{}

func (noRequest) Attr(string) string { return "" }

// plainKeyPart reports whether the engine writes v in a key as it is: printable ASCII
// without the characters it escapes, short enough not to be hashed, and neither the empty
// shard's "" nor its "-".
func plainKeyPart(v string) bool {
	if v == "" || v == "-" || len(v) > 128 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x21 || c > 0x7e || strings.IndexByte("{}%#", c) >= 0 {
			return false
		}
	}
	return true
}

// human is a constant parameter value as simulate and verify write it: 20/h, 10m, 5.
func human(k algorithms.Kind, w []int64) string {
	switch k {
	case algorithms.Duration:
		return algorithms.FormatDuration(w[0])
	case algorithms.Rate:
		return algorithms.FormatRate(w[0], w[1])
	}
	return fmt.Sprint(w[0])
}

// over says that a figure passes its budget, or nothing.
func over(past bool, budget string) string {
	if past {
		return ", past the budget of " + budget
	}
	return ""
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func printPlan(e *env, p planOut, from string) {
	// Every value starts in one column, one space after the longest label.
	type line struct{ indent, label, value string } // no label: a heading
	var lines []line
	heading := func(format string, args ...any) { lines = append(lines, line{value: fmt.Sprintf(format, args...)}) }
	attr := func(indent, label, value string) { lines = append(lines, line{indent, label, value}) }
	for _, po := range p.Policies {
		heading("policy %s", po.Name)
		if po.Match != "" {
			attr("  ", "match", po.Match)
		}
		if po.Shard != "" {
			attr("  ", "shard", po.Shard+" (one hash slot per value: one atomic call on a cluster)")
		}
		if po.LocalShare > 1 {
			attr("  ", "on_error", fmt.Sprintf("%s (local_share %d: each instance falling back keeps 1/%d of every limit)", po.OnError, po.LocalShare, po.LocalShare))
		} else {
			attr("  ", "on_error", po.OnError)
		}
		attr("  ", "clock", po.Clock)
		for _, r := range po.Rules {
			shadow := ""
			if r.Shadow {
				shadow = " (shadow: counted, never enforced)"
			}
			limit := ""
			if r.Limit != "" {
				limit = " " + r.Limit
			}
			heading("  rule %s: %s%s%s", r.Name, r.Algorithm, limit, shadow)
			if r.When != "" {
				attr("    ", "when", r.When)
			}
			attr("    ", "cost", r.Cost)
			for _, pr := range r.Params {
				attr("    ", pr.Name, pr.Value)
			}
			if r.BlockFor != "" {
				block := r.BlockFor + " after a denial"
				if r.BlockMax != "" {
					block += ", twice the last block up to " + r.BlockMax + " on a repeat offence"
				}
				attr("    ", "block", block)
			}
			if r.LeaseSize > 0 {
				hold := "until its window ends"
				if r.LeaseFor != "" {
					hold = "for at most " + r.LeaseFor
				}
				attr("    ", "lease", fmt.Sprintf("slices of up to %d units per key and instance, each held %s", r.LeaseSize, hold))
			}
			attr("    ", "key", r.Key)
			attr("    ", "argv", strings.Join(r.Argv, " "))
			work, memory := r.NoWorstCase, r.NoWorstCase
			if w := r.WorstCase; w != nil {
				work = fmt.Sprintf("%d commands, %d elements per call at most (%d steps%s)", w.Commands, w.Elements, w.Steps, over(w.Steps > w.BudgetSteps, fmt.Sprint(w.BudgetSteps)))
				memory = fmt.Sprintf("%s per key at most, besides its name: a %s of %d %s%s", algorithms.FormatBytes(w.MemoryBytes), w.KeyType, w.Entries, cli.Plural(int(min(w.Entries, 2)), "entry", "entries"),
					over(w.MemoryBytes > w.BudgetMemory, algorithms.FormatBytes(w.BudgetMemory)))
			}
			attr("    ", "work", work)
			attr("    ", "memory", memory)
		}
	}
	heading("script %s (protocol %s)", p.Script.SHA1, p.Script.Protocol)
	attr("  ", "algorithms", strings.Join(p.Script.Algorithms, " "))
	attr("  ", "commands", strings.Join(p.Script.Commands, " "))
	if p.Changes != nil {
		heading("counters, replacing %s", from)
		for _, c := range p.Changes {
			attr("  ", c.Change, c.Policy+"."+c.Rule+": "+c.Why)
		}
	}
	col := 0
	for _, l := range lines {
		if l.label != "" {
			col = max(col, len(l.indent)+len(l.label)+1)
		}
	}
	for _, l := range lines {
		if l.label == "" {
			fmt.Fprintln(e.stdout, l.value)
			continue
		}
		fmt.Fprintf(e.stdout, "%s%-*s%s\n", l.indent, col-len(l.indent), l.label, l.value)
	}
}
