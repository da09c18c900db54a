package envoyconf

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/rlctl/rlctl/dsl"
)

// File is one configuration file to Import.
type File struct {
	Name string
	Src  []byte
}

// Options change how configurations are read.
type Options struct {
	// MergeDomains merges configurations of the same domain into one, as
	// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG does; without it a domain given twice is
	// an error.
	MergeDomains bool
}

// Import parses files (Parse) and translates them (Translate).
func Import(files []File, opts Options) ([]byte, error) {
	cfgs := make([]*Config, 0, len(files))
	for _, f := range files {
		c, err := Parse(f.Name, f.Src)
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, c)
	}
	return Translate(cfgs, opts)
}

// Translate writes configurations as one rlctl policy file: a policy per domain, in the
// order the domains first appear, each matching request.domain; a fixed_window rule per
// descriptor node with a rate_limit, in the order of the tree. The output is formatted and
// loads. Each configuration is checked as envoyproxy/ratelimit checks it (Check), and so
// are the domains given more than once: an error unless opts.MergeDomains, which merges
// their top levels in order (their wildcards are tried in that order, as
// envoyproxy/ratelimit tries them).
//
// What has no rlctl equivalent is an error naming the descriptor: quota_mode.
// requests_per_unit: 0 is a rule of limit 0, which admits nothing, as envoyproxy/ratelimit
// answers every such request over the limit; unlimited: true is an unlimited block, with
// the rules its replaces names.
func Translate(cfgs []*Config, opts Options) ([]byte, error) {
	var domains []*domain
	byName := map[string]*domain{}
	for _, c := range cfgs {
		if err := Check(c); err != nil {
			return nil, err
		}
		d, ok := byName[c.Domain]
		if !ok {
			d = &domain{name: c.Domain}
			byName[c.Domain] = d
			domains = append(domains, d)
		} else if !opts.MergeDomains {
			return nil, &Error{Name: c.Name, Pos: c.Pos, Msg: fmt.Sprintf("duplicate domain %q in config file (also in %s)", c.Domain, d.files[0]),
				Hint: "Give each domain one file, or merge them as envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG does (rlctl import -merge-domains)"}
		}
		d.files = append(d.files, c.Name)
		d.top = append(d.top, c.Descriptors...)
		d.cfg = c
		if len(d.files) > 1 {
			merged := &Config{Name: c.Name, Domain: c.Domain, Descriptors: d.top}
			if err := checkLevel(merged, d.top, c.Domain+"."); err != nil {
				return nil, err
			}
		}
	}
	var b strings.Builder
	b.WriteString("# Translated by rlctl import from envoyproxy/ratelimit's configuration: each descriptor\n")
	b.WriteString("# with a rate_limit is a rule whose when selects the descriptors its lookup finds and whose\n")
	b.WriteString("# key is the values the configuration leaves open. An empty value is a value of its own, as\n")
	b.WriteString("# in envoyproxy/ratelimit: rlctl validate's \"Key can be empty\" warnings say so.\n")
	policies := map[string]bool{}
	for _, d := range domains {
		t := translator{cfg: d.cfg, domain: d.name, names: map[string]bool{}}
		t.level(d.top, nil)
		if t.err != nil {
			return nil, t.err
		}
		fmt.Fprintf(&b, "\n# Domain %q (%s).\n", d.name, strings.Join(d.files, ", "))
		name := uniqueName(identifier(d.name), policies)
		if !slices.ContainsFunc(t.rules, func(r *ruleText) bool { return r.name != "" }) {
			// envoyproxy/ratelimit answers OK, with no limit, for every descriptor of a
			// domain without limits, as for a domain it does not know: so does rlctl.
			b.WriteString("# It limits nothing but limit overrides: every other request of the domain is allowed.\n")
			for _, r := range t.rules {
				b.WriteString(r.text)
			}
		} else {
			fmt.Fprintf(&b, "policy %q {\n", name)
			fmt.Fprintf(&b, "match = request.domain == %s && request[\"limit.window\"] == \"\"\n", quote(d.name))
			for _, r := range t.rules {
				b.WriteString("\n")
				b.WriteString(r.text)
				if r.name != "" {
					t.writeReplaces(&b, r)
					b.WriteString("}\n")
				}
			}
			b.WriteString("}\n")
		}
		writeOverride(&b, d.name, uniqueName(name+"_override", policies))
	}
	out, diags := dsl.Format("import.hcl", []byte(b.String()))
	if diags.HasErrors() {
		return nil, fmt.Errorf("rlctl import: the translation does not parse (a bug in rlctl import): %v", diags)
	}
	if _, diags := dsl.Parse(map[string][]byte{"import.hcl": out}); diags.HasErrors() {
		return nil, fmt.Errorf("rlctl import: the translation does not load (a bug in rlctl import): %v", diags)
	}
	return out, nil
}

