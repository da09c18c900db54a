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

// policies/public_api.hcl in front of an API behind load balancers in 10.0.0.0/8: a
// signed-in free user has a burst of 20 requests, then 10 a second.
func ExampleMiddleware_publicAPI() {
	// In process; on Redis: engine.NewRedis(rdb), with rdb's options as in Embed in Go.
	// The clock stands still only so that this output is stable.
	clock := luahost.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	e, err := engine.Load(engine.NewNative(luahost.New(luahost.WithClock(clock))), []string{"../policies/public_api.hcl"})
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/items", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `{"items":["apple","pear"]}`)
	})
	limited := httplimit.Middleware(e,
		// Believe X-Forwarded-For only from the load balancers, read from the right.
		httplimit.WithTrustedProxies("X-Forwarded-For", netip.MustParsePrefix("10.0.0.0/8")),
		// request.user, request.tenant, request.plan: what authenticate found, nil if none.
		httplimit.WithIdentity(func(r *http.Request) dsl.Request {
			if id, ok := r.Context().Value(identityKey{}).(engine.Attrs); ok {
				return id
			}
			return nil
		}),
	)(mux)
	handler := authenticate(limited) // http.ListenAndServe(addr, handler) in your program

	for i := 1; i <= 21; i++ {
		r := httptest.NewRequest("GET", "/v1/items", nil)
		r.RemoteAddr = "10.1.2.3:5678" // a load balancer
		r.Header.Set("X-Forwarded-For", "198.51.100.7")
		r.Header.Set("Authorization", "Bearer demo-free")
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		if i == 1 || i >= 20 {
			fmt.Println(i, w.Code)
			for _, k := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
				if v := w.Header().Get(k); v != "" {
					fmt.Printf("  %s: %s\n", k, v)
				}
			}
		}
	}
	// Output:
	// 1 200
	//   RateLimit-Policy: "public_api.per_user";q=20;w=2, "public_api.per_tenant";q=1000;w=60
	//   RateLimit: "public_api.per_user";r=19;t=1
	// 20 200
	//   RateLimit-Policy: "public_api.per_user";q=20;w=2, "public_api.per_tenant";q=1000;w=60
	//   RateLimit: "public_api.per_user";r=0;t=2
	// 21 429
	//   RateLimit-Policy: "public_api.per_user";q=20;w=2, "public_api.per_tenant";q=1000;w=60
	//   RateLimit: "public_api.per_user";r=0;t=1
	//   Retry-After: 1
}

type identityKey struct{}

// authenticate stands in for your authentication middleware: it puts the caller's
// attributes in the request's context.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer demo-free" {
			id := engine.Attrs{"user": "alice", "tenant": "acme", "plan": "free"}
			r = r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
		}
		next.ServeHTTP(w, r)
	})
}
