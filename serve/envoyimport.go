package serve

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rlctl/rlctl/dsl"
)

// envoyDescriptor is one node of an envoyproxy/ratelimit configuration's descriptor tree.
type envoyDescriptor struct {
	Key            string            `yaml:"key"`
	Value          string            `yaml:"value"`
	RateLimit      *envoyRateLimit   `yaml:"rate_limit"`
	ShadowMode     bool              `yaml:"shadow_mode"`
	Descriptors    []envoyDescriptor `yaml:"descriptors"`
	DetailedMetric bool              `yaml:"detailed_metric"`
	ValueToMetric  bool              `yaml:"value_to_metric"`
	ShareThreshold bool              `yaml:"share_threshold"`
	QuotaMode      bool              `yaml:"quota_mode"`
}

type envoyRateLimit struct {
	Name            string `yaml:"name"`
	Unit            string `yaml:"unit"`
	RequestsPerUnit uint64 `yaml:"requests_per_unit"`
	Unlimited       bool   `yaml:"unlimited"`
	Replaces        []struct {
		Name string `yaml:"name"`
	} `yaml:"replaces"`
}

type envoyConfig struct {
	Domain      string            `yaml:"domain"`
	Descriptors []envoyDescriptor `yaml:"descriptors"`
}

// envoyWindows are envoyproxy/ratelimit's units as rlctl windows (its month is 30 days,
// its year 365).
var envoyWindows = map[string]string{
	"second": "1s", "minute": "1m", "hour": "1h", "day": "1d", "week": "7d", "month": "30d", "year": "365d",
}

// ImportEnvoy translates an envoyproxy/ratelimit configuration file (YAML: a domain and its
// descriptor tree) into an rlctl policy file with the same limits for the descriptors
// RegisterGRPC receives: one policy for the domain, one fixed_window rule per descriptor
// that has a rate_limit (envoyproxy/ratelimit counts in fixed windows, aligned as rlctl's
// are), shadow_mode as shadow. A rule applies to a descriptor with exactly its path of keys,
// the values the configuration fixes, and none of the values (or wildcard prefixes) that a
// sibling entry of the same key names, which envoyproxy/ratelimit matches first. Its key is
// the values the configuration leaves open. What has no equivalent (replaces, quota_mode) is
// an error naming the descriptor; what changes no decision (detailed_metric,
// value_to_metric, rate_limit names) is dropped. The output is formatted and loads.
func ImportEnvoy(filename string, src []byte) ([]byte, error) {
	var cfg envoyConfig
	dec := yaml.NewDecoder(strings.NewReader(string(src)))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("%s: not an envoyproxy/ratelimit configuration: %v", filename, err)
	}
	if cfg.Domain == "" {
		return nil, fmt.Errorf("%s: the configuration has no domain", filename)
	}
	im := importer{file: filename, names: map[string]int{}}
	im.level(cfg.Descriptors, nil)
	if im.err != nil {
		return nil, im.err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Translated by rlctl import from %s (envoyproxy/ratelimit, domain %q).\n", filename, cfg.Domain)
	fmt.Fprintf(&b, "policy %q {\n", identifier(cfg.Domain))
	fmt.Fprintf(&b, "match = request.domain == %s\n", quote(cfg.Domain))
	for _, r := range im.rules {
		b.WriteString("\n")
		b.WriteString(r)
	}
	b.WriteString("}\n")
	out, diags := dsl.Format(filename+".hcl", []byte(b.String()))
	if diags.HasErrors() {
		return nil, fmt.Errorf("%s: the translation does not parse (a bug in rlctl import): %v", filename, diags)
	}
	if _, diags := dsl.Parse(map[string][]byte{filename + ".hcl": out}); diags.HasErrors() {
		return nil, fmt.Errorf("%s: the translation does not load: %v", filename, diags)
	}
	return out, nil
}

// step is one entry of a descriptor's path: its key, and the value the configuration fixes
// ("" for any), a wildcard prefix, and the values and prefixes of the entries of the same key
// beside it that are matched before it.
type step struct {
	key, value, prefix string
	share              bool
	notValues          []string
	notPrefixes        []string
}

type importer struct {
	file  string
	rules []string
	names map[string]int
	err   error
}

// level translates the entries of one level of the tree, under path.
func (im *importer) level(ds []envoyDescriptor, path []step) {
	for _, d := range ds {
		if im.err != nil {
			return
		}
		where := describePath(slices.Concat(path, []step{{key: d.Key, value: d.Value}}))
		if d.Key == "" {
			im.err = fmt.Errorf("%s: a descriptor under %s has no key", im.file, describePath(path))
			return
		}
		if d.QuotaMode {
			im.err = fmt.Errorf("%s: descriptor %s: quota_mode has no rlctl equivalent", im.file, where)
			return
		}
		s := step{key: d.Key}
		switch {
		case strings.HasSuffix(d.Value, "*"):
			s.prefix, s.share = strings.TrimSuffix(d.Value, "*"), d.ShareThreshold
		case d.Value != "":
			s.value = d.Value
		}
		// envoyproxy/ratelimit looks up key_value first, then a wildcard of the key, then the
		// key alone: a more general entry does not apply to what a more specific one names.
		for _, o := range ds {
			if o.Key != d.Key || o.Value == d.Value {
				continue
			}
			switch {
			case strings.HasSuffix(o.Value, "*") && s.value == "":
				if s.prefix == "" || strings.HasPrefix(strings.TrimSuffix(o.Value, "*"), s.prefix) && len(o.Value)-1 > len(s.prefix) {
					s.notPrefixes = append(s.notPrefixes, strings.TrimSuffix(o.Value, "*"))
				}
			case o.Value != "" && !strings.HasSuffix(o.Value, "*") && s.value == "":
				s.notValues = append(s.notValues, o.Value)
			}
		}
		p := append(append([]step(nil), path...), s)
		if rl := d.RateLimit; rl != nil {
			im.rule(p, d, rl, where)
		}
		im.level(d.Descriptors, p)
	}
}

