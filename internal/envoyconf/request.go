package envoyconf

import (
	"strconv"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// Request is one descriptor of an Envoy ShouldRateLimit as policies see it (a
// dsl.Request). Its attributes are
//
//	domain       the request's domain
//	descriptor   the entries' keys in order, joined by '.' (DescriptorPath: a '.' or '\'
//	             in a key is escaped with '\')
//	entry.N      the value of the N-th entry (entry.1 is the first)
//	entries      every entry as key=value, joined by '.' ('.', '=' and '\' in a key or
//	             value escaped with '\'): the whole descriptor, injectively
//	limit.requests_per_unit, limit.window
//	             the descriptor's limit override (Envoy's descriptor limit): its amount,
//	             and its unit as a window ("1s", "1m", "1h", "1d", "7d", "30d", "365d");
//	             both "" when it has none
//	limit.stats_key
//	             the name envoyproxy/ratelimit gives an override's statistics: the
//	             domain, then each entry as key_value (the key alone for an empty
//	             value), joined by '.'; "" without an override
//	<key>        the value of the first entry with that key
//
// and "" for any other name. The names above but <key> are reserved: an entry whose key
// is one of them is read by its position. Import reads an entry by its key only where
// that key is not reserved and no other entry of the descriptor has it.
type Request struct {
	domain  string
	entries []*ratelimitv3.RateLimitDescriptor_Entry
	path    string
	limit   *ratelimitv3.RateLimitDescriptor_RateLimitOverride
}

// NewRequest returns descriptor d of a request for domain.
func NewRequest(domain string, d *ratelimitv3.RateLimitDescriptor) Request {
	es := d.GetEntries()
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('.')
		}
		writeKey(&b, e.GetKey())
	}
	return Request{domain: domain, entries: es, path: b.String(), limit: d.GetLimit()}
}

// OverrideUnits are the windows of a limit override's units (its enum's values), as
// envoyproxy/ratelimit counts them; UNKNOWN has none.
var OverrideUnits = map[int32]string{1: "1s", 2: "1m", 3: "1h", 4: "1d", 7: "7d", 5: "30d", 6: "365d"}

// Attr implements dsl.Request.
func (r *Request) Attr(name string) string {
	switch name {
	case "domain":
		return r.domain
	case "descriptor":
		return r.path
	case "entries":
		var b strings.Builder
		for i, e := range r.entries {
			if i > 0 {
				b.WriteByte('.')
			}
			writeEscaped(&b, e.GetKey())
			b.WriteByte('=')
			writeEscaped(&b, e.GetValue())
		}
		return b.String()
	case "limit.requests_per_unit":
		if r.limit == nil {
			return ""
		}
		return strconv.FormatUint(uint64(r.limit.GetRequestsPerUnit()), 10)
	case "limit.window":
		if r.limit == nil {
			return ""
		}
		return OverrideUnits[int32(r.limit.GetUnit())]
	case "limit.stats_key":
		if r.limit == nil {
			return ""
		}
		// envoyproxy/ratelimit's descriptorKey (src/config/config_impl.go).
		var b strings.Builder
		b.WriteString(r.domain)
		for _, e := range r.entries {
			b.WriteByte('.')
			b.WriteString(e.GetKey())
			if v := e.GetValue(); v != "" {
				b.WriteByte('_')
				b.WriteString(v)
			}
		}
		return b.String()
	}
	if n, ok := strings.CutPrefix(name, "entry."); ok && n != "" && strings.Trim(n, "0123456789") == "" {
		if i, err := strconv.Atoi(n); err == nil && i >= 1 && i <= len(r.entries) {
			return r.entries[i-1].GetValue()
		}
		return ""
	}
	for _, e := range r.entries {
		if e.GetKey() == name {
			return e.GetValue()
		}
	}
	return ""
}

// DescriptorPath is the descriptor attribute of a descriptor with these keys.
func DescriptorPath(keys []string) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('.')
		}
		writeKey(&b, k)
	}
	return b.String()
}

// writeEscaped writes s with '.', '=' and '\' escaped by '\'.
func writeEscaped(b *strings.Builder, s string) {
	for j := 0; j < len(s); j++ {
		if s[j] == '.' || s[j] == '=' || s[j] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[j])
	}
}

// writeKey writes k with '.' and '\' escaped by '\'.
func writeKey(b *strings.Builder, k string) {
	for j := 0; j < len(k); j++ {
		if k[j] == '.' || k[j] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(k[j])
	}
}
