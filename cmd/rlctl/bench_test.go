package main

import "testing"

// TestBenchRedisOptions: -redis takes host:port, a host alone, redis://, rediss:// and
// unix:// URLs and a socket's path.
func TestBenchRedisOptions(t *testing.T) {
	for _, tc := range []struct {
		in, network, addr string
		tls               bool
	}{
		{"127.0.0.1:6411", "tcp", "127.0.0.1:6411", false},
		{"redis.internal:6380", "tcp", "redis.internal:6380", false},
		{"redis.internal", "tcp", "redis.internal:6379", false},
		{"[::1]:6411", "tcp", "[::1]:6411", false},
		{"::1", "tcp", "[::1]:6379", false},
		{"redis://127.0.0.1:6411/2", "tcp", "127.0.0.1:6411", false},
		{"rediss://cache.example:6380", "tcp", "cache.example:6380", true},
		{"unix:///run/redis.sock", "unix", "/run/redis.sock", false},
		{"/run/redis.sock", "unix", "/run/redis.sock", false},
		{"./redis.sock", "unix", "./redis.sock", false},
	} {
		opt, err := benchRedisOptions(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if opt.Network != tc.network || opt.Addr != tc.addr || (opt.TLSConfig != nil) != tc.tls {
			t.Errorf("%s: %s %s (TLS %v), want %s %s (TLS %v)", tc.in, opt.Network, opt.Addr, opt.TLSConfig != nil, tc.network, tc.addr, tc.tls)
		}
	}
	for _, in := range []string{"ftp://example", "127.0.0.1:x", "127.0.0.1:70000", "user@host:6379", ":6379"} {
		if opt, err := benchRedisOptions(in); err == nil {
			t.Errorf("%s: %s %s, want an error", in, opt.Network, opt.Addr)
		}
	}
}
