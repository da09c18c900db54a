package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/httplimit"
	"github.com/rlctl/rlctl/luahost"
)

// sink is a ResponseWriter that keeps nothing, so the benchmark measures the middleware
// and not a recorder.
type sink struct{ h http.Header }

func (s *sink) Header() http.Header         { return s.h }
func (s *sink) Write(b []byte) (int, error) { return len(b), nil }
func (s *sink) WriteHeader(int)             {}

// BenchmarkMiddleware measures one request through the middleware on the embedded
// (luahost) engine with one gcra rule keyed by the client address, against the bare
// handler and against the engine decision alone (what the middleware adds is middleware −
// engine). "refused" is a request refused by a fixed window: headers, Retry-After and
// the problem document. No network: the handler is called directly.
func BenchmarkMiddleware(b *testing.B) {
	const policy = `
policy "api" {
  match = startswith(request.path, "/v1/")
  rule "per_ip" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "1000000/s"
    burst     = 1000000
  }
}
policy "refuse" {
  match = request.path == "/refused"
  rule "one" {
    algorithm = "fixed_window"
    key       = request.ip
    limit     = 1
    window    = "1h"
  }
}`
	cfg, diags := dsl.Parse(map[string][]byte{"b.hcl": []byte(policy)})
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		b.Fatal(err)
	}
	e := engine.New(engine.NewLocal(luahost.New()), plan)
	native := engine.New(engine.NewNative(luahost.New()), plan)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	req := httptest.NewRequest("GET", "/v1/items", nil)
	req.RemoteAddr = "192.0.2.1:4711"
	w := &sink{h: http.Header{}}

	run := func(b *testing.B, h http.Handler, r *http.Request) {
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			h.ServeHTTP(w, r)
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, ok, req) })
	b.Run("engine", func(b *testing.B) {
		b.ReportAllocs()
		attrs := engine.Attrs{"ip": "192.0.2.1", "path": "/v1/items"}
		for b.Loop() {
			if _, err := e.Allow(context.Background(), attrs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("native-engine", func(b *testing.B) {
		b.ReportAllocs()
		attrs := engine.Attrs{"ip": "192.0.2.1", "path": "/v1/items"}
		for b.Loop() {
			if _, err := native.Allow(context.Background(), attrs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("middleware", func(b *testing.B) { run(b, httplimit.Middleware(e)(ok), req) })
	b.Run("native-middleware", func(b *testing.B) { run(b, httplimit.Middleware(native)(ok), req) })
	b.Run("middleware/all+legacy+pk", func(b *testing.B) {
		run(b, httplimit.Middleware(e, httplimit.WithAllRules(), httplimit.WithLegacyHeaders(),
			httplimit.WithPartitionKeys([]byte("secret")))(ok), req)
	})
	// The fields alone, for a decision of the engine: the middleware's own work besides
	// building the request view.
	d, err := e.Allow(context.Background(), engine.Attrs{"ip": "192.0.2.9", "path": "/v1/items"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fields", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			httplimit.SetHeaders(w.h, d)
		}
	})
	refused := httptest.NewRequest("GET", "/refused", nil)
	refused.RemoteAddr = "192.0.2.1:4711"
	b.Run("refused", func(b *testing.B) { run(b, httplimit.Middleware(e)(ok), refused) })
}

// BenchmarkNativeAddresses is one gcra rule per client address on the native backend,
// over 1,024 addresses: the in-process comparison's rlctl cell (bench/cmd/inproc).
func BenchmarkNativeAddresses(b *testing.B) {
	cfg, diags := dsl.Parse(map[string][]byte{"b.hcl": []byte(`
policy "api" {
  rule "per_ip" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "1000000/s"
    burst     = 1000000
  }
}`)})
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		b.Fatal(err)
	}
	h := httplimit.Middleware(engine.New(engine.NewNative(luahost.New()), plan))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	reqs := make([]*http.Request, 1024)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/v1/items", nil)
		reqs[i].RemoteAddr = fmt.Sprintf("10.%d.%d.%d:4711", i>>16, (i>>8)&255, i&255)
	}
	w := &sink{h: http.Header{}}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, reqs[i&1023])
		i++
	}
}
