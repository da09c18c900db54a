package envoyconf

import (
	"strings"
)

// This file is a model of envoyproxy/ratelimit's lookup and cache keys, written from its
// src/config/config_impl.go (rateLimitDescriptor.loadDescriptors, GetLimit) and
// src/limiter/cache_key.go (GenerateCacheKey): the oracle of the differential test. It
// keeps the peer's structure (a table per level keyed by key or key_value, a list of
// wildcard patterns matched against key_value, share_threshold patterns tracked by entry
// index) so that it is checked against that code line by line, not against rlctl's.

type peerNode struct {
	children map[string]*peerNode
	wild     []peerWild // this level's wildcard children, in load order
	limit    *peerLimit
	share    bool
	pattern  string // finalKey, when share
}

type peerWild struct {
	key   string   // the child's finalKey
	parts []string // split on '*'
}

type peerLimit struct {
	rpu       uint32
	unit      string
	unlimited bool
	shadow    bool
	name      string
	replaces  []string
	// sharePatterns is set on the copy GetLimit returns: entry index → pattern value.
	sharePatterns map[int]string
}

// peerLoad builds the peer's domain table from configurations already checked.
func peerLoad(cfgs []*Config) map[string]*peerNode {
	domains := map[string]*peerNode{}
	for _, c := range cfgs {
		d := domains[c.Domain]
		if d == nil {
			d = &peerNode{children: map[string]*peerNode{}}
			domains[c.Domain] = d
		}
		d.load(c.Descriptors)
	}
	return domains
}

func (n *peerNode) load(ds []*Descriptor) {
	for _, d := range ds {
		fk := d.Key
		if d.Value != "" {
			fk += "_" + d.Value
		}
		child := &peerNode{children: map[string]*peerNode{}}
		if rl := d.RateLimit; rl != nil {
			child.limit = &peerLimit{rpu: rl.RequestsPerUnit, unit: rl.Unit, unlimited: rl.Unlimited, shadow: d.ShadowMode, name: rl.Name, replaces: rl.Replaces}
		}
		if d.ShareThreshold && strings.Contains(fk, "*") {
			child.share, child.pattern = true, fk
		}
		if strings.Contains(fk, "*") {
			n.wild = append(n.wild, peerWild{key: fk, parts: strings.Split(fk, "*")})
		}
		child.load(d.Descriptors)
		n.children[fk] = child
	}
}

// peerWildcardMatch is the peer's wildcardMatch.
func peerWildcardMatch(parts []string, value string) bool {
	if len(parts) == 1 {
		return parts[0] == value
	}
	if !strings.HasPrefix(value, parts[0]) || !strings.HasSuffix(value, parts[len(parts)-1]) {
		return false
	}
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	if len(value) < total {
		return false
	}
	remaining := value[len(parts[0]):]
	if last := parts[len(parts)-1]; last != "" {
		remaining = remaining[:len(remaining)-len(last)]
	}
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(remaining, part)
		if i < 0 {
			return false
		}
		remaining = remaining[i+len(part):]
	}
	return true
}

type peerEntry struct{ key, value string }

// peerGetLimit is the peer's GetLimit, without statistics or overrides: the limit for a
// descriptor, nil for none.
func peerGetLimit(domains map[string]*peerNode, domain string, entries []peerEntry) *peerLimit {
	var limit *peerLimit
	dom := domains[domain]
	if dom == nil {
		return nil
	}
	table := dom.children
	prev := dom
	var share map[int]string
	for i, e := range entries {
		fk := e.key + "_" + e.value
		next := table[fk]
		matchedWild := ""
		if next == nil && len(prev.wild) > 0 {
			for _, w := range prev.wild {
				if peerWildcardMatch(w.parts, fk) {
					next = table[w.key]
					matchedWild = w.key
					break
				}
			}
		}
		if next == nil {
			next = table[e.key]
		}
		if matchedWild != "" && next != nil && next.share && next.pattern != "" {
			if share == nil {
				share = map[int]string{}
			}
			share[i] = strings.TrimPrefix(next.pattern, e.key+"_")
		}
		if next != nil && next.limit != nil && i == len(entries)-1 {
			l := *next.limit
			l.sharePatterns = share
			limit = &l
		}
		if next != nil && len(next.children) > 0 {
			table = next.children
		} else {
			break
		}
		prev = next
	}
	return limit
}

// peerCacheKey is GenerateCacheKey without the prefix and the window's start.
func peerCacheKey(domain string, entries []peerEntry, l *peerLimit) string {
	var b strings.Builder
	b.WriteString(domain)
	b.WriteByte('_')
	for i, e := range entries {
		b.WriteString(e.key)
		b.WriteByte('_')
		v := e.value
		if p, ok := l.sharePatterns[i]; ok && p != "" {
			v = p
		}
		b.WriteString(v)
		b.WriteByte('_')
	}
	b.WriteString(l.unit)
	return b.String()
}

// peerLimitsToCheck is the service's constructLimitsToCheck: each descriptor's limit,
// then nil for the unlimited and for those whose name another limit of the request
// replaces (an unlimited limit's replaces count too).
func peerLimitsToCheck(domains map[string]*peerNode, domain string, descriptors [][]peerEntry) []*peerLimit {
	limits := make([]*peerLimit, len(descriptors))
	replacing := map[string]bool{}
	for i, es := range descriptors {
		limits[i] = peerGetLimit(domains, domain, es)
		if limits[i] != nil {
			for _, r := range limits[i].replaces {
				replacing[r] = true
			}
			if limits[i].unlimited {
				limits[i] = nil
			}
		}
	}
	for i, l := range limits {
		if l != nil && l.name != "" && replacing[l.name] {
			limits[i] = nil
		}
	}
	return limits
}
