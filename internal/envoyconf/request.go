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
//	<key>        the value of the first entry with that key
//
// and "" for any other name. domain, descriptor and entry.N are reserved: an entry whose
// key is one of them is read by its position. Import reads an entry by its key only where
// that key is not reserved and no other entry of the descriptor has it.
type Request struct {
	domain  string
	entries []*ratelimitv3.RateLimitDescriptor_Entry
	path    string
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
	return Request{domain: domain, entries: es, path: b.String()}
}

// Attr implements dsl.Request.
func (r *Request) Attr(name string) string {
	switch name {
	case "domain":
		return r.domain
	case "descriptor":
		return r.path
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

// writeKey writes k with '.' and '\' escaped by '\'.
func writeKey(b *strings.Builder, k string) {
	for j := 0; j < len(k); j++ {
		if k[j] == '.' || k[j] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(k[j])
	}
}
