package httplimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/httplimit"
	"github.com/rlctl/rlctl/luahost"
)

// start is where every virtual clock begins.
var start = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// rig is a real HTTP server on loopback running the middleware on an embedded engine
// whose clock (luahost's TIME for server-clock policies, engine.WithClock for
// client-clock ones) is one ManualClock.
type rig struct {
	t      *testing.T
	clock  *luahost.ManualClock
	srv    *httptest.Server
	client *http.Client

	mu   sync.Mutex
	last *engine.Decision
}

type rigOpts struct {
	backend engine.Backend // default: luahost on the rig's clock
	handler http.Handler   // default: 200 "ok"
	mw      []httplimit.Option
	wrap    func(http.Handler) http.Handler // around the middleware
	engine  []engine.Option                 // after the rig's clock and hooks
}

func newRig(t *testing.T, policy string, o rigOpts) *rig {
	t.Helper()
	cfg, diags := dsl.Parse(map[string][]byte{"test.hcl": []byte(policy)})
	if diags.HasErrors() {
		t.Fatalf("policy does not load: %v", diags)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := &rig{t: t, clock: luahost.NewManualClock(start)}
	if o.backend == nil {
		o.backend = engine.NewLocal(luahost.New(luahost.WithClock(g.clock)))
	}
	opts := append([]engine.Option{
		engine.WithClock(g.clock.Now),
		engine.WithHooks(engine.Hooks{Decided: func(d *engine.Decision) {
			g.mu.Lock()
			g.last = d
			g.mu.Unlock()
		}}),
	}, o.engine...)
	e := engine.New(o.backend, plan, opts...)
	if o.handler == nil {
		o.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	}
	h := httplimit.Middleware(e, o.mw...)(o.handler)
	if o.wrap != nil {
		h = o.wrap(h)
	}
	g.srv = httptest.NewUnstartedServer(h)
	g.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handler panics are expected in some tests
	g.srv.Start()
	t.Cleanup(g.srv.Close)
	g.client = g.srv.Client()
	return g
}

// decision returns the engine's latest decision: a copy, taken after the response arrived.
func (g *rig) decision() *engine.Decision {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last
}

type resp struct {
	status int
	header http.Header
	body   string
}

// do sends a request with the given headers ("Name: value" pairs) and reads the response.
func (g *rig) do(method, path string, headers ...string) resp {
	g.t.Helper()
	req, err := http.NewRequest(method, g.srv.URL+path, nil)
	if err != nil {
		g.t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	res, err := g.client.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		g.t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: string(body)}
}

func (g *rig) get(path string, headers ...string) resp { return g.do("GET", path, headers...) }

// policyItem and limitItem are RateLimit-Policy and RateLimit items, read strictly.
type policyItem struct {
	name string
	q, w int64 // w: -1 when absent
	qu   string
	pk   []byte
}

type limitItem struct {
	name string
	r, t int64 // t: -1 when absent
	pk   []byte
}

// parsePolicies reads RateLimit-Policy per draft -10: a List of Strings with a required
// non-negative Integer q, an optional Integer w > 0, optional String qu, optional Byte
// Sequence pk, and no other parameter.
func parsePolicies(t *testing.T, h http.Header) []policyItem {
	t.Helper()
	items, err := parseFieldLines(h.Values("RateLimit-Policy"))
	if err != nil {
		t.Fatalf("RateLimit-Policy %q: %v", h.Values("RateLimit-Policy"), err)
	}
	var out []policyItem
	for _, it := range items {
		p := policyItem{w: -1}
		var ok bool
		if p.name, ok = it.val.(string); !ok {
			t.Fatalf("RateLimit-Policy item %v is not a String", it.val)
		}
		for _, prm := range it.params {
			switch prm.key {
			case "q":
				p.q = nonNegInt(t, prm)
			case "w":
				if p.w = nonNegInt(t, prm); p.w == 0 {
					t.Fatalf("RateLimit-Policy %q: w=0, want > 0", p.name)
				}
			case "qu":
				if p.qu, ok = prm.val.(string); !ok {
					t.Fatalf("qu %v is not a String", prm.val)
				}
			case "pk":
				if p.pk, ok = prm.val.([]byte); !ok {
					t.Fatalf("pk %v is not a Byte Sequence", prm.val)
				}
			default:
				t.Fatalf("RateLimit-Policy: unexpected parameter %q", prm.key)
			}
		}
		if _, ok := it.param("q"); !ok {
			t.Fatalf("RateLimit-Policy %q: no q", p.name)
		}
		out = append(out, p)
	}
	return out
}

// parseLimits reads RateLimit per draft -10: a List of Strings with a required
// non-negative Integer r, an optional non-negative Integer t and optional pk.
func parseLimits(t *testing.T, h http.Header) []limitItem {
	t.Helper()
	items, err := parseFieldLines(h.Values("RateLimit"))
	if err != nil {
		t.Fatalf("RateLimit %q: %v", h.Values("RateLimit"), err)
	}
	var out []limitItem
	for _, it := range items {
		l := limitItem{t: -1}
		var ok bool
		if l.name, ok = it.val.(string); !ok {
			t.Fatalf("RateLimit item %v is not a String", it.val)
		}
		for _, prm := range it.params {
			switch prm.key {
			case "r":
				l.r = nonNegInt(t, prm)
			case "t":
				l.t = nonNegInt(t, prm)
			case "pk":
				if l.pk, ok = prm.val.([]byte); !ok {
					t.Fatalf("pk %v is not a Byte Sequence", prm.val)
				}
			default:
				t.Fatalf("RateLimit: unexpected parameter %q", prm.key)
			}
		}
		if _, ok := it.param("r"); !ok {
			t.Fatalf("RateLimit %q: no r", l.name)
		}
		out = append(out, l)
	}
	return out
}

func nonNegInt(t *testing.T, p sfParam) int64 {
	t.Helper()
	v, ok := p.val.(int64)
	if !ok || v < 0 {
		t.Fatalf("parameter %s=%v: want a non-negative Integer", p.key, p.val)
	}
	return v
}

// retryAfter reads Retry-After as RFC 9110 delay-seconds (1*DIGIT); -1 when absent.
func retryAfter(t *testing.T, h http.Header) int64 {
	t.Helper()
	vs := h.Values("Retry-After")
	if len(vs) == 0 {
		return -1
	}
	if len(vs) > 1 || vs[0] == "" || strings.Trim(vs[0], "0123456789") != "" {
		t.Fatalf("Retry-After %q is not delay-seconds", vs)
	}
	n, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func ceilSec(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// checkAgainst checks a response's fields against the engine's decision: one policy item
// per enforcing rule with its limit and window, RateLimit items with the rule's remaining
// and time, Retry-After from the decision and never earlier than any t.
func checkAgainst(t *testing.T, r resp, d *engine.Decision, all bool) {
	t.Helper()
	var enforcing []engine.RuleResult
	for _, rr := range d.Rules {
		if !rr.Shadow {
			enforcing = append(enforcing, rr)
		}
	}
	byName := map[string]engine.RuleResult{}
	pols := parsePolicies(t, r.header)
	if len(pols) != len(enforcing) {
		t.Fatalf("RateLimit-Policy has %d items, want %d (the enforcing rules)", len(pols), len(enforcing))
	}
	for i, p := range pols {
		rr := enforcing[i]
		if want := rr.Policy + "." + rr.Rule; p.name != want {
			t.Errorf("policy item %d is %q, want %q", i, p.name, want)
		}
		byName[p.name] = rr
		if p.q != rr.Limit {
			t.Errorf("%s: q=%d, want the limit %d", p.name, p.q, rr.Limit)
		}
		switch {
		case rr.Window == 0 && p.w != -1:
			t.Errorf("%s: w=%d, want none (no window)", p.name, p.w)
		case rr.Window > 0 && p.w != ceilSec(rr.Window):
			t.Errorf("%s: w=%d, want %d (window %v)", p.name, p.w, ceilSec(rr.Window), rr.Window)
		}
	}
	lims := parseLimits(t, r.header)
	if want := map[bool]int{false: 1, true: len(enforcing)}[all]; len(lims) != want {
		t.Fatalf("RateLimit has %d items (all=%v), want %d", len(lims), all, want)
	}
	maxT := int64(-1)
	for _, l := range lims {
		rr, ok := byName[l.name]
		if !ok {
			t.Fatalf("RateLimit item %q is not in RateLimit-Policy", l.name)
		}
		if l.r != rr.Remaining {
			t.Errorf("%s: r=%d, want %d", l.name, l.r, rr.Remaining)
		}
		var want int64
		switch {
		case !rr.Allowed && rr.RetryAfter == engine.Never, rr.Allowed && !d.Allowed,
			rr.Allowed && rr.Algorithm == "concurrency":
			want = -1
		case !rr.Allowed:
			want = ceilSec(rr.RetryAfter)
		default:
			want = ceilSec(rr.ResetAfter)
		}
		if l.t != want {
			t.Errorf("%s: t=%d, want %d (rule %+v)", l.name, l.t, want, rr)
		}
		maxT = max(maxT, l.t)
	}
	if !all {
		// The one item shown is the rule closest to exhaustion (or the refusing one).
		shown := byName[lims[0].name]
		for _, rr := range enforcing {
			if d.Allowed && rr.Remaining*shown.Limit < shown.Remaining*rr.Limit {
				t.Errorf("RateLimit shows %s (%d/%d) but %s.%s has less left (%d/%d)",
					lims[0].name, shown.Remaining, shown.Limit, rr.Policy, rr.Rule, rr.Remaining, rr.Limit)
			}
		}
		if !d.Allowed && shown.Allowed {
			t.Errorf("a refused request shows %s, a rule that allowed it", lims[0].name)
		}
	}
	ra := retryAfter(t, r.header)
	switch {
	case d.Allowed && ra != -1:
		t.Errorf("Retry-After %d on an allowed request", ra)
	case !d.Allowed && d.RetryAfter == engine.Never && ra != -1:
		t.Errorf("Retry-After %d on a request that can never pass", ra)
	case !d.Allowed && d.RetryAfter != engine.Never:
		if ra != ceilSec(d.RetryAfter) {
			t.Errorf("Retry-After %d, want %d (retry-after %v rounded up)", ra, ceilSec(d.RetryAfter), d.RetryAfter)
		}
		if ra < maxT {
			t.Errorf("Retry-After %d is earlier than t=%d", ra, maxT)
		}
	}
}

const twoRules = `
policy "api" {
  clock = "%s"
  rule "burst" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "1/s"
    burst     = 5
  }
  rule "hourly" {
    algorithm = "fixed_window"
    key       = request.ip
    limit     = 8
    window    = "1h"
  }
}`

// TestHeadersMatchDecision sends requests until the limits refuse them and checks every
// response's fields, parsed strictly, against the engine's decision, with the closest rule
// only and with all rules.
func TestHeadersMatchDecision(t *testing.T) {
	for _, clock := range []string{"server", "client"} {
		for _, all := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/all=%v", clock, all), func(t *testing.T) {
				var mw []httplimit.Option
				if all {
					mw = append(mw, httplimit.WithAllRules())
				}
				g := newRig(t, fmt.Sprintf(twoRules, clock), rigOpts{mw: mw})
				var statuses []int
				for i := range 14 {
					r := g.get("/x")
					statuses = append(statuses, r.status)
					d := g.decision()
					if want := map[bool]int{true: 200, false: 429}[d.Allowed]; r.status != want {
						t.Fatalf("request %d: status %d, decision allowed=%v", i, r.status, d.Allowed)
					}
					checkAgainst(t, r, d, all)
					g.clock.Advance(300 * time.Millisecond)
				}
				// Requests 300ms apart: the burst of 5 plus the one that refilled by 1.5s,
				// then one a second (2.1s, 3s) until the hourly 8 are used up.
				if got := fmt.Sprint(statuses); got != "[200 200 200 200 200 200 429 200 429 429 200 429 429 429]" {
					t.Errorf("statuses %v", got)
				}
			})
		}
	}
}

