package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/internal/redistest"
)

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

// TestBenchScriptStats: the script commands' calls and usec are summed from INFO
// commandstats; other commands are left out, and a line bench cannot read is an error.
func TestBenchScriptStats(t *testing.T) {
	for _, tc := range []struct {
		name, info  string
		calls, usec int64
		err         bool
	}{
		{"none", "# Commandstats\r\ncmdstat_ping:calls=3,usec=4,usec_per_call=1.33\r\n", 0, 0, false},
		{"fcall", "# Commandstats\r\ncmdstat_fcall:calls=301,usec=1843,usec_per_call=6.12,rejected_calls=0,failed_calls=1\r\n" +
			"cmdstat_function|load:calls=1,usec=150,usec_per_call=150.00,rejected_calls=0,failed_calls=0\r\n", 301, 1843, false},
		{"evalsha and eval", "cmdstat_evalsha:calls=10,usec=100,usec_per_call=10.00\r\ncmdstat_eval:calls=2,usec=40,usec_per_call=20.00\r\n" +
			"cmdstat_eval_ro:calls=5,usec=5,usec_per_call=1.00\r\n", 12, 140, false},
		{"unreadable", "cmdstat_fcall:usec_per_call=6.12\r\n", 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := benchScriptStats(tc.info)
			if (err != nil) != tc.err || s.calls != tc.calls || s.usec != tc.usec {
				t.Errorf("calls %d usec %d err %v, want calls %d usec %d err %v", s.calls, s.usec, err, tc.calls, tc.usec, tc.err)
			}
		})
	}
}

// TestBenchServerSince: on a real Redis, the calls and time of the scripts run between the
// mark and since are counted, and so is a call over 5ms in the slowlog; the calls before
// the mark are not.
func TestBenchServerSince(t *testing.T) {
	s := redistest.Start(t)
	if _, err := s.Do("CONFIG", "SET", "slowlog-log-slower-than", "1000"); err != nil {
		t.Fatal(err)
	}
	rdb := s.Client(t)
	ctx := context.Background()
	// Busy for ARGV[1] µs of the server's clock.
	const slow = `local t = redis.call('TIME') local t0 = t[1]*1e6 + t[2]
repeat t = redis.call('TIME') until t[1]*1e6 + t[2] - t0 >= tonumber(ARGV[1]) return 1`
	// Before the mark: 40ms, which since must not count.
	if err := rdb.Eval(ctx, slow, nil, 40000).Err(); err != nil {
		t.Fatal(err)
	}
	mark := benchMarkServer(ctx, rdb)
	if mark.statsErr != nil || mark.slowErr != nil || mark.slowID < 0 {
		t.Fatalf("mark: %+v, want the slow call before it in the slowlog", mark)
	}
	sha, err := rdb.ScriptLoad(ctx, "return 1").Result()
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := rdb.EvalSha(ctx, sha, nil).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Eval(ctx, slow, nil, 8000).Err(); err != nil {
		t.Fatal(err)
	}
	got := mark.since(ctx, rdb)
	if got.scriptErr != nil || got.calls != 21 || got.usec < 8000 {
		t.Errorf("script calls %d, %dµs (%v), want 21 calls and at least 8000µs", got.calls, got.usec, got.scriptErr)
	}
	// At least the 8ms EVAL; a loaded machine may stretch a short call past 5ms too.
	if got.slowErr != nil || got.slow < 1 || got.more || got.slowest.Duration < 8*time.Millisecond || got.slowest.Duration >= 40*time.Millisecond {
		t.Errorf("slowlog: %d over 5ms (more %v), slowest %v (%v), want the 8ms EVAL and not the 40ms one before the mark",
			got.slow, got.more, got.slowest.Duration, got.slowErr)
	}
	if threshold, err := benchSlowlogThreshold(ctx, rdb); threshold != 1000 || err != nil {
		t.Errorf("slowlog threshold %d (%v), want 1000", threshold, err)
	}
}

// TestBenchServerTime: a short bench on a real Redis reports, per policy, the server's
// script time per call (FCALL on Redis 7), above zero, and the slowlog's count over 5ms
// with the server's threshold.
func TestBenchServerTime(t *testing.T) {
	s := redistest.Start(t)
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "-redis", s.Addr(), "-deadline", "10s", "-n", "200", "-c", "4", "-keys", "50", "-batch", "1", "../../policies/login.hcl"},
		&env{stdout: &stdout, stderr: &stderr})
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"script time per call: the server's mean time in FCALL, EVALSHA and EVAL over the run (INFO commandstats)\n",
		"slowlog: the SLOWLOG entries over 5ms made during the run; the server logs calls over 10ms only (slowlog-log-slower-than 10000)",
		"\npolicy  script calls  script time per call  per decision  slowlog over 5ms  slowest\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output has no %q:\n%s", want, out)
		}
	}
	m := regexp.MustCompile(`(?m)^login +(\d+) +([0-9.]+)µs +([0-9.]+)µs +(\d+) +(-|\S+ \S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no server row for login:\n%s", out)
	}
	calls, _ := strconv.Atoi(m[1])
	perCall, _ := strconv.ParseFloat(m[2], 64)
	// 200 decisions, one FCALL each (-batch 1), and for each of the 4 callers at most one
	// that found no library before it was loaded.
	if calls < 200 || calls > 204 || perCall <= 0 {
		t.Errorf("script calls %d, %vµs per call, want 200 to 204 calls and a time above zero:\n%s", calls, perCall, out)
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr: %s", stderr.String())
	}

	// Batched (the default), 32 callers: fewer calls than decisions, each call's time
	// spread over its decisions.
	stdout.Reset()
	code = run([]string{"bench", "-redis", s.Addr(), "-deadline", "10s", "-n", "400", "-c", "32", "-keys", "50", "../../policies/login.hcl"},
		&env{stdout: &stdout, stderr: &stderr})
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	m = regexp.MustCompile(`(?m)^login +(\d+) +([0-9.]+)µs +([0-9.]+)µs +(\d+) +(-|\S+ \S+)$`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no server row for login:\n%s", stdout.String())
	}
	calls, _ = strconv.Atoi(m[1])
	perCall, _ = strconv.ParseFloat(m[2], 64)
	perDecision, _ := strconv.ParseFloat(m[3], 64)
	if calls < 1 || calls > 400+32 || perDecision <= 0 || perDecision > perCall {
		t.Errorf("batched: %d script calls, %vµs per call, %vµs per decision:\n%s", calls, perCall, perDecision, stdout.String())
	}
	t.Logf("batched: 400 decisions in %d script calls", calls)
}

// TestBenchServerRefused: on a server that refuses INFO, CONFIG and SLOWLOG (a managed
// service, an ACL), bench says the server's figures are not available, and why, and
// succeeds.
func TestBenchServerRefused(t *testing.T) {
	s := redistest.Start(t)
	if _, err := s.Do("ACL", "SETUSER", "bench", "on", ">secret", "~*", "&*", "+@all", "-info", "-config", "-slowlog"); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "-redis", "redis://bench:secret@" + s.Addr(), "-deadline", "10s", "-n", "20", "-c", "2", "../../policies/login.hcl"},
		&env{stdout: &stdout, stderr: &stderr})
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^login +20 `),
		regexp.MustCompile(`(?m)^script time: not available \(INFO commandstats: NOPERM .*'info'.*\)$`),
		regexp.MustCompile(`(?m)^slowlog: not available \(SLOWLOG GET: NOPERM .*'slowlog.*\)$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("the output does not match %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "script time per call") {
		t.Errorf("a server table without figures:\n%s", out)
	}
}
