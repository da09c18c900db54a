package main

import (
	"bytes"
	"github.com/rlctl/rlctl/internal/syncbuf"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmePlayground runs the rlctl playground commands of README.md's sh blocks: one
// that serves, on a loopback port of its own, until it serves the page and the module and
// is stopped (it must exit 0, having printed the page's URL); one with -export, into a
// temporary directory, which must then hold the site.
func TestReadmePlayground(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var served, exported int
	for _, b := range fencedBlocks(t, "README.md", string(readme)) {
		if b.lang != "sh" || !strings.Contains(b.text, "rlctl playground") {
			continue
		}
		for _, line := range strings.Split(b.text, "\n") {
			cmd, _, _ := strings.Cut(line, "#")
			fields := strings.Fields(cmd)
			if len(fields) < 2 || fields[0] != "rlctl" || fields[1] != "playground" {
				continue
			}
			args := fields[1:]
			t.Run(strings.Join(fields, " "), func(t *testing.T) {
				for i, a := range args {
					if a == "-export" && i+1 < len(args) {
						exported++
						args[i+1] = filepath.Join(t.TempDir(), args[i+1])
						var out bytes.Buffer
						if code := run(args, &env{stdout: &out, stderr: &out}); code != 0 {
							t.Fatalf("exit %d:\n%s", code, out.String())
						}
						for _, f := range []string{"index.html", "rlctl.wasm", "worker.js"} {
							if _, err := os.Stat(filepath.Join(args[i+1], f)); err != nil {
								t.Errorf("after %s: %v", line, err)
							}
						}
						return
					}
				}
				served++
				playgroundOnce(t, args)
			})
		}
	}
	if served == 0 || exported == 0 {
		t.Errorf("README.md shows %d rlctl playground commands that serve and %d that export; want one of each", served, exported)
	}
}

// playgroundOnce runs rlctl with args (playground and its flags) on a loopback port until
// it serves the page and the module, then stops it; it must exit 0.
func playgroundOnce(t *testing.T, args []string) {
	t.Helper()
	args = append(args, "-http", "127.0.0.1:0")
	ready := make(chan string, 1)
	playgroundReady = func(url string) { ready <- url }
	playgroundStop = make(chan struct{})
	defer func() { playgroundReady, playgroundStop = nil, nil }()
	var out syncbuf.Buffer
	exit := make(chan int, 1)
	go func() { exit <- run(args, &env{stdout: &out, stderr: &out}) }()
	select {
	case url := <-ready:
		if !strings.Contains(out.String(), "serving "+url+"\n") {
			t.Errorf("rlctl %s printed %q; want the page's URL, %s", strings.Join(args, " "), out.String(), url)
		}
		page := fetch(t, url, "")
		if !strings.Contains(string(page.body), "<title>rlctl playground</title>") {
			t.Errorf("GET %s: not the playground page:\n%.300s", url, page.body)
		}
		wasm := fetch(t, url+"rlctl.wasm", "gzip")
		if wasm.header.Get("Content-Type") != "application/wasm" || wasm.header.Get("Content-Encoding") != "gzip" {
			t.Errorf("GET %srlctl.wasm: Content-Type %q, Content-Encoding %q", url, wasm.header.Get("Content-Type"), wasm.header.Get("Content-Encoding"))
		}
		close(playgroundStop)
		if code := <-exit; code != 0 { // the test's -timeout bounds a stop that never comes
			t.Errorf("rlctl %s exited %d:\n%s", strings.Join(args, " "), code, out.String())
		}
	case code := <-exit:
		t.Errorf("rlctl %s exited %d before serving:\n%s", strings.Join(args, " "), code, out.String())
	}
}

type fetched struct {
	header http.Header
	body   []byte
}

// fetch GETs url, asking for encoding when not "" (the transport then leaves the body as
// it comes), and requires 200.
func fetch(t *testing.T, url, encoding string) fetched {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return fetched{resp.Header, b}
}