// TestHeaderExample pins one exchange byte for byte: the fields as a client sees them.
func TestHeaderExample(t *testing.T) {
	g := newRig(t, fmt.Sprintf(twoRules, "server"), rigOpts{mw: []httplimit.Option{httplimit.WithLegacyHeaders()}})
	for range 5 {
		g.get("/x")
	}
	r := g.get("/x")
	want := map[string]string{
		"Ratelimit-Policy":      `"api.burst";q=5;w=5, "api.hourly";q=8;w=3600`,
		"Ratelimit":             `"api.burst";r=0;t=1`,
		"Retry-After":           "1",
		"X-Ratelimit-Limit":     "5",
		"X-Ratelimit-Remaining": "0",
		"X-Ratelimit-Reset":     "1",
		"Content-Type":          "application/problem+json",
	}
	for k, v := range want {
		if got := r.header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	if r.status != 429 {
		t.Errorf("status %d, want 429", r.status)
	}
}

// TestRetryAfterHonoured: on every algorithm and both clocks, a client that waits the
// Retry-After it was given gets through, and one that retries a second earlier does not.
func TestRetryAfterHonoured(t *testing.T) {
	algs := map[string]string{
		"fixed_window":   `limit = 3` + "\n" + `window = "10s"`,
		"sliding_log":    `limit = 3` + "\n" + `window = "10s"`,
		"sliding_window": `limit = 3` + "\n" + `window = "10s"`,
		"token_bucket":   `capacity = 3` + "\n" + `rate = "1/7s"`,
		"leaky_bucket":   `capacity = 3` + "\n" + `rate = "1/7s"`,
		"gcra":           `rate = "1/7s"` + "\n" + `burst = 3`,
	}
	for alg, params := range algs {
		for _, clock := range []string{"server", "client"} {
			t.Run(alg+"/"+clock, func(t *testing.T) {
				g := newRig(t, fmt.Sprintf(`
policy "p" {
  clock = %q
  rule "r" {
    algorithm = %q
    key       = request.ip
    %s
  }
}`, clock, alg, params), rigOpts{})
				for round := range 4 {
					var r resp
					for i := 0; ; i++ {
						if r = g.get("/"); r.status == 429 {
							break
						}
						if i > 10 {
							t.Fatal("never refused")
						}
						g.clock.Advance(250 * time.Millisecond)
					}
					checkAgainst(t, r, g.decision(), false)
					ra := retryAfter(t, r.header)
					if ra < 1 {
						t.Fatalf("round %d: Retry-After %d", round, ra)
					}
					g.clock.Advance(time.Duration(ra-1) * time.Second)
					if r := g.get("/"); r.status != 429 {
						t.Fatalf("round %d: retrying after %ds, a second early, got %d", round, ra-1, r.status)
					}
					g.clock.Advance(time.Second)
					if r := g.get("/"); r.status != 200 {
						t.Fatalf("round %d: retrying after Retry-After %ds got %d", round, ra, r.status)
					}
					// Move off the whole-second grid so rounding up matters next round.
					g.clock.Advance(time.Duration(round+1) * 137 * time.Millisecond)
				}
			})
		}
	}
}

const perIP = `
policy "p" {
  rule "one" {
    algorithm = "fixed_window"
    key       = request.ip
    limit     = 1
    window    = "1h"
  }
}`

// TestForwardedFor: X-Forwarded-For from a peer that is not a trusted proxy is ignored, so
// a client cannot get a fresh limit by inventing addresses; from a trusted proxy it is
// read from the right.
func TestForwardedFor(t *testing.T) {
	t.Run("untrusted peer", func(t *testing.T) {
		g := newRig(t, perIP, rigOpts{mw: []httplimit.Option{
			httplimit.WithTrustedProxies("X-Forwarded-For", netip.MustParsePrefix("10.0.0.0/8")),
		}})
		if r := g.get("/", "X-Forwarded-For: 198.51.100.1"); r.status != 200 {
			t.Fatalf("first request: %d", r.status)
		}
		if k := g.decision().Rules[0].Key; !strings.HasSuffix(k, ":127.0.0.1") {
			t.Errorf("key %q, want the peer 127.0.0.1", k)
		}
		if r := g.get("/", "X-Forwarded-For: 198.51.100.2"); r.status != 429 {
			t.Fatalf("a spoofed X-Forwarded-For from an untrusted peer got a fresh limit: %d", r.status)
		}
		if r := g.get("/", "Forwarded: for=198.51.100.3"); r.status != 429 {
			t.Fatalf("a spoofed Forwarded got a fresh limit: %d", r.status)
		}
	})
	t.Run("trusted proxy", func(t *testing.T) {
		g := newRig(t, perIP, rigOpts{mw: []httplimit.Option{
			httplimit.WithTrustedProxies("X-Forwarded-For", netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")),
		}})
		for _, c := range []struct {
			xff  []string
			ip   string
			want int
		}{
			{[]string{"198.51.100.1"}, "198.51.100.1", 200},
			{[]string{"198.51.100.2"}, "198.51.100.2", 200},
			{[]string{"198.51.100.1"}, "198.51.100.1", 429},
			// The client wrote 203.0.113.9 itself; the proxy appended its real address.
			{[]string{"203.0.113.9, 198.51.100.1"}, "198.51.100.1", 429},
			// Two proxies: the inner trusted hop is skipped.
			{[]string{"198.51.100.3, 10.1.2.3"}, "198.51.100.3", 200},
			// Several field lines are one list; the last line is the nearest hop.
			{[]string{"203.0.113.9", "198.51.100.4,10.1.2.3"}, "198.51.100.4", 200},
			{[]string{"[2001:db8::1]:4711"}, "2001:db8::1", 200},
		} {
			var hs []string
			for _, v := range c.xff {
				hs = append(hs, "X-Forwarded-For: "+v)
			}
			if r := g.get("/", hs...); r.status != c.want {
				t.Errorf("X-Forwarded-For %q: status %d, want %d", c.xff, r.status, c.want)
			}
			if k := g.decision().Rules[0].Key; !strings.HasSuffix(k, ":"+c.ip) {
				t.Errorf("X-Forwarded-For %q: key %q, want client %s", c.xff, k, c.ip)
			}
		}
	})
}

const uploads = `
policy "uploads" {
  match = request.method == "POST"
  rule "per_user" {
    algorithm = "concurrency"
    key       = request.user
    max       = 1
    ttl       = "10m"
  }
}`

// TestConcurrency: a second upload while one runs gets 503 with a problem document, and
// the lease comes back when the handler returns, and when it panics.
func TestConcurrency(t *testing.T) {
	entered := make(chan struct{})
	proceed := make(chan struct{})
	g := newRig(t, uploads, rigOpts{
		mw: []httplimit.Option{httplimit.WithHeader("X-User", "user")},
		handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/hold":
				entered <- struct{}{}
				<-proceed
			case "/panic":
				panic(http.ErrAbortHandler)
			}
			io.WriteString(w, "ok")
		}),
	})
	letGo := sync.OnceFunc(func() { close(proceed) })
	t.Cleanup(letGo) // before the server closes, which waits for the held request
	done := make(chan resp, 1)
	go func() {
		req, _ := http.NewRequest("POST", g.srv.URL+"/hold", nil)
		req.Header.Set("X-User", "alice")
		res, err := g.client.Do(req)
		if err != nil {
			done <- resp{}
			return
		}
		res.Body.Close()
		done <- resp{status: res.StatusCode}
	}()
	<-entered

	r := g.do("POST", "/upload", "X-User: alice")
	if r.status != 503 {
		t.Fatalf("second concurrent upload: %d, want 503", r.status)
	}
	checkAgainst(t, r, g.decision(), false)
	p := decodeProblem(t, r)
	if p.Type != "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity" || p.Status != 503 ||
		p.Title != "Service Unavailable" || fmt.Sprint(p.Violated) != "[uploads.per_user]" {
		t.Errorf("problem %+v", p)
	}
	if pol := parsePolicies(t, r.header); pol[0].qu != "concurrent-requests" || pol[0].w != -1 || pol[0].q != 1 {
		t.Errorf("policy item %+v, want q=1, qu=concurrent-requests, no w", pol[0])
	}
	r = g.do("POST", "/upload", "X-User: bob")
	if r.status != 200 {
		t.Fatalf("another user: %d", r.status)
	}
	checkAgainst(t, r, g.decision(), false)

	letGo()
	if r := <-done; r.status != 200 {
		t.Fatalf("held upload: %d", r.status)
	}
	if r := g.do("POST", "/upload", "X-User: alice"); r.status != 200 {
		t.Fatalf("after the held upload returned: %d, want 200 (lease released)", r.status)
	}

	// A panicking handler: the connection is aborted, the lease still comes back.
	for range 3 {
		req, _ := http.NewRequest("POST", g.srv.URL+"/panic", nil)
		req.Header.Set("X-User", "alice")
		if res, err := g.client.Do(req); err == nil {
			res.Body.Close()
			t.Fatalf("a panicking handler answered %d", res.StatusCode)
		}
		if d := g.decision(); !d.Allowed {
			t.Fatal("the panicking request was refused: a lease leaked")
		}
	}
	if r := g.do("POST", "/upload", "X-User: alice"); r.status != 200 {
		t.Fatalf("after panics: %d, want 200 (leases released)", r.status)
	}
}

