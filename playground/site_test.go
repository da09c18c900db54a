//go:build !js

package playground

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// get fetches path from h with the request headers given as name, value pairs.
func get(h http.Handler, method, path string, headers ...string) *http.Response {
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func embedded(t *testing.T, name string) []byte {
	t.Helper()
	b, err := static.ReadFile("static/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHandler(t *testing.T) {
	h := Handler()
	gz := embedded(t, "rlctl.wasm.gz")
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, method, path string
		headers            []string
		status             int
		typ, encoding      string
		body               []byte // nil: not checked
	}{
		{"page", "GET", "/", nil, 200, "text/html; charset=utf-8", "", embedded(t, "index.html")},
		{"script", "GET", "/app.js", nil, 200, "text/javascript; charset=utf-8", "", embedded(t, "app.js")},
		{"worker", "GET", "/worker.js", nil, 200, "text/javascript; charset=utf-8", "", embedded(t, "worker.js")},
		{"loader", "GET", "/wasm_exec.js", nil, 200, "text/javascript; charset=utf-8", "", embedded(t, "wasm_exec.js")},
		{"style", "GET", "/style.css", nil, 200, "text/css; charset=utf-8", "", embedded(t, "style.css")},
		{"module gzipped", "GET", "/rlctl.wasm", []string{"Accept-Encoding", "gzip, deflate, br"}, 200, "application/wasm", "gzip", gz},
		{"module to a client without gzip", "GET", "/rlctl.wasm", nil, 200, "application/wasm", "", raw},
		{"module to a client refusing gzip", "GET", "/rlctl.wasm", []string{"Accept-Encoding", "gzip;q=0, identity"}, 200, "application/wasm", "", raw},
		{"module, head", "HEAD", "/rlctl.wasm", []string{"Accept-Encoding", "gzip"}, 200, "application/wasm", "gzip", []byte{}},
		{"missing", "GET", "/nope.js", nil, 404, "", "", nil},
		{"post", "POST", "/", nil, 405, "", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := get(h, c.method, c.path, c.headers...)
			b := body(t, resp)
			if resp.StatusCode != c.status {
				t.Fatalf("%s %s: %s", c.method, c.path, resp.Status)
			}
			if c.status != 200 {
				return
			}
			if got := resp.Header.Get("Content-Type"); got != c.typ {
				t.Errorf("Content-Type %q, want %q", got, c.typ)
			}
			if got := resp.Header.Get("Content-Encoding"); got != c.encoding {
				t.Errorf("Content-Encoding %q, want %q", got, c.encoding)
			}
			if resp.Header.Get("ETag") == "" || resp.Header.Get("Cache-Control") != "no-cache" {
				t.Errorf("ETag %q, Cache-Control %q: want an ETag and no-cache", resp.Header.Get("ETag"), resp.Header.Get("Cache-Control"))
			}
			if c.body != nil && !bytes.Equal(b, c.body) {
				t.Errorf("body of %d bytes, want %d", len(b), len(c.body))
			}
			// A browser revalidating with the ETag is told its copy is current.
			if c.method == "GET" {
				again := get(h, "GET", c.path, append(c.headers, "If-None-Match", resp.Header.Get("ETag"))...)
				if again.StatusCode != http.StatusNotModified {
					t.Errorf("GET %s with If-None-Match: %s, want 304", c.path, again.Status)
				}
			}
		})
	}
	if !bytes.HasPrefix(raw, []byte("\x00asm")) {
		t.Errorf("rlctl.wasm.gz does not hold a WebAssembly module")
	}
}

// TestPageFiles: every file the page names (index.html's src and href, the workers and
// scripts it starts, the module it fetches) is one the handler serves.
func TestPageFiles(t *testing.T) {
	h := Handler()
	var named []string
	for _, c := range []struct{ file, pattern string }{
		{"index.html", `(?:src|href)="([^"#:]+)"`},
		{"app.js", `(?:new Worker|fetch)\("([^"]+)"`},
		{"worker.js", `importScripts\("([^"]+)"\)`},
	} {
		for _, m := range regexp.MustCompile(c.pattern).FindAllStringSubmatch(string(embedded(t, c.file)), -1) {
			named = append(named, m[1])
		}
	}
	for _, want := range []string{"app.js", "style.css", "worker.js", "wasm_exec.js", "rlctl.wasm"} {
		if !slices.Contains(named, want) {
			t.Errorf("the page never names %s (it names %q)", want, named)
		}
	}
	for _, n := range named {
		if resp := get(h, "GET", "/"+n, "Accept-Encoding", "gzip"); resp.StatusCode != 200 {
			t.Errorf("the page names %s: %s", n, resp.Status)
		}
	}
}

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"":                        false,
		"gzip":                    true,
		"GZIP":                    true,
		"deflate, gzip;q=1.0, br": true,
		"gzip;q=0":                false,
		"gzip; q=0.000":           false,
		"gzip;q=0.5":              true,
		"identity":                false,
		"*":                       true,
		"*;q=0":                   false,
		"br, x-gzip":              true,
		"gzipx":                   false,
	} {
		if got := acceptsGzip(header); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", header, got, want)
		}
	}
}

func TestExport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	names, err := Export(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"app.js", "index.html", "rlctl.wasm", "rlctl.wasm.gz", "style.css", "wasm_exec.js", "worker.js"}
	if !slices.Equal(names, want) {
		t.Errorf("Export wrote %q, want %q", names, want)
	}
	h := Handler()
	for _, n := range want {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		served := body(t, get(h, "GET", "/"+n))
		if !bytes.Equal(b, served) {
			t.Errorf("%s: %d bytes exported, %d served", n, len(b), len(served))
		}
	}
	// Again, over the first: the same files.
	if again, err := Export(dir); err != nil || !slices.Equal(again, want) {
		t.Errorf("a second Export: %q %v", again, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != len(want) {
		t.Errorf("%d entries in the directory, want %d", len(entries), len(want))
	}
	if strings.Contains(string(embedded(t, "index.html")), "http://") {
		t.Errorf("index.html names an absolute http:// URL: the site must work wherever it is hosted")
	}
}
