package httplimit

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	for _, c := range []struct {
		name   string
		peer   string
		header string // "" is X-Forwarded-For
		values []string
		want   string
	}{
		{"peer only", "192.0.2.1:1234", "", nil, "192.0.2.1"},
		{"untrusted peer ignores the header", "192.0.2.1:1234", "", []string{"198.51.100.1"}, "192.0.2.1"},
		{"ipv6 peer", "[2001:DB8::1]:80", "", nil, "2001:db8::1"},
		{"ipv4-mapped peer", "[::ffff:192.0.2.1]:80", "", nil, "192.0.2.1"},
		{"peer with zone", "[fe80::1%eth0]:80", "", nil, "fe80::1"},
		{"not an address", "@", "", nil, ""},
		{"no port", "192.0.2.1", "", nil, "192.0.2.1"},
		{"trusted peer, no header", "10.0.0.1:1", "", nil, "10.0.0.1"},
		{"one hop", "10.0.0.1:1", "", []string{"198.51.100.1"}, "198.51.100.1"},
		{"spoofed left part", "10.0.0.1:1", "", []string{"1.1.1.1, 198.51.100.1"}, "198.51.100.1"},
		{"trusted hops skipped", "10.0.0.1:1", "", []string{"1.1.1.1, 198.51.100.1, 10.9.9.9, 10.8.8.8"}, "198.51.100.1"},
		{"lines in order", "10.0.0.1:1", "", []string{"1.1.1.1", "198.51.100.1", "10.2.2.2"}, "198.51.100.1"},
		{"only trusted hops: leftmost", "10.0.0.1:1", "", []string{"10.3.3.3, 10.2.2.2"}, "10.3.3.3"},
		{"garbage stops the walk", "10.0.0.1:1", "", []string{"1.1.1.1, garbage, 10.2.2.2"}, "10.2.2.2"},
		{"empty entry stops the walk", "10.0.0.1:1", "", []string{"1.1.1.1,,"}, "10.0.0.1"},
		{"hop with port", "10.0.0.1:1", "", []string{"198.51.100.1:5555"}, "198.51.100.1"},
		{"bracketed v6 hop", "10.0.0.1:1", "", []string{"[2001:db8::2]"}, "2001:db8::2"},
		{"bare v6 hop", "10.0.0.1:1", "", []string{" 2001:db8::2 "}, "2001:db8::2"},
		{"mapped hop is v4", "10.0.0.1:1", "", []string{"::ffff:10.5.5.5, ::ffff:198.51.100.9"}, "198.51.100.9"},
		{"v6 trusted range", "[2001:db8:ffff::1]:1", "", []string{"198.51.100.1, 2001:db8:ffff::2"}, "198.51.100.1"},
		{"forwarded", "10.0.0.1:1", "Forwarded", []string{"for=192.0.2.60;proto=http;by=203.0.113.43"}, "192.0.2.60"},
		{"forwarded list", "10.0.0.1:1", "Forwarded", []string{`for=1.1.1.1, For="[2001:db8:cafe::17]:4711", for=10.4.4.4`}, "2001:db8:cafe::17"},
		{"forwarded unknown", "10.0.0.1:1", "Forwarded", []string{"for=1.1.1.1, for=unknown, for=10.4.4.4"}, "10.4.4.4"},
		{"forwarded obfuscated", "10.0.0.1:1", "Forwarded", []string{"for=_hidden"}, "10.0.0.1"},
		{"forwarded without for", "10.0.0.1:1", "Forwarded", []string{"proto=https"}, "10.0.0.1"},
		{"forwarded unbracketed v6", "10.0.0.1:1", "Forwarded", []string{"for=2001:db8::1"}, "10.0.0.1"},
		{"forwarded ignores xff", "10.0.0.1:1", "Forwarded", nil, "10.0.0.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			header := c.header
			if header == "" {
				header = "X-Forwarded-For"
			}
			var cfg config
			WithTrustedProxies(header, trusted...)(&cfg)
			r := &http.Request{RemoteAddr: c.peer, Header: http.Header{}}
			for _, v := range c.values {
				r.Header.Add(header, v)
			}
			if c.name == "forwarded ignores xff" {
				r.Header.Set("X-Forwarded-For", "198.51.100.1")
			}
			if got := cfg.proxies.clientIP(r); got != c.want {
				t.Errorf("clientIP(%s, %s: %q) = %q, want %q", c.peer, header, c.values, got, c.want)
			}
		})
	}
}

// TestClientIPNoProxies: without WithTrustedProxies nothing but the peer is read.
func TestClientIPNoProxies(t *testing.T) {
	var cfg config
	r := &http.Request{RemoteAddr: "10.0.0.1:1", Header: http.Header{
		"X-Forwarded-For": {"198.51.100.1"}, "Forwarded": {"for=198.51.100.1"}, "X-Real-Ip": {"198.51.100.1"},
	}}
	if got := cfg.proxies.clientIP(r); got != "10.0.0.1" {
		t.Errorf("clientIP = %q, want the peer", got)
	}
}

func TestHostOnly(t *testing.T) {
	for in, want := range map[string]string{
		"Example.COM:8080": "example.com", "example.com": "example.com", "[::1]:80": "[::1]", "[::1]": "[::1]", "": "",
	} {
		if got := hostOnly(in); got != want {
			t.Errorf("hostOnly(%q) = %q, want %q", in, got, want)
		}
	}
}