type problemDoc struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail"`
	Violated []string `json:"violated-policies"`
}

func decodeProblem(t *testing.T, r resp) problemDoc {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q", ct)
	}
	dec := json.NewDecoder(strings.NewReader(r.body))
	dec.DisallowUnknownFields()
	var p problemDoc
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("problem body %q: %v", r.body, err)
	}
	if p.Status != r.status {
		t.Errorf("problem status %d, response %d", p.Status, r.status)
	}
	return p
}

// TestShadow: a shadow rule that would refuse everything changes nothing in the response,
// byte for byte, against the same policy without it.
func TestShadow(t *testing.T) {
	const base = `
policy "p" {
  rule "real" {
    algorithm = "fixed_window"
    key       = request.ip
    limit     = 3
    window    = "1m"
  }
  %s
}`
	const shadow = `
  rule "trial" {
    algorithm = "fixed_window"
    key       = request.ip
    limit     = 1
    window    = "1m"
    shadow    = true
  }`
	with := newRig(t, fmt.Sprintf(base, shadow), rigOpts{mw: []httplimit.Option{httplimit.WithAllRules(), httplimit.WithLegacyHeaders()}})
	without := newRig(t, fmt.Sprintf(base, ""), rigOpts{mw: []httplimit.Option{httplimit.WithAllRules(), httplimit.WithLegacyHeaders()}})
	for i := range 5 {
		a, b := with.get("/"), without.get("/")
		d := with.decision()
		if len(d.Rules) != 2 || d.Rules[1].Allowed != (i == 0) {
			t.Fatalf("request %d: the shadow rule did not run as expected: %+v", i, d.Rules)
		}
		a.header.Del("Date")
		b.header.Del("Date")
		if a.status != b.status || a.body != b.body || fmt.Sprint(a.header) != fmt.Sprint(b.header) {
			t.Errorf("request %d: with a shadow rule %d %v %q; without %d %v %q", i, a.status, a.header, a.body, b.status, b.header, b.body)
		}
		if strings.Contains(fmt.Sprint(a.header), "trial") {
			t.Errorf("request %d: the shadow rule shows in the headers: %v", i, a.header)
		}
	}

	// A request only shadow rules apply to gets no RateLimit fields at all.
	only := newRig(t, `
policy "p" {
  rule "trial" {
    algorithm = "fixed_window"
    key       = request.ip
    limit     = 1
    window    = "1m"
    shadow    = true
  }
}`, rigOpts{})
	for range 3 {
		r := only.get("/")
		if r.status != 200 || r.header.Get("RateLimit") != "" || r.header.Get("RateLimit-Policy") != "" {
			t.Errorf("shadow-only: %d %v", r.status, r.header)
		}
	}
}

