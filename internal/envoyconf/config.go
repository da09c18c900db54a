package envoyconf

import (
	"fmt"
	"strings"
)

// Config is one envoyproxy/ratelimit configuration: a domain and its descriptor tree, as
// a YAML file or an xDS RateLimitConfig resource holds it.
type Config struct {
	// Name is where the configuration came from (a file name, an xDS resource name), for
	// errors and the translation's comments.
	Name        string
	Domain      string
	Descriptors []*Descriptor
	Pos         Pos // the domain's
}

// Descriptor is one node of the tree: an entry key, optionally a value (which may hold
// '*' wildcards), optionally a rate limit, and the nodes below it.
type Descriptor struct {
	Key, Value  string
	RateLimit   *RateLimit
	Descriptors []*Descriptor
	// ShadowMode: the limit is counted and reported, never enforced.
	ShadowMode bool
	// QuotaMode: the limit is a quota; a request is over the limit only when every quota
	// descriptor of it is.
	QuotaMode bool
	// DetailedMetric: the limit's statistics are named by the descriptor's values.
	DetailedMetric bool
	// ValueToMetric: this entry's value is part of the statistics' name.
	ValueToMetric bool
	// ShareThreshold: every value the wildcard matches shares one counter.
	ShareThreshold bool
	Pos            Pos // the node's
}

// RateLimit is a node's limit.
type RateLimit struct {
	// Unit is SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR; "" with Unlimited.
	Unit            string
	RequestsPerUnit uint32
	Unlimited       bool
	Name            string
	Replaces        []string
	Pos             Pos
}

// Pos is a position in a configuration; Line 0 when it has none (an xDS resource).
type Pos struct {
	Line, Col int
}

// Error is a configuration that envoyproxy/ratelimit refuses to load, or that cannot be
// translated: where, what, and how to fix it.
type Error struct {
	Name string // the configuration's Name
	Pos  Pos
	Msg  string
	Hint string // how to fix it; may be empty
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Name)
	if e.Pos.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Pos.Line, e.Pos.Col)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Hint != "" {
		b.WriteString(". ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// Units are envoyproxy/ratelimit's units of time, as rlctl windows: fixed windows aligned
// to the Unix epoch, a month of 30 days and a year of 365 (utils.UnitToDivider).
var Units = map[string]string{
	"SECOND": "1s", "MINUTE": "1m", "HOUR": "1h", "DAY": "1d", "WEEK": "7d", "MONTH": "30d", "YEAR": "365d",
}

// finalKey is the node's key in envoyproxy/ratelimit's lookup table: key, or key_value.
func (d *Descriptor) finalKey() string {
	if d.Value == "" {
		return d.Key
	}
	return d.Key + "_" + d.Value
}

// wildcard reports whether the node's value is a pattern.
func (d *Descriptor) wildcard() bool { return strings.Contains(d.Value, "*") }

// Check reports the first problem envoyproxy/ratelimit would refuse c for when it loads
// (its config_impl.go): an empty domain, an entry with no key, two entries of one level
// with the same key and value, a unit that is not one (or one given with unlimited), an
// empty replaces name or one naming its own limit, share_threshold on a value with no
// wildcard.
func Check(c *Config) error {
	if c.Domain == "" {
		return &Error{Name: c.Name, Pos: c.Pos, Msg: "the configuration has no domain", Hint: "Name the domain that Envoy's rate limit filter sends: domain: <name>"}
	}
	return checkLevel(c, c.Descriptors, c.Domain+".")
}

func checkLevel(c *Config, ds []*Descriptor, parent string) error {
	seen := map[string]*Descriptor{}
	for _, d := range ds {
		if d.Key == "" {
			return &Error{Name: c.Name, Pos: d.Pos, Msg: "a descriptor has an empty key", Hint: "Give every entry the key Envoy's rate limit action sends, such as key: remote_address"}
		}
		fk := d.finalKey()
		if prev, ok := seen[fk]; ok {
			return &Error{Name: c.Name, Pos: d.Pos, Msg: fmt.Sprintf("duplicate descriptor composite key %q (first at line %d)", parent+fk, prev.Pos.Line),
				Hint: "Two entries of one level with the same key and value (joined as key_value) would be one; merge them"}
		}
		seen[fk] = d
		if rl := d.RateLimit; rl != nil {
			_, valid := Units[rl.Unit]
			switch {
			case rl.Unlimited && valid:
				return &Error{Name: c.Name, Pos: rl.Pos, Msg: "a rate_limit with unlimited: true has a unit", Hint: "An unlimited descriptor has no unit: remove unit, or unlimited"}
			case !rl.Unlimited && !valid:
				return &Error{Name: c.Name, Pos: rl.Pos, Msg: fmt.Sprintf("invalid rate limit unit %q", rl.Unit), Hint: "The units are second, minute, hour, day, week, month and year"}
			}
			for _, r := range rl.Replaces {
				switch r {
				case "":
					return &Error{Name: c.Name, Pos: rl.Pos, Msg: "a replaces entry has no name", Hint: "Name the rate_limit it replaces: replaces: [{name: <its name>}]"}
				case rl.Name:
					return &Error{Name: c.Name, Pos: rl.Pos, Msg: fmt.Sprintf("rate_limit %q replaces itself", r), Hint: "A limit replaces others: remove its own name from replaces"}
				}
			}
		}
		if d.ShareThreshold && !strings.Contains(fk, "*") {
			return &Error{Name: c.Name, Pos: d.Pos, Msg: fmt.Sprintf("share_threshold on %q, which has no wildcard", parent+fk), Hint: "share_threshold makes every value a wildcard matches share one counter: use it with a value such as \"api/*\", or remove it"}
		}
		if err := checkLevel(c, d.Descriptors, parent+fk+"."); err != nil {
			return err
		}
	}
	return nil
}
