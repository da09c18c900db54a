package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/go-chi/httprate"
	"golang.org/x/time/rate"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/httplimit"
	"github.com/rlctl/rlctl/luahost"
)

// contender is one middleware in front of ok. build returns a new one with empty state:
// with strict, a limit of 3 requests an hour per client address (the sanity check);
// without, a limit per client address that the measurement never reaches.
type contender struct {
	name  string
	rlctl bool // an rlctl contender: its marginal is compared with httprate's
	build func(next http.Handler, strict bool) (http.Handler, error)
}

// ok is the handler every contender guards.
var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

const bareName, httprateName = "bare handler", "go-chi/httprate (LimitByIP)"

func contenders() []contender {
	cs := []contender{
		{name: bareName, build: func(next http.Handler, _ bool) (http.Handler, error) { return next, nil }},
		{name: httprateName, build: func(next http.Handler, strict bool) (http.Handler, error) {
			if strict {
				return httprate.LimitByIP(3, time.Hour)(next), nil
			}
			return httprate.LimitByIP(1_000_000_000, time.Second)(next), nil
		}},
		{name: "x/time/rate, per-IP map under a mutex", build: func(next http.Handler, strict bool) (http.Handler, error) {
			if strict {
				return newPerIP(rate.Limit(3.0/3600), 3, next), nil
			}
			return newPerIP(1_000_000, 1_000_000, next), nil
		}},
	}
	for _, b := range []struct {
		name string
		new  func() engine.Backend
	}{
		{"luahost", func() engine.Backend { return engine.NewLocal(luahost.New()) }},
		{"native", func() engine.Backend { return engine.NewNative(luahost.New()) }},
	} {
		for _, alg := range []string{"gcra", "fixed_window"} {
			cs = append(cs, contender{
				name:  fmt.Sprintf("rlctl %s, %s", b.name, alg),
				rlctl: true,
				build: func(next http.Handler, strict bool) (http.Handler, error) {
					e, err := newEngine(b.new(), policy(alg, strict))
					if err != nil {
						return nil, err
					}
					return httplimit.Middleware(e)(next), nil
				},
			})
		}
	}
	return cs
}

// policy is one rule keyed by the client address, as httplimit's BenchmarkMiddleware
// writes it, without a match: every request is decided.
func policy(alg string, strict bool) string {
	var params string
	switch {
	case alg == "gcra" && strict:
		params = `rate = "3/h"` + "\n    burst = 3"
	case alg == "gcra":
		params = `rate = "1000000/s"` + "\n    burst = 1000000"
	case strict:
		params = "limit = 3\n    window = \"1h\""
	default:
		params = "limit = 1000000000\n    window = \"1s\""
	}
	return fmt.Sprintf(`
policy "api" {
  rule "per_ip" {
    algorithm = %q
    key       = request.ip
    %s
  }
}`, alg, params)
}

func newEngine(b engine.Backend, src string) (*engine.Engine, error) {
	cfg, diags := dsl.Parse(map[string][]byte{"inproc.hcl": []byte(src)})
	if diags.HasErrors() {
		return nil, diags
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		return nil, err
	}
	return engine.New(b, plan), nil
}

// perIP is the usual x/time/rate middleware: a limiter per client address in a map under a
// mutex (without the sweeper of idle limiters a long-running server would add).
type perIP struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	r     rate.Limit
	burst int
	next  http.Handler
}

func newPerIP(r rate.Limit, burst int, next http.Handler) *perIP {
	return &perIP{m: map[string]*rate.Limiter{}, r: r, burst: burst, next: next}
}

func (p *perIP) limiter(ip string) *rate.Limiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.m[ip]
	if !ok {
		l = rate.NewLimiter(p.r, p.burst)
		p.m[ip] = l
	}
	return l
}

func (p *perIP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	if !p.limiter(ip).Allow() {
		http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
		return
	}
	p.next.ServeHTTP(w, r)
}

// sanity checks that c, built strict, admits 3 requests from one address and refuses the
// 4th, and that another address is still admitted after that: the tables never compare a
// middleware that does not limit. The bare handler limits nothing and is not checked.
func sanity(c contender) error {
	if c.name == bareName {
		return nil
	}
	h, err := c.build(ok, true)
	if err != nil {
		return err
	}
	send := func(addr string) int {
		req := httptest.NewRequest("GET", "/v1/items", nil)
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := 1; i <= 4; i++ {
		want := http.StatusOK
		if i == 4 {
			want = http.StatusTooManyRequests
		}
		if got := send("192.0.2.1:4711"); got != want {
			return fmt.Errorf("request %d of a limit of 3: status %d, want %d", i, got, want)
		}
	}
	if got := send("192.0.2.2:4711"); got != http.StatusOK {
		return fmt.Errorf("another address after the first was refused: status %d, want 200", got)
	}
	return nil
}
