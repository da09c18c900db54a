package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/internal/syncbuf"
	"github.com/rlctl/rlctl/internal/testcert"
)

// TestDocsServe holds docs/serve.md, and the service's blocks of README.md, to the
// repository. A block marked <!-- file: PATH --> is PATH's text, or excerpts of it in
// order with "..." lines between them; one marked <!-- quote: PATH --> has each of its
// lines in PATH (a Go file's doc comment quoting it); a sh block's rlctl serve commands
// are run, each until it serves (on loopback ports of its own and, for -redis, a real
// redis-server of the test's) and its admin listener answers /healthz, then stopped: it
// must exit 0; a session of curl commands is TestDocsServeCurl's. Every block of
// docs/serve.md is one of these.
func TestDocsServe(t *testing.T) {
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"docs/serve.md", "README.md"} {
		text, err := os.ReadFile(filepath.Join(abs, doc))
		if err != nil {
			t.Fatal(err)
		}
		served := 0
		for _, b := range fencedBlocks(t, doc, string(text)) {
			kind, arg, _ := strings.Cut(b.marker, ": ")
			serves := b.lang == "sh" && strings.Contains(b.text, "rlctl serve ")
			if doc == "README.md" && !serves && !(kind == "file" && strings.HasPrefix(arg, "serve/")) {
				continue // README's other blocks have tests of their own
			}
			t.Run(fmt.Sprintf("%s:%d", doc, b.line), func(t *testing.T) {
				switch {
				case kind == "file":
					checkExcerpt(t, filepath.Join(abs, arg), b.text)
				case kind == "quote":
					src, err := os.ReadFile(filepath.Join(abs, arg))
					if err != nil {
						t.Fatal(err)
					}
					for _, l := range strings.Split(strings.TrimSpace(b.text), "\n") {
						if !strings.Contains(string(src), l) {
							t.Errorf("%q is not in %s", l, arg)
						}
					}
				case serves:
					for _, line := range strings.Split(b.text, "\n") {
						if args, ok := serveCommand(line); ok {
							served++
							t.Chdir(abs)
							serveOnce(t, args)
						}
					}
				case b.curls():
					// TestDocsServeCurl replays it.
				default:
					t.Errorf("a ```%s block with marker %q: nothing checks it", b.lang, b.marker)
				}
			})
		}
		if served == 0 {
			t.Errorf("%s shows no rlctl serve command", doc)
		}
	}
}

// serveOnce runs rlctl serve with args until its admin listener answers /healthz, then
// stops it. A -redis URL in args is replaced by a real redis-server's, and the files of
// -tls-cert, -tls-key, -tls-client-ca and -auth-tokens by ones made for the test.
func serveOnce(t *testing.T, args []string) {
	t.Helper()
	dir := t.TempDir()
	ca := testcert.New(t, "ca")
	server := ca.Server(t, dir, "server")
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("# a token for the docs\nt0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"-tls-cert": server.CertFile, "-tls-key": server.KeyFile, "-tls-client-ca": ca.WriteFile(t, dir, "ca.pem"), "-auth-tokens": tokens}
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-redis" {
			args[i+1] = "redis://" + redistest.Start(t).Addr()
		}
		if f, ok := files[args[i]]; ok {
			args[i+1] = f
		}
	}
	serveWhile(t, args, func(string) {})
}

// serveWhile runs rlctl serve with args on loopback ports, checks the admin listener's
// /healthz, calls f with the HTTP API's base URL, then stops the service, which must
// exit 0.
func serveWhile(t *testing.T, args []string, f func(web string)) {
	t.Helper()
	args = append(append([]string{"serve"}, args...), "-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-watch=false")
	ready := make(chan string, 1)
	var admin string
	serveAdminReady = func(a string) { admin = a }
	serveReady = func(_, h string) { ready <- h }
	serveStop = make(chan struct{})
	defer func() { serveReady, serveAdminReady, serveStop = nil, nil, nil }()
	var logs syncbuf.Buffer
	exit := make(chan int, 1)
	go func() { exit <- run(args, &env{stdout: &logs, stderr: &logs}) }()
	select {
	case h := <-ready:
		resp, err := http.Get("http://" + admin + "/healthz")
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("rlctl %s: /healthz: %v %v", strings.Join(args, " "), resp, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
		f("http://" + h)
		close(serveStop)
		if code := <-exit; code != 0 {
			t.Errorf("rlctl %s exited %d:\n%s", strings.Join(args, " "), code, logs.String())
		}
	case code := <-exit:
		t.Errorf("rlctl %s exited %d before serving:\n%s", strings.Join(args, " "), code, logs.String())
	}
}

// TestServeOnACluster: -redis-type cluster runs the service on a real 3-node Redis Cluster.
func TestServeOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	a := cl.Addrs()
	url := "redis://" + a[0] + "?addr=" + a[1] + "&addr=" + a[2]
	serveWhile(t, []string{"-redis", url, "-redis-type", "cluster", "-timeout", "20s", filepath.Join(root, "serve", "testdata", "envoy", "edge.hcl")}, func(web string) {
		for i := range 4 {
			resp, err := http.Post(web+"/v1/decide", "application/json", strings.NewReader(
				`{"requests": [{"attributes": {"domain": "edge", "descriptor": "remote_address", "remote_address": "192.0.2.7"}},
				  {"attributes": {"domain": "edge", "descriptor": "tenant", "tenant": "t1"}}]}`))
			if err != nil {
				t.Fatal(err)
			}
			var d struct {
				Allowed bool
				Source  string
				Rules   []struct{ Remaining int64 }
			}
			err = json.NewDecoder(resp.Body).Decode(&d)
			resp.Body.Close()
			if err != nil || d.Allowed != (i < 3) || d.Source != "backend" {
				t.Fatalf("decision %d on the cluster: %+v %v", i+1, d, err)
			}
		}
	})
}

// TestServeThroughSentinel: -redis-type sentinel finds the primary through a real Redis
// Sentinel and decides there.
func TestServeThroughSentinel(t *testing.T) {
	primary := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, "mymaster", primary)
	url := "redis://" + sentinel.Addr() + "?master_name=mymaster"
	serveWhile(t, []string{"-redis", url, "-redis-type", "sentinel", "-timeout", "20s", filepath.Join(root, "serve", "testdata", "envoy", "edge.hcl")}, func(web string) {
		for i := range 4 {
			resp, err := http.Post(web+"/v1/decide", "application/json", strings.NewReader(
				`{"attributes": {"domain": "edge", "descriptor": "remote_address", "remote_address": "192.0.2.8"}}`))
			if err != nil {
				t.Fatal(err)
			}
			var d struct {
				Allowed bool
				Source  string
			}
			err = json.NewDecoder(resp.Body).Decode(&d)
			resp.Body.Close()
			if err != nil || d.Allowed != (i < 3) || d.Source != "backend" {
				t.Fatalf("decision %d through the sentinel: %+v %v", i+1, d, err)
			}
		}
	})
	if n := primary.Client(t).DBSize(context.Background()).Val(); n != 1 {
		t.Errorf("the primary holds %d keys, want the rule's 1", n)
	}
}