type domain struct {
	name  string
	files []string
	top   []*Descriptor
	cfg   *Config // the last configuration of the domain, for errors
}

// step is one entry of a rule's path: the node the entry's lookup takes, and the nodes
// of the same key beside it (itself included, in configuration order), which decide what
// its value test must exclude.
type step struct {
	node     *Descriptor
	siblings []*Descriptor
}

// ruleText is a rule or an unlimited block as written, without its replaces and closing
// brace; or, with no name, a comment where a rule could not be.
type ruleText struct {
	text      string
	unlimited bool     // an unlimited block, which no replaces names
	name      string   // the rlctl rule's or unlimited block's
	limit     string   // the rate_limit's name, which replaces name
	replaces  []string // the rate_limits' names it replaces
}

type translator struct {
	cfg    *Config
	domain string
	rules  []*ruleText
	names  map[string]bool
	err    error
}

// level translates the nodes of one level of the tree, under path.
func (t *translator) level(ds []*Descriptor, path []step) {
	for _, d := range ds {
		if t.err != nil {
			return
		}
		var sib []*Descriptor
		for _, o := range ds {
			if o.Key == d.Key {
				sib = append(sib, o)
			}
		}
		p := append(slices.Clip(path), step{node: d, siblings: sib})
		if d.QuotaMode {
			t.err = &Error{Name: t.cfg.Name, Pos: d.Pos, Msg: fmt.Sprintf("descriptor %s: quota_mode has no rlctl equivalent", describe(p)),
				Hint: "rlctl charges every descriptor of a request together or none; remove quota_mode to limit it as a plain rate limit"}
			return
		}
		if d.RateLimit != nil {
			t.rule(p)
		}
		t.level(d.Descriptors, p)
	}
}

// Reserved are the attribute names of an Envoy descriptor's request that are not entry
// keys: an entry whose key is one of them is read by its position.
var reserved = regexp.MustCompile(`^(domain|descriptor|entries|entry\.[0-9]+|limit\.requests_per_unit|limit\.window|limit\.stats_key)$`)

