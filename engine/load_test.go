package engine_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
)

// TestLoad: a directory of policies loads into a ready engine; policies with several
// problems give a *engine.PolicyError that states each at its file:line:col (not the first
// and a count); a warning goes to the engine's logger.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("api.hcl", `policy "api" {
  rule "per_ip" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "1/s"
    burst     = 1
  }
}
`)
	var logs bytes.Buffer
	e, err := engine.Load(engine.NewLocal(luahost.New()), []string{dir}, engine.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := e.Allow(context.Background(), engine.Attrs{"ip": "192.0.2.1"}); err != nil || !d.Allowed {
		t.Fatalf("a first request: %+v %v", d, err)
	}
	if !strings.Contains(logs.String(), "Key can be empty") || !strings.Contains(logs.String(), "api.hcl:4") {
		t.Errorf("the warning about the empty key is not logged with its position:\n%s", logs.String())
	}

	write("bad.hcl", `policy "bad" {
  rule "a" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "10/min"
    burst     = 1
  }
  rule "b" {
    algorithm = "nope"
    key       = request.ip
  }
}
`)
	_, err = engine.Load(engine.NewLocal(luahost.New()), []string{dir})
	var pe *engine.PolicyError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T), want a *engine.PolicyError", err, err)
	}
	msg := err.Error()
	for _, want := range []string{"bad.hcl:5:", "bad.hcl:9:", `"min"`, `"nope"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "other diagnostic") {
		t.Errorf("the error counts diagnostics rather than stating them:\n%s", msg)
	}
}