// TestProblem: the 429 problem document, and a request that can never pass: no Retry-After,
// and the detail says why.
func TestProblem(t *testing.T) {
	g := newRig(t, `
policy "files" {
  rule "bytes" {
    algorithm = "token_bucket"
    key       = request.ip
    capacity  = 10
    rate      = "1/s"
    cost      = tonumber(request.size)
  }
}`, rigOpts{mw: []httplimit.Option{httplimit.WithHeader("X-Size", "size"), httplimit.WithShortNames()}})
	g.get("/", "X-Size: 8")
	r := g.get("/", "X-Size: 5")
	if r.status != 429 {
		t.Fatalf("status %d", r.status)
	}
	p := decodeProblem(t, r)
	if p.Type != "https://iana.org/assignments/http-problem-types#quota-exceeded" || p.Title != "Too Many Requests" ||
		fmt.Sprint(p.Violated) != "[bytes]" || !strings.Contains(p.Detail, "Retry in 3s") {
		t.Errorf("problem %+v", p)
	}
	if ra := retryAfter(t, r.header); ra != 3 {
		t.Errorf("Retry-After %d, want 3", ra)
	}
	if got := r.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q", got)
	}

	r = g.get("/", "X-Size: 11")
	if d := g.decision(); d.RetryAfter != engine.Never {
		t.Fatalf("retry-after %v, want Never", d.RetryAfter)
	}
	if r.status != 429 || r.header.Get("Retry-After") != "" {
		t.Errorf("never passes: status %d, Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
	if l := parseLimits(t, r.header); len(l) != 1 || l[0].t != -1 {
		t.Errorf("never passes: RateLimit %+v, want no t", l)
	}
	if p := decodeProblem(t, r); !strings.Contains(p.Detail, "No Retry-After") {
		t.Errorf("detail %q does not say why there is no Retry-After", p.Detail)
	}
}

// TestEngineError: an expression that fails for a request is a 500 problem by default and
// never runs the handler; the error handler can let it through.
func TestEngineError(t *testing.T) {
	const policy = `
policy "p" {
  rule "r" {
    algorithm = "token_bucket"
    key       = request.ip
    capacity  = 10
    rate      = "1/s"
    cost      = tonumber(request.size)
  }
}`
	ran := false
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran = true })
	g := newRig(t, policy, rigOpts{handler: h, mw: []httplimit.Option{httplimit.WithHeader("X-Size", "size")}})
	r := g.get("/", "X-Size: lots")
	if r.status != 500 || ran {
		t.Fatalf("status %d, handler ran %v", r.status, ran)
	}
	if p := decodeProblem(t, r); p.Title != "Internal Server Error" || strings.Contains(p.Detail, "tonumber") {
		t.Errorf("problem %+v (must not leak the policy)", p)
	}

	var got error
	g = newRig(t, policy, rigOpts{handler: h, mw: []httplimit.Option{
		httplimit.WithHeader("X-Size", "size"),
		httplimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error, next http.Handler) {
			got = err
			next.ServeHTTP(w, r)
		}),
	}})
	if r := g.get("/", "X-Size: lots"); r.status != 200 || !ran || !errors.Is(got, engine.ErrRequest) {
		t.Errorf("fail open: status %d, ran %v, err %v", r.status, ran, got)
	}
}

