package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/syncbuf"
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

// TestRun starts the server on a free port, sends a request and shuts it down.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncbuf.Buffer
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

// TestConcurrentUploads runs five uploads at once by one user on uploads.hcl (at most 3 at
// a time per user): each body is an io.Pipe that sends one chunk and then waits. Three
// uploads hold a lease while the handler reads their body, the other two get 503; only
// once both 503s are in are the three bodies finished, and then each gets 200. A new
// upload after them gets 200 too. The client sends "Expect: 100-continue", as curl does
// for a large upload: a refused upload's body is never sent (without it the server reads
// up to 256 KiB of a refused body before it answers).
func TestConcurrentUploads(t *testing.T) {
	const uploads, max, chunk, chunks = 5, 3, 64 << 10, 4
	cfg, diags := dsl.Load("../../policies/uploads.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newHandler(engine.New(engine.NewLocal(luahost.New()), plan), nil))
	defer srv.Close()
	// Bounds the test, not a timing assertion: a hung upload fails it instead of hanging.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	type result struct {
		i    int
		res  *http.Response
		body string
		err  error
	}
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.ExpectContinueTimeout = time.Minute // wait for the server's 100 Continue or its refusal
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	results := make(chan result, uploads)
	finish := make(chan struct{}) // closed when the held uploads may send the rest
	upload := func(i int, body io.Reader) {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/upload", body)
		req.Header.Set("Authorization", "Bearer demo-free")
		req.Header.Set("Expect", "100-continue")
		res, err := client.Do(req)
		r := result{i: i, res: res, err: err}
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			r.body = string(b)
		}
		results <- r
	}
	pipes := make([]*io.PipeReader, uploads)
	var feeders sync.WaitGroup
	for i := range uploads {
		pr, pw := io.Pipe()
		pipes[i] = pr
		feeders.Add(1)
		go func() { // the slow client: one chunk now, the rest after finish
			defer feeders.Done()
			part := bytes.Repeat([]byte{'x'}, chunk)
			if _, err := pw.Write(part); err != nil {
				return // refused: the transport stopped reading
			}
			<-finish
			for range chunks - 1 {
				if _, err := pw.Write(part); err != nil {
					return
				}
			}
			pw.Close()
		}()
		go upload(i, pr)
	}

	refused := map[int]bool{}
	for len(refused) < uploads-max {
		r := <-results
		if r.err != nil {
			t.Fatalf("upload %d: %v", r.i, r.err)
		}
		if r.res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("upload %d answered %d %q before its body was sent; want %d uploads held and the rest 503",
				r.i, r.res.StatusCode, r.body, max)
		}
		if ct := r.res.Header.Get("Content-Type"); ct != "application/problem+json" ||
			!strings.Contains(r.body, `"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"`) ||
			!strings.Contains(r.body, `\"uploads.per_user\" allows 3 concurrent requests and all are in use`) {
			t.Errorf("upload %d: 503 with %s %s", r.i, ct, r.body)
		}
		if got := r.res.Header.Get("Retry-After"); got != "600" {
			t.Errorf("upload %d: Retry-After %q; want 600, the rule's ttl (when a held lease ends at the latest)", r.i, got)
		}
		refused[r.i] = true
		pipes[r.i].Close()
	}
	close(finish)
	want := fmt.Sprintf("received %d bytes\n", chunk*chunks)
	for range max {
		r := <-results
		if r.err != nil || r.res.StatusCode != 200 || r.body != want {
			t.Errorf("held upload %d: %v %v %q; want 200 %q", r.i, r.err, r.res, r.body, want)
		}
		if refused[r.i] {
			t.Errorf("upload %d answered twice", r.i)
		}
	}
	feeders.Wait()

	// Every lease is back: a new upload runs.
	upload(uploads, strings.NewReader("small"))
	if r := <-results; r.err != nil || r.res.StatusCode != 200 || r.body != "received 5 bytes\n" {
		t.Errorf("upload after the others: %v %v %q", r.err, r.res, r.body)
	}
}
