package httplimit_test

import (
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/rlctl/rlctl/httplimit"
)

// costHandler answers with the status in the query's s (200 by default) and reports the
// cost in n, when given.
var costHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64); err == nil {
		httplimit.ReportCost(r, n)
	}
	status := http.StatusOK
	if s, err := strconv.Atoi(r.URL.Query().Get("s")); err == nil {
		status = s
	}
	w.WriteHeader(status)
	io.WriteString(w, "done")
})

const tokensPolicy = `
policy "llm" {
  clock = "client"
  rule "tokens" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "100/m"
    burst     = 100
  }
}`

// TestWithSettle: each request is charged the estimate, then the cost its handler
// reported: the next request sees what is left, an overdraft is owed and refused until
// earned back, and a request that reports nothing keeps its estimate.
func TestWithSettle(t *testing.T) {
	g := newRig(t, tokensPolicy, rigOpts{handler: costHandler, mw: []httplimit.Option{httplimit.WithSettle(10)}})
	if r := g.get("/?n=30"); r.status != 200 {
		t.Fatalf("first: %d", r.status)
	}
	// 30 settled, 10 reserved now: 60 left.
	if r := g.get("/?n=10"); r.status != 200 || r.header.Get("RateLimit") != `"llm.tokens";r=60;t=24` {
		t.Fatalf("second: %d %q, want 200 with r=60", r.status, r.header.Get("RateLimit"))
	}
	if r := g.get("/"); r.status != 200 || r.header.Get("RateLimit") != `"llm.tokens";r=50;t=30` {
		t.Fatalf("third: %d %q, want 200 with r=50", r.status, r.header.Get("RateLimit"))
	}
	// 50 used; this one uses 150: 100 past the burst, owed for 100 × 600ms.
	if r := g.get("/?n=150"); r.status != 200 {
		t.Fatalf("fourth: %d", r.status)
	}
	r := g.get("/")
	if r.status != 429 || r.header.Get("Retry-After") != "66" {
		t.Fatalf("in debt: %d, Retry-After %q; want 429, 66 (a 10-token estimate waits 110 tokens' time)", r.status, r.header.Get("Retry-After"))
	}
}

// TestWithCountOnly: only failed logins count: successes never use the quota, the third
// failure is the last admitted, and what a successful request was charged on its way in
// comes back.
func TestWithCountOnly(t *testing.T) {
	g := newRig(t, `
policy "login" {
  clock = "client"
  rule "failures" {
    algorithm = "fixed_window"
    key       = request.ip
    limit     = 3
    window    = "15m"
  }
}`, rigOpts{handler: costHandler, mw: []httplimit.Option{httplimit.WithCountOnly(func(s int) bool { return s == http.StatusUnauthorized })}})
	for i := range 10 {
		if r := g.get("/"); r.status != 200 {
			t.Fatalf("success %d: %d", i+1, r.status)
		}
	}
	for i := range 3 {
		if r := g.get("/?s=401"); r.status != 401 {
			t.Fatalf("failure %d: %d, want the handler's 401", i+1, r.status)
		}
	}
	if r := g.get("/"); r.status != 429 {
		t.Fatalf("after 3 failures: %d, want 429", r.status)
	}
}