// TestDeniedHandler: a custom refusal gets the fields already set and the decision.
func TestDeniedHandler(t *testing.T) {
	g := newRig(t, perIP, rigOpts{mw: []httplimit.Option{
		httplimit.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, d *engine.Decision) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusTeapot)
			fmt.Fprintf(w, "slow down, %s (%s)", d.Rules[d.Decider].Rule, w.Header().Get("Retry-After"))
		}),
	}})
	g.get("/")
	r := g.get("/")
	if r.status != http.StatusTeapot || r.body != "slow down, one (3600)" || r.header.Get("RateLimit") == "" {
		t.Errorf("%d %q %v", r.status, r.body, r.header)
	}
}

// TestPartitionKey: pk is the same for requests sharing a counter, differs between
// counters, and is not the key or its plain hash.
func TestPartitionKey(t *testing.T) {
	g := newRig(t, perIP, rigOpts{mw: []httplimit.Option{
		httplimit.WithPartitionKeys([]byte("secret")),
		httplimit.WithTrustedProxies("Forwarded", netip.MustParsePrefix("127.0.0.1/32")),
	}})
	pk := func(client string) string {
		r := g.get("/", "Forwarded: for="+client)
		p, l := parsePolicies(t, r.header), parseLimits(t, r.header)
		if len(p[0].pk) != 9 || string(p[0].pk) != string(l[0].pk) {
			t.Fatalf("pk %x / %x", p[0].pk, l[0].pk)
		}
		if strings.Contains(r.header.Get("RateLimit"), client) {
			t.Fatalf("the client address is in %q", r.header.Get("RateLimit"))
		}
		return string(p[0].pk)
	}
	a1, a2, b := pk("192.0.2.1"), pk("192.0.2.1"), pk(`"[2001:db8::7]:80"`)
	if a1 != a2 || a1 == b {
		t.Errorf("pk %x %x %x: want equal for one client, different for another", a1, a2, b)
	}
	if k := g.decision().Rules[0].Key; !strings.HasSuffix(k, ":2001:db8::7") {
		t.Errorf("key %q", k)
	}
}

