package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
)

const policyFile = "../../policies/public_api.hcl"

// TestPublicAPI runs the example's handler on public_api.hcl with a virtual clock:
// anonymous callers get 60 requests a minute per address, a signed-in free user a burst of
// 20, and an unknown key is refused before the limiter.
func TestPublicAPI(t *testing.T) {
	cfg, diags := dsl.Load(policyFile)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	clock := luahost.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	e := engine.New(engine.NewLocal(luahost.New(luahost.WithClock(clock))), plan, engine.WithClock(clock.Now))
	srv := httptest.NewServer(newHandler(e, nil))
	defer srv.Close()

	get := func(path, key string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	count := func(key string) (int, *http.Response) {
		for i := 0; ; i++ {
			if res := get("/v1/items", key); res.StatusCode != 200 || i > 1000 {
				return i, res
			}
		}
	}
	n, res := count("")
	if n != 60 || res.StatusCode != 429 {
		t.Errorf("anonymous: %d allowed, then %d; want 60 then 429", n, res.StatusCode)
	}
	if got := res.Header.Get("RateLimit"); !strings.HasPrefix(got, `"public_api.anonymous_per_ip";r=0;t=`) {
		t.Errorf("RateLimit %q", got)
	}
	if res.Header.Get("Retry-After") == "" || res.Header.Get("X-RateLimit-Limit") != "60" {
		t.Errorf("headers %v", res.Header)
	}
	n, res = count("demo-free")
	if n != 20 || res.StatusCode != 429 {
		t.Errorf("free user: %d allowed, then %d; want 20 then 429", n, res.StatusCode)
	}
	if got := res.Header.Get("RateLimit-Policy"); got != `"public_api.per_user";q=20;w=2, "public_api.per_tenant";q=1000;w=60` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	if res := get("/v1/items", "stolen"); res.StatusCode != 401 {
		t.Errorf("unknown key: %d", res.StatusCode)
	}
	// Outside /v1/ no policy applies.
	if res := get("/health", ""); res.StatusCode != 200 || res.Header.Get("RateLimit") != "" {
		t.Errorf("/health: %d %v", res.StatusCode, res.Header)
	}
}

func TestSetupErrors(t *testing.T) {
	for _, c := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"-nope"}, true, "flag provided but not defined"},
		{[]string{"-policy", policyFile, "extra"}, true, "unexpected argument"},
		{[]string{"-policy", "missing.hcl"}, false, "does not load"},
		{[]string{"-policy", policyFile, "-trusted-proxies", "10.0.0.0/33"}, false, "-trusted-proxies"},
		{[]string{"-policy", policyFile, "-redis", "http://x"}, false, "-redis"},
	} {
		var stderr bytes.Buffer
		_, err := setup(c.args, &stderr)
		var u usageError
		if err == nil || errors.As(err, &u) != c.usage || !strings.Contains(err.Error()+stderr.String(), c.want) {
			t.Errorf("setup(%q) = %v (stderr %q); want usage=%v, %q", c.args, err, stderr.String(), c.usage, c.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe to write from the server goroutine and read here.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRun starts the server on a free port, sends a request and shuts it down.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-policy", policyFile, "-addr", "127.0.0.1:0", "-trusted-proxies", "127.0.0.1/32"}, &stderr)
	}()
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == ""; {
		if _, after, ok := strings.Cut(stderr.String(), "listening on "); ok {
			url = strings.TrimSpace(after)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listening line: %q", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	req, _ := http.NewRequest("GET", url+"/v1/items", nil)
	req.Header.Set("X-Forwarded-For", "198.51.100.7")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("RateLimit"), `"public_api.anonymous_per_ip";r=59;`) {
		t.Errorf("%d %v", res.StatusCode, res.Header)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
