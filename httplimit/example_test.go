package httplimit_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/httplimit"
	"github.com/rlctl/rlctl/luahost"
)

// Two requests a minute per client address, behind a load balancer in 10.0.0.0/8. The
// engine runs embedded on luahost; with Redis the backend would be
// engine.NewRedis(redis.NewClient(...)). The clock is fixed only so the output is stable.
func Example() {
	cfg, diags := dsl.Parse(map[string][]byte{"api.hcl": []byte(`
policy "api" {
  rule "per_ip" {
    algorithm = "fixed_window"
    key       = request.ip
    limit     = 2
    window    = "1m"
  }
}`)})
	if diags.HasErrors() {
		log.Fatal(diags)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		log.Fatal(err)
	}
	clock := luahost.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	e := engine.New(engine.NewLocal(luahost.New(luahost.WithClock(clock))), plan)

	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	h := httplimit.Middleware(e,
		httplimit.WithTrustedProxies("X-Forwarded-For", netip.MustParsePrefix("10.0.0.0/8")),
	)(hello)

	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.1.2.3:5678" // the load balancer
		r.Header.Set("X-Forwarded-For", "198.51.100.7")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code)
		for _, k := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
			if v := w.Header().Get(k); v != "" {
				fmt.Printf("  %s: %s\n", k, v)
			}
		}
		clock.Advance(15 * time.Second)
	}
	// Output:
	// 200
	//   RateLimit-Policy: "api.per_ip";q=2;w=60
	//   RateLimit: "api.per_ip";r=1;t=60
	// 200
	//   RateLimit-Policy: "api.per_ip";q=2;w=60
	//   RateLimit: "api.per_ip";r=0;t=45
	// 429
	//   RateLimit-Policy: "api.per_ip";q=2;w=60
	//   RateLimit: "api.per_ip";r=0;t=30
	//   Retry-After: 30
}

// Headers gives a service that decides outside the middleware the same fields, here for a
// decision on two requests at once.
func ExampleHeaders() {
	cfg, diags := dsl.Parse(map[string][]byte{"edge.hcl": []byte(`
policy "edge" {
  rule "per_ip" {
    algorithm = "fixed_window"
    key       = request.remote_address
    limit     = 1
    window    = "10s"
  }
}`)})
	if diags.HasErrors() {
		log.Fatal(diags)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		log.Fatal(err)
	}
	clock := luahost.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	e := engine.New(engine.NewLocal(luahost.New(luahost.WithClock(clock))), plan)
	for range 2 {
		d, err := e.Allow(context.Background(), engine.Attrs{"remote_address": "198.51.100.7"})
		if err != nil {
			log.Fatal(err)
		}
		h := http.Header{}
		httplimit.Headers(h, d, httplimit.WithLegacyHeaders())
		fmt.Println(d.Allowed, h.Get("RateLimit"), h.Get("Retry-After"), h.Get("X-RateLimit-Remaining"))
	}
	// Output:
	// true "edge.per_ip";r=0;t=10  0
	// false "edge.per_ip";r=0;t=10 10 0
}