// failing is a backend that is down.
type failing struct{}

func (failing) Eval(context.Context, *algorithms.Script, []string, []string) (any, error) {
	return nil, errors.New("connection refused")
}
func (failing) Del(context.Context, ...string) error { return errors.New("connection refused") }

// TestBackendDown: on_error decides; without a counter there are no RateLimit fields.
// "deny" is a 503 with the breaker's cooldown as Retry-After.
func TestBackendDown(t *testing.T) {
	for _, mode := range []string{"allow", "deny"} {
		t.Run(mode, func(t *testing.T) {
			g := newRig(t, fmt.Sprintf(`
policy "p" {
  on_error = %q
  rule "r" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "1/s"
    burst     = 1
  }
}`, mode), rigOpts{backend: failing{}})
			r := g.get("/")
			if r.header.Get("RateLimit") != "" || r.header.Get("RateLimit-Policy") != "" {
				t.Errorf("RateLimit fields without a counter: %v", r.header)
			}
			if mode == "allow" {
				if r.status != 200 {
					t.Errorf("status %d", r.status)
				}
				return
			}
			p := decodeProblem(t, r)
			if r.status != 503 || retryAfter(t, r.header) != 1 || fmt.Sprint(p.Violated) != "[p.r]" ||
				!strings.Contains(p.Detail, "unavailable") {
				t.Errorf("status %d, Retry-After %q, problem %+v", r.status, r.header.Get("Retry-After"), p)
			}
		})
	}
}