// rule writes the rule of the node at the end of path.
func (t *translator) rule(path []step) {
	d := path[len(path)-1].node
	rl := d.RateLimit
	where := describe(path)
	keys := make([]string, len(path))
	for i, s := range path {
		keys[i] = s.node.Key
	}
	conds := []string{"request.descriptor == " + quote(DescriptorPath(keys))}
	var open []string
	for i, s := range path {
		ref := attrRef(keys, i)
		tests, ok := valueTest(ref, s)
		if !ok {
			// An earlier "*" takes every value: the lookup never reaches this node.
			t.rules = append(t.rules, &ruleText{text: fmt.Sprintf("# %s: no rule; an earlier wildcard \"*\" of %s takes every value first.\n", where, s.node.Key)})
			return
		}
		conds = append(conds, tests...)
		if s.node.Value == "" || s.node.wildcard() && !s.node.ShareThreshold {
			open = append(open, ref)
		}
	}
	if rl.Unlimited {
		// No limit: an unlimited block, so that serve answers as envoyproxy/ratelimit does.
		name := uniqueName(ruleName(path), t.names)
		text := fmt.Sprintf("# %s: unlimited.\nunlimited %q {\nwhen = %s\n", where, name, strings.Join(conds, " && "))
		t.rules = append(t.rules, &ruleText{text: text, name: name, unlimited: true, replaces: rl.Replaces})
		return
	}
	var key string
	switch len(open) {
	case 0:
		key = quote(where) // every value fixed: one counter
	case 1:
		key = open[0]
	default:
		parts := make([]string, len(open))
		for i, r := range open {
			parts[i] = "${" + r + "}" // keys are injective in their values (dsl.Expr)
		}
		key = `"` + strings.Join(parts, ":") + `"`
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: %d per %s", where, rl.RequestsPerUnit, strings.ToLower(rl.Unit))
	if rl.Name != "" {
		fmt.Fprintf(&b, ", named %q", rl.Name)
	}
	if d.ShadowMode {
		b.WriteString(", shadow mode")
	}
	b.WriteString(".\n")
	name := uniqueName(ruleName(path), t.names)
	fmt.Fprintf(&b, "rule %q {\n", name)
	b.WriteString("algorithm = \"fixed_window\"\n")
	fmt.Fprintf(&b, "when = %s\n", strings.Join(conds, " && "))
	fmt.Fprintf(&b, "key = %s\n", key)
	fmt.Fprintf(&b, "limit = %d\n", rl.RequestsPerUnit)
	fmt.Fprintf(&b, "window = %q\n", Units[rl.Unit])
	if d.ShadowMode {
		b.WriteString("shadow = true\n")
	}
	fmt.Fprintf(&b, "stats_key = %s\n", statsKey(t.domain, path, keys))
	t.rules = append(t.rules, &ruleText{text: b.String(), name: name, limit: rl.Name, replaces: rl.Replaces})
}

// writeOverride writes the policy of domain's descriptors that carry a limit (Envoy's
// descriptor limit override): envoyproxy/ratelimit applies the override instead of its
// configuration, in a fixed window of the override's unit, counted per descriptor.
func writeOverride(b *strings.Builder, domain, name string) {
	fmt.Fprintf(b, `
# A descriptor of domain %s that carries a limit (Envoy's limit override) is limited by it
# alone, per window and descriptor, as envoyproxy/ratelimit does.
policy %q {
match = request.domain == %s && request["limit.window"] != "" && request.entries != ""
rule "override" {
algorithm = "fixed_window"
key = "${request["limit.window"]}:${request.entries}"
limit = tonumber(request["limit.requests_per_unit"])
window = request["limit.window"]
stats_key = request["limit.stats_key"]
}
}

# Overrides as Envoy sends them, for rlctl simulate and for rlctl verify, which checks the
# override rule at the amounts and windows its traffic carries.
scenario %q {
policy = %q
duration = "3m"
traffic "per_second" {
request = { domain = %s, entries = "key=a", "limit.requests_per_unit" = "5", "limit.window" = "1s" }
rate = "10/s"
}
traffic "per_minute" {
request = { domain = %s, entries = "key=b", "limit.requests_per_unit" = "100", "limit.window" = "1m" }
rate = "4/s"
}
expect {
half_per_second = denied_fraction("per_second") == 0.5
hundred_a_minute = allowed("per_minute") == 300
}
}
`, quote(domain), name, quote(domain), name, name, quote(domain), quote(domain))
}

// writeReplaces writes r's replaces: the rules of the domain whose rate_limit has a name
// r's replaces lists (envoyproxy/ratelimit replaces every limit of that name, and none
// when no limit has it).
func (t *translator) writeReplaces(b *strings.Builder, r *ruleText) {
	var names []string
	for _, n := range r.replaces {
		for _, o := range t.rules {
			if o.name != "" && !o.unlimited && o != r && o.limit == n && !slices.Contains(names, o.name) {
				names = append(names, o.name)
			}
		}
	}
	if len(names) > 0 {
		fmt.Fprintf(b, "replaces = %s\n", list(names))
	}
}

// attrRef is the reference to the value of entry i of a descriptor with keys: by its key
// when no other entry has that key and it is not a reserved name, else by position.
func attrRef(keys []string, i int) string {
	k := keys[i]
	if reserved.MatchString(k) || slices.Index(keys, k) != i || slices.Index(keys[i+1:], k) >= 0 {
		return fmt.Sprintf("request[%s]", quote("entry."+strconv.Itoa(i+1)))
	}
	if hclIdent.MatchString(k) {
		return "request." + k
	}
	return fmt.Sprintf("request[%s]", quote(k))
}

// valueTest is what a descriptor's entry value must satisfy for envoyproxy/ratelimit's
// lookup to take s.node among its siblings: its exact value; or its wildcard, unless the
// value is another sibling's exact value or an earlier wildcard matches it first (the
// pattern's own text is its exact value, whatever matches it); or, for the key alone, no
// sibling's value and no wildcard. It leaves out the tests that cannot change the outcome.
// ok is false when no value reaches the node.
func valueTest(ref string, s step) (tests []string, ok bool) {
	n := s.node
	switch {
	case n.Value != "" && !n.wildcard():
		return []string{ref + " == " + quote(n.Value)}, true
	case n.wildcard():
		var exact, earlier []string
		before := true
		for _, o := range s.siblings {
			if o == n {
				before = false
				continue
			}
			if o.Value != "" && dsl.Glob(o.Value, n.Value) {
				exact = append(exact, o.Value)
			}
			if before && o.wildcard() && mayOverlap(o.Value, n.Value) {
				earlier = append(earlier, o.Value)
			}
		}
		own := ref + " == " + quote(n.Value) // its own text is its exact value
		if slices.Contains(earlier, "*") {
			return []string{own}, true
		}
		if t := patternTest(ref, n.Value); t != "" {
			tests = append(tests, t)
		}
		if len(exact) > 0 {
			tests = append(tests, fmt.Sprintf("!contains(%s, %s)", list(exact), ref))
		}
		for _, w := range earlier {
			tests = append(tests, "!"+patternTest(ref, w))
		}
		if slices.ContainsFunc(earlier, func(w string) bool { return dsl.Glob(n.Value, w) }) {
			return []string{fmt.Sprintf("(%s || %s)", own, strings.Join(tests, " && "))}, true
		}
		return tests, true
	default:
		var exact []string
		for _, o := range s.siblings {
			switch {
			case o.Value == "*":
				return nil, false
			case o.wildcard():
				tests = append(tests, "!"+patternTest(ref, o.Value))
			case o.Value != "":
				exact = append(exact, o.Value)
			}
		}
		if len(exact) > 0 {
			tests = append([]string{fmt.Sprintf("!contains(%s, %s)", list(exact), ref)}, tests...)
		}
		return tests, true
	}
}

// patternTest is the test that a value matches pattern: startswith for a prefix, glob
// otherwise, "" for "*" (which every value matches).
func patternTest(ref, pattern string) string {
	switch {
	case pattern == "*":
		return ""
	case strings.Index(pattern, "*") == len(pattern)-1:
		return fmt.Sprintf("startswith(%s, %s)", ref, quote(strings.TrimSuffix(pattern, "*")))
	}
	return fmt.Sprintf("glob(%s, %s)", ref, quote(pattern))
}

// mayOverlap reports whether some value could match both patterns: false only when
// their literal beginnings (or ends) differ where both have text.
func mayOverlap(a, b string) bool {
	pa, _, _ := strings.Cut(a, "*")
	pb, _, _ := strings.Cut(b, "*")
	sa := a[strings.LastIndex(a, "*")+1:]
	sb := b[strings.LastIndex(b, "*")+1:]
	return (strings.HasPrefix(pa, pb) || strings.HasPrefix(pb, pa)) && (strings.HasSuffix(sa, sb) || strings.HasSuffix(sb, sa))
}

// ruleName names the rule of path after its keys and fixed values.
func ruleName(path []step) string {
	var parts []string
	for _, s := range path {
		parts = append(parts, s.node.Key)
		if v := strings.ReplaceAll(s.node.Value, "*", ""); v != "" {
			parts = append(parts, v)
		}
	}
	return identifier(strings.Join(parts, "_"))
}

// uniqueName returns n, or the first of n_2, n_3… not taken, and takes it.
func uniqueName(n string, taken map[string]bool) string {
	m := n
	for i := 2; taken[m]; i++ {
		m = n + "_" + strconv.Itoa(i)
	}
	taken[m] = true
	return m
}

var (
	hclIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
	nonIdent = regexp.MustCompile(`[^a-z0-9]+`)
)

// identifier is s as an rlctl name: lower case letters, digits and underscores, starting
// with a letter, at most 56 characters (uniqueName may add a suffix to the 64 allowed).
func identifier(s string) string {
	s = strings.Trim(nonIdent.ReplaceAllString(strings.ToLower(s), "_"), "_")
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "d_" + s
	}
	if len(s) > 56 {
		s = strings.TrimRight(s[:56], "_")
	}
	return s
}

// quote is s as an HCL string literal, its template sequences escaped.
func quote(s string) string {
	return string(hclwrite.TokensForValue(cty.StringVal(s)).Bytes())
}

func list(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = quote(v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// describe writes a path as key=value / key / key=pattern.
func describe(path []step) string {
	parts := make([]string, len(path))
	for i, s := range path {
		parts[i] = s.node.Key
		if s.node.Value != "" {
			parts[i] += "=" + s.node.Value
		}
	}
	return strings.Join(parts, " / ")
}
