package envoyconf

import "strings"

// statsKey is the stats_key of the rule of path, as an HCL expression: the name
// envoyproxy/ratelimit gives the statistics of the limit at the end of path (its
// config_impl.go, GetLimit), the domain and one segment per entry joined by '.'. The
// expression reads the request only where that name depends on the descriptor's values,
// so without detailed_metric and value_to_metric it is a constant, and the series it
// names are bounded by the configuration.
//
// Without detailed_metric on the limit, an entry's segment is its key, then '_' and:
//
//	exact value        that value
//	wildcard           its pattern; with value_to_metric and no share_threshold, the value
//	key alone          nothing; with value_to_metric, the value
//
// where a value that is empty adds nothing ("key", not "key_"). With detailed_metric,
// every segment is key_value, the value as sent ("key_" when it is empty), except a
// share_threshold wildcard's, which is key_pattern; and once one of those was matched by
// its pattern rather than by its own text, an empty value is "key" alone again.
//
// A name of two or more values is tostring("…"): a template in a rule's key or
// stats_key escapes each value that another value follows (dsl.Expr, Keys), while one
// inside a function call is plain text, as envoyproxy/ratelimit writes the name.
func statsKey(domain string, path []step, keys []string) string {
	detailed := path[len(path)-1].node.DetailedMetric
	// matched: some share_threshold entry was matched by its pattern (a value other than
	// the pattern's own text), which decides how detailed_metric writes empty values.
	var matched []string
	for i, s := range path {
		if s.node.ShareThreshold {
			matched = append(matched, attrRef(keys, i)+" != "+quote(s.node.Value))
		}
	}
	segs := make([]segment, len(path))
	for i, s := range path {
		n, ref := s.node, attrRef(keys, i)
		// open: the value can be empty here (a key alone, or a pattern of '*' only).
		open := n.Value == "" || strings.Trim(n.Value, "*") == ""
		switch {
		case n.Value != "" && !n.wildcard(), n.ShareThreshold:
			segs[i] = segment{text: n.Key + "_" + n.Value}
		case detailed && open && len(matched) > 0:
			cond := strings.Join(matched, " || ")
			if len(matched) > 1 {
				cond = "(" + cond + ")"
			}
			segs[i] = segment{text: n.Key, ref: ref, bare: ref + ` == "" && ` + cond}
		case detailed:
			segs[i] = segment{text: n.Key + "_", ref: ref}
		case !n.ValueToMetric:
			segs[i] = segment{text: n.finalKey()}
		case open:
			segs[i] = segment{text: n.Key, ref: ref, bare: ref + ` == ""`}
		default:
			segs[i] = segment{text: n.Key + "_", ref: ref}
		}
	}
	return template(domain, segs)
}

// segment is one entry's part of a statistics name: text, then the value of ref when
// set, with '_' between them unless bare holds (an HCL condition; "" for never).
type segment struct {
	text, ref, bare string
}

// template writes the name domain.seg1.seg2… as an HCL expression.
func template(domain string, segs []segment) string {
	var b strings.Builder
	lit := domain
	values := 0
	for _, s := range segs {
		lit += "." + s.text
		if s.ref == "" {
			continue
		}
		interp := "${" + s.ref + "}"
		values++
		if s.bare != "" {
			interp = "${" + s.bare + ` ? "" : "_"}` + interp
			values++
		}
		writeText(&b, lit)
		b.WriteString(interp)
		lit = ""
	}
	if values == 0 {
		return quote(lit)
	}
	text := quote(lit)
	b.WriteString(text[1 : len(text)-1])
	if values == 1 {
		return `"` + b.String() + `"`
	}
	return `tostring("` + b.String() + `")`
}

// writeText writes s as the text of an HCL template that an interpolation follows: '$'
// at its end would read as the escape "$${", so those are written as ${"$"}, a constant
// that the template folds into its text.
func writeText(b *strings.Builder, s string) {
	t := strings.TrimRight(s, "$")
	q := quote(t)
	b.WriteString(q[1 : len(q)-1])
	if len(t) < len(s) {
		b.WriteString(`${"` + s[len(t):] + `"}`)
	}
}