// rule writes the rule of the descriptor at path.
func (im *importer) rule(path []step, d envoyDescriptor, rl *envoyRateLimit, where string) {
	if len(rl.Replaces) > 0 {
		im.err = fmt.Errorf("%s: descriptor %s: replaces has no rlctl equivalent (give the rules their own keys, or stack them in one policy)", im.file, where)
		return
	}
	if rl.Unlimited {
		return // no rule; its siblings still leave its value alone
	}
	window, ok := envoyWindows[strings.ToLower(rl.Unit)]
	if !ok {
		im.err = fmt.Errorf("%s: descriptor %s: unit %q: use second, minute, hour, day, week, month or year", im.file, where, rl.Unit)
		return
	}
	if rl.RequestsPerUnit == 0 {
		im.err = fmt.Errorf("%s: descriptor %s: requests_per_unit must be at least 1 (unlimited: true for no limit)", im.file, where)
		return
	}
	keys := make([]string, len(path))
	var conds, parts []string
	for i, s := range path {
		keys[i] = s.key
		ref := "request." + s.key
		if !hclIdent.MatchString(s.key) {
			ref = fmt.Sprintf("request[%s]", quote(s.key))
		}
		switch {
		case s.value != "":
			conds = append(conds, ref+" == "+quote(s.value))
		case s.prefix != "":
			conds = append(conds, fmt.Sprintf("startswith(%s, %s)", ref, quote(s.prefix)))
			if s.share {
				parts = append(parts, s.prefix+"*")
			} else {
				parts = append(parts, "${"+ref+"}")
			}
		default:
			conds = append(conds, ref+` != ""`)
			parts = append(parts, "${"+ref+"}")
		}
		if len(s.notValues) > 0 {
			vs := make([]string, len(s.notValues))
			for j, v := range s.notValues {
				vs[j] = quote(v)
			}
			conds = append(conds, fmt.Sprintf("!contains([%s], %s)", strings.Join(vs, ", "), ref))
		}
		for _, p := range s.notPrefixes {
			conds = append(conds, fmt.Sprintf("!startswith(%s, %s)", ref, quote(p)))
		}
	}
	when := append([]string{"request.descriptor == " + quote(strings.Join(keys, "."))}, conds...)
	if len(parts) == 0 {
		// Every value is fixed: one counter for the rule, named by its values.
		for _, s := range path {
			parts = append(parts, s.value)
		}
	}
	key := quote(strings.Join(parts, ":"))
	if len(parts) == 1 && strings.HasPrefix(parts[0], "${") {
		key = strings.TrimSuffix(strings.TrimPrefix(parts[0], "${"), "}")
	}
	name := im.name(path)
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: %d per %s", where, rl.RequestsPerUnit, strings.ToLower(rl.Unit))
	if d.ShadowMode {
		b.WriteString(", shadow mode")
	}
	b.WriteString(".\n")
	fmt.Fprintf(&b, "rule %q {\n", name)
	b.WriteString("algorithm = \"fixed_window\"\n")
	fmt.Fprintf(&b, "when = %s\n", strings.Join(when, " && "))
	fmt.Fprintf(&b, "key = %s\n", key)
	fmt.Fprintf(&b, "limit = %d\n", rl.RequestsPerUnit)
	fmt.Fprintf(&b, "window = %q\n", window)
	if d.ShadowMode {
		b.WriteString("shadow = true\n")
	}
	b.WriteString("}\n")
	im.rules = append(im.rules, b.String())
}

// name is a rule name for path, unique in the policy.
func (im *importer) name(path []step) string {
	var parts []string
	for _, s := range path {
		parts = append(parts, s.key)
		if s.value != "" {
			parts = append(parts, s.value)
		} else if s.prefix != "" {
			parts = append(parts, s.prefix)
		}
	}
	n := identifier(strings.Join(parts, "_"))
	im.names[n]++
	if c := im.names[n]; c > 1 {
		n += "_" + strconv.Itoa(c)
	}
	return n
}

var (
	hclIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
	nonIdent = regexp.MustCompile(`[^a-z0-9]+`)
)

// identifier is s as an rlctl name: lower case letters, digits and underscores, starting
// with a letter.
func identifier(s string) string {
	s = strings.Trim(nonIdent.ReplaceAllString(strings.ToLower(s), "_"), "_")
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "d_" + s
	}
	return s
}

// quote is s as an HCL string literal (template sequences escaped).
func quote(s string) string {
	q := strconv.Quote(s)
	q = strings.ReplaceAll(q, "${", "$${")
	return strings.ReplaceAll(q, "%{", "%%{")
}

func describePath(path []step) string {
	if len(path) == 0 {
		return "the top level"
	}
	var parts []string
	for _, s := range path {
		switch {
		case s.value != "":
			parts = append(parts, s.key+"="+s.value)
		case s.prefix != "":
			parts = append(parts, s.key+"="+s.prefix+"*")
		default:
			parts = append(parts, s.key)
		}
	}
	return strings.Join(parts, " / ")
}
