package envoyconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Parse reads one envoyproxy/ratelimit configuration file and checks it (Check). Every
// error names the file and, where the YAML has one, the line and column, and says how to
// fix it. Unlike envoyproxy/ratelimit, which accepts any of its field names anywhere and
// ignores those out of place, a field is accepted only where it means something.
// metadata is accepted and ignored (envoyproxy/ratelimit returns it only as the
// response's dynamic metadata).
func Parse(name string, src []byte) (*Config, error) {
	c := &Config{Name: name}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(src))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, &Error{Name: name, Msg: "not YAML: " + strings.TrimPrefix(err.Error(), "yaml: "), Hint: "Fix the YAML syntax at the line given"}
	}
	if len(doc.Content) == 0 {
		return nil, &Error{Name: name, Msg: "the file is empty", Hint: "An envoyproxy/ratelimit configuration has a domain and descriptors"}
	}
	p := parser{name: name}
	root := doc.Content[0]
	p.mapping(root, "the configuration", map[string]func(*yaml.Node){
		"domain":      func(v *yaml.Node) { c.Domain, c.Pos = p.str(v), pos(v) },
		"descriptors": func(v *yaml.Node) { c.Descriptors = p.descriptors(v) },
	})
	if p.err != nil {
		return nil, p.err
	}
	if c.Pos.Line == 0 {
		c.Pos = pos(root)
	}
	if err := Check(c); err != nil {
		return nil, err
	}
	return c, nil
}

type parser struct {
	name string
	err  error
}

func pos(n *yaml.Node) Pos { return Pos{Line: n.Line, Col: n.Column} }

func (p *parser) fail(n *yaml.Node, hint, format string, args ...any) {
	if p.err == nil {
		p.err = &Error{Name: p.name, Pos: pos(n), Msg: fmt.Sprintf(format, args...), Hint: hint}
	}
}

// mapping reads the mapping n, calling fields[key] with each value; what names it in
// errors.
func (p *parser) mapping(n *yaml.Node, what string, fields map[string]func(*yaml.Node)) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		p.fail(n, "Write it as key: value lines", "%s is not a mapping", what)
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content) && p.err == nil; i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			p.fail(k, "Field names are strings, such as domain, key, value, rate_limit", "config error, key is not of type string: %s", k.Value)
			return
		}
		f, ok := fields[k.Value]
		if !ok {
			p.fail(k, "The fields of "+what+" are "+fieldList(fields)+suggest(k.Value, fields), "config error, unknown key %q in %s", k.Value, what)
			return
		}
		if seen[k.Value] {
			p.fail(k, "Give it once", "%s is given twice in %s", k.Value, what)
			return
		}
		seen[k.Value] = true
		f(v)
	}
}

func fieldList(fields map[string]func(*yaml.Node)) string {
	return strings.Join(slices.Sorted(maps.Keys(fields)), ", ")
}

// suggest is a did-you-mean for a misspelled field.
func suggest(got string, fields map[string]func(*yaml.Node)) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", "") }
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if norm(k) == norm(got) || strings.HasPrefix(norm(got), norm(k)) && len(got)-len(k) <= 2 {
			return fmt.Sprintf(" (did you mean %s?)", k)
		}
	}
	return ""
}

func (p *parser) seq(n *yaml.Node, what string) []*yaml.Node {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "Write it as a list of mappings, each line starting with -", "%s is not a list", what)
		return nil
	}
	return n.Content
}

func (p *parser) descriptors(n *yaml.Node) []*Descriptor {
	var out []*Descriptor
	for _, e := range p.seq(n, "descriptors") {
		if p.err != nil {
			return nil
		}
		if e.Kind != yaml.MappingNode {
			p.fail(e, "Each descriptor is a mapping: - key: <key>", "config error, yaml file contains list of type other than map: %s", e.Value)
			return nil
		}
		d := &Descriptor{Pos: pos(e)}
		p.mapping(e, "a descriptor", map[string]func(*yaml.Node){
			"key":             func(v *yaml.Node) { d.Key = p.str(v) },
			"value":           func(v *yaml.Node) { d.Value = p.str(v) },
			"rate_limit":      func(v *yaml.Node) { d.RateLimit = p.rateLimit(v) },
			"descriptors":     func(v *yaml.Node) { d.Descriptors = p.descriptors(v) },
			"shadow_mode":     func(v *yaml.Node) { d.ShadowMode = p.bool(v) },
			"quota_mode":      func(v *yaml.Node) { d.QuotaMode = p.bool(v) },
			"detailed_metric": func(v *yaml.Node) { d.DetailedMetric = p.bool(v) },
			"value_to_metric": func(v *yaml.Node) { d.ValueToMetric = p.bool(v) },
			"share_threshold": func(v *yaml.Node) { d.ShareThreshold = p.bool(v) },
			"metadata":        func(v *yaml.Node) { p.metadata(v) },
		})
		out = append(out, d)
	}
	return out
}

func (p *parser) rateLimit(n *yaml.Node) *RateLimit {
	rl := &RateLimit{Pos: pos(n)}
	p.mapping(n, "a rate_limit", map[string]func(*yaml.Node){
		"unit":              func(v *yaml.Node) { rl.Unit = strings.ToUpper(p.str(v)) },
		"requests_per_unit": func(v *yaml.Node) { rl.RequestsPerUnit = p.uint32(v) },
		"unlimited":         func(v *yaml.Node) { rl.Unlimited = p.bool(v) },
		"name":              func(v *yaml.Node) { rl.Name = p.str(v) },
		"replaces": func(v *yaml.Node) {
			for _, e := range p.seq(v, "replaces") {
				name := ""
				p.mapping(e, "a replaces entry", map[string]func(*yaml.Node){"name": func(v *yaml.Node) { name = p.str(v) }})
				rl.Replaces = append(rl.Replaces, name)
			}
		},
	})
	return rl
}

// metadata checks that n is a mapping; its content is envoyproxy/ratelimit's to return.
func (p *parser) metadata(n *yaml.Node) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode && !(n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		p.fail(n, "metadata is a mapping of names to values", "metadata is not a mapping")
	}
}

// str is a scalar's text as written (a number or bool read as the string it spells, as
// envoyproxy/ratelimit's YAML reader does); "" for null.
func (p *parser) str(n *yaml.Node) string {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode {
		p.fail(n, "Quote it if it holds YAML syntax", "a string is expected here")
		return ""
	}
	if n.Tag == "!!null" {
		return ""
	}
	return n.Value
}

func (p *parser) bool(n *yaml.Node) bool {
	var b bool
	if err := n.Decode(&b); err != nil {
		p.fail(n, "Write true or false", "%q is not a boolean", n.Value)
	}
	return b
}

func (p *parser) uint32(n *yaml.Node) uint32 {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
		if v, err := strconv.ParseUint(strings.ReplaceAll(n.Value, "_", ""), 0, 32); err == nil {
			return uint32(v)
		}
	}
	p.fail(n, "Write a whole number from 0 to 4294967295", "requests_per_unit %q is not a whole number from 0 to 4294967295", n.Value)
	return 0
}