// TestAttributes: what policies see of a request.
func TestAttributes(t *testing.T) {
	type user struct{ engine.Attrs }
	type ctxKey struct{}
	names := []string{"ip", "method", "path", "host", "content_length", "user", "plan", "api_key", "region", "x-secret"}
	// One rule whose key template reads every attribute; the key records them.
	tmpl := ""
	for _, n := range names {
		tmpl += fmt.Sprintf(`${request[%q]}|`, n)
	}
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "Bearer good" {
				r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, &user{engine.Attrs{"user": "alice", "plan": "pro", "ip": "spoof"}}))
			}
			next.ServeHTTP(w, r)
		})
	}
	g := newRig(t, `
policy "p" {
  rule "r" {
    algorithm = "gcra"
    key       = "`+tmpl+`"
    rate      = "1000/s"
    burst     = 1000
  }
}`, rigOpts{mw: []httplimit.Option{
		httplimit.WithHeader("x-api-key", "api_key"),
		httplimit.WithAttr("region", func(*http.Request) string { return "eu" }),
		httplimit.WithIdentity(func(r *http.Request) dsl.Request {
			if u, ok := r.Context().Value(ctxKey{}).(*user); ok {
				return u
			}
			return nil
		}),
	}, wrap: auth})

	read := func(headers ...string) engine.Attrs {
		g.do("PUT", "/a%2Fb/c?q=1", headers...)
		k := g.decision().Rules[0].Key
		parts := strings.Split(k[strings.Index(k, ":r:gcra:")+len(":r:gcra:"):], "|")
		seen := engine.Attrs{}
		for i, n := range names {
			seen[n] = parts[i]
		}
		return seen
	}
	got := read("Authorization: Bearer good", "X-Api-Key: k1", "X-Secret: s")
	host := strings.TrimPrefix(g.srv.URL, "http://")
	host = host[:strings.LastIndexByte(host, ':')]
	want := engine.Attrs{"ip": "127.0.0.1", "method": "PUT", "path": "/a/b/c", "host": host, "content_length": "0",
		"user": "alice", "plan": "pro", "api_key": "k1", "region": "eu", "x-secret": ""}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("attributes\n got %v\nwant %v", got, want)
	}
	got = read()
	if got["user"] != "" || got["api_key"] != "" {
		t.Errorf("anonymous: %v", got)
	}
}
