package httplimit

import (
	"net/http"
	"net/netip"
	"strings"
)

// proxies is the trusted-proxy configuration: the header those proxies append the
// address of their peer to, and their networks.
type proxies struct {
	header    string // canonical
	forwarded bool   // header is RFC 7239 Forwarded
	nets      []netip.Prefix
}

func (p *proxies) trusted(a netip.Addr) bool {
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// clientIP returns the client address of r: the peer, or when the peer is a trusted proxy
// the first untrusted address of the forwarding chain, walked from the right (the hop
// nearest this server). The walk stops at a hop it cannot parse ("unknown", an obfuscated
// identifier, garbage) and returns the last address it trusted; a chain of trusted hops
// only returns the leftmost. Whatever a client writes to the left of the first untrusted
// hop is never read.
func (p *proxies) clientIP(r *http.Request) string {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		text := ""
		if ap.Addr().Is4() {
			// netip accepts only canonical dotted quads, so the text is the canonical form.
			text = r.RemoteAddr[:strings.LastIndexByte(r.RemoteAddr, ':')]
		}
		return p.walk(r, ap.Addr(), text)
	}
	if a, ok := parseHop(r.RemoteAddr); ok {
		return p.walk(r, a, "")
	}
	return ""
}

// walk resolves the chain from peer; peerText, when not "", is peer's canonical text as
// RemoteAddr wrote it, returned as is to save an allocation.
func (p *proxies) walk(r *http.Request, peer netip.Addr, peerText string) string {
	peer = canon(peer)
	client := peer
	if len(p.nets) > 0 && p.trusted(peer) {
		client = p.chain(r.Header[p.header], peer)
	}
	if client == peer && peerText != "" {
		return peerText
	}
	return client.String()
}

func (p *proxies) chain(lines []string, peer netip.Addr) netip.Addr {
	client := peer
	for i := len(lines) - 1; i >= 0; i-- {
		v := lines[i]
		for {
			j := strings.LastIndexByte(v, ',')
			hop := v[j+1:]
			var a netip.Addr
			var ok bool
			if p.forwarded {
				a, ok = forwardedFor(hop)
			} else {
				a, ok = parseHop(hop)
			}
			if !ok {
				return client
			}
			client = a
			if !p.trusted(a) {
				return a
			}
			if j < 0 {
				break
			}
			v = v[:j]
		}
	}
	return client
}

// canon drops the zone and reads an IPv4-mapped IPv6 address as IPv4, so that one host
// has one spelling in keys and one match against prefixes.
func canon(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// parseHop reads one X-Forwarded-For entry: an address, with or without a port, IPv6
// optionally in brackets, surrounded by optional whitespace.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.Trim(s, " \t")
	if a, err := netip.ParseAddr(s); err == nil {
		return canon(a), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return canon(ap.Addr()), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() {
			return canon(a), true
		}
	}
	return netip.Addr{}, false
}

// forwardedFor reads the for= parameter of one RFC 7239 forwarded-element
// (for=192.0.2.60;proto=http, for="[2001:db8::1]:4711"). An element without for, or with
// a value that is not an address ("unknown", "_hidden"), is not parseable.
func forwardedFor(elem string) (netip.Addr, bool) {
	for pair := range strings.SplitSeq(elem, ";") {
		k, v, ok := strings.Cut(strings.Trim(pair, " \t"), "=")
		if !ok || !strings.EqualFold(k, "for") {
			continue
		}
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
			if strings.IndexByte(v, '\\') >= 0 {
				return netip.Addr{}, false
			}
		}
		if v == "" || v[0] != '[' && strings.Count(v, ":") > 1 {
			return netip.Addr{}, false // RFC 7239 requires IPv6 in brackets
		}
		return parseHop(v)
	}
	return netip.Addr{}, false
}
