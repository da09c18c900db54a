package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlctl/rlctl/bench/internal/redisproc"
)

// TestCells runs every contender's cell on a real redis-server, small: each passes the
// check (the server's count after ReturnLeases is what was admitted), and the leased
// ones reach Redis far less than once a decision.
func TestCells(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("RLCTL_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server not installed and RLCTL_REQUIRE_REDIS=1: apt-get install -y redis-server, or run make test")
		}
		t.Skip("redis-server not installed (RLCTL_REQUIRE_REDIS=1 makes this a failure)")
	}
	srv, err := redisproc.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	meter := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { meter.Close() })
	l := load{n: 4000, engines: 3, g: 2, maxTime: 20 * time.Second}
	clients := newClients(srv.Addr, l)
	t.Cleanup(func() {
		for _, c := range clients {
			c.Close()
		}
	})
	ctx := context.Background()
	for _, c := range contenders([]int64{100}, true) {
		cl, err := runCell(ctx, meter, clients, c, l, 1)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if cl.decisions != int64(l.n) || cl.counted != cl.decisions {
			t.Errorf("%s: %d decisions, %d counted, want %d", c.name, cl.decisions, cl.counted, l.n)
		}
		if cl.scriptCalls < 1 || cl.serverUS <= 0 {
			t.Errorf("%s: %v script calls, %v µs of server CPU per decision: the meter read nothing", c.name, cl.scriptCalls, cl.serverUS)
		}
		if c.lease > 0 && cl.per(cl.scriptCalls) > 0.05 {
			t.Errorf("%s: %.3f script calls per decision, want at most 1 in 20", c.name, cl.per(cl.scriptCalls))
		}
		if c.batch == 1 && cl.scriptCalls < float64(cl.decisions) {
			t.Errorf("%s: %v script calls for %d decisions, each alone", c.name, cl.scriptCalls, cl.decisions)
		}
	}
}

func TestPolicies(t *testing.T) {
	for _, c := range contenders([]int64{1, 100, 1000, 1_000_000}, true) {
		src := c.policy()
		if _, err := compile(src); err != nil {
			t.Errorf("%s: %v\n%s", c.name, err, src)
		}
		if got := strings.Contains(src, "lease_size"); got != (c.lease > 0) {
			t.Errorf("%s: lease_size in the policy: %v\n%s", c.name, got, src)
		}
	}
}

func TestParseSizes(t *testing.T) {
	if s, err := parseSizes("100, 1000"); err != nil || len(s) != 2 || s[0] != 100 || s[1] != 1000 {
		t.Errorf("parseSizes = %v, %v", s, err)
	}
	if s, err := parseSizes(""); err != nil || s != nil {
		t.Errorf("parseSizes(\"\") = %v, %v", s, err)
	}
	for _, bad := range []string{"0", "x", "100,", "2000000"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) took it", bad)
		}
	}
}

func TestFormat(t *testing.T) {
	for v, want := range map[float64]string{123.4: "123", 12.34: "12.3", 1.234: "1.23", 0.1234: "0.123", 0.01234: "0.0123"} {
		if got := prec(v); got != want {
			t.Errorf("prec(%v) = %q, want %q", v, got, want)
		}
	}
}
