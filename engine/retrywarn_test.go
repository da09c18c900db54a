package engine

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestRetryingClientWarning: the engine warns about a client that retries only where a
// retry can resend a call (batched calls, which are the autopipeline's to resend), not
// for calls it sends one by one, which are marked not to be resent.
func TestRetryingClientWarning(t *testing.T) {
	plan := compile(t, `policy "p" {
  rule "r" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "10/s"
    burst     = 10
  }
}`)
	for _, tc := range []struct {
		name      string
		retries   int
		pipelined bool
		warn      bool
	}{
		{"retrying", 3, false, false},
		{"retrying-pipelined", 3, true, true},
		{"tuned-pipelined", -1, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: tc.retries, ContextTimeoutEnabled: true})
			defer c.Close()
			var opts []RedisOption
			if tc.pipelined {
				opts = append(opts, Pipelined())
			}
			var buf bytes.Buffer
			New(NewRedis(c, opts...), plan, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
			if got := strings.Contains(buf.String(), "retries failed commands"); got != tc.warn {
				t.Errorf("warned %v, want %v; log:\n%s", got, tc.warn, buf.String())
			}
		})
	}
}

// TestClientWarningWithoutLogger: a program that sets no logger still hears of a client
// that does not end calls at their deadline: New says so on slog.Default().
func TestClientWarningWithoutLogger(t *testing.T) {
	plan := compile(t, `policy "p" {
  rule "r" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "10/s"
    burst     = 10
  }
}`)
	var buf bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}) // ContextTimeoutEnabled left false
	defer c.Close()
	New(NewRedis(c), plan)
	if !strings.Contains(buf.String(), "ContextTimeoutEnabled: true") {
		t.Errorf("no warning on slog.Default(); it has:\n%s", buf.String())
	}
	buf.Reset()
	New(NewRedis(c), plan, WithLogger(slog.New(slog.DiscardHandler)))
	if buf.Len() != 0 {
		t.Errorf("a program's own logger was bypassed:\n%s", buf.String())
	}
}
