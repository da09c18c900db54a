package serve

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/rlctl/rlctl/engine"
)

// delayPolicy lets each user 1 request a second, with no burst beyond it.
const delayPolicy = `
policy "api" {
  clock = "client"
  rule "per_user" {
    algorithm = "gcra"
    key       = request.user
    rate      = "1/s"
    burst     = 1
  }
}
`

// TestHTTPDelay: a decision with max_delay_ms waits for its turn on the server and is
// answered allowed with delay_ms, requests arriving together spaced at the rule's rate; one
// whose turn is beyond its max delay is denied with its retry-after; max_delay_ms past
// MaxDelayMs, on a batch or with another cost is 400 saying why; on both backends.
func TestHTTPDelay(t *testing.T) {
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			var mu sync.Mutex
			var slept []time.Duration
			f := startWith(t, backend, map[string]string{"api.hcl": delayPolicy}, func(c *Config) {
				c.Engine = append(c.Engine, engine.WithSleep(func(ctx context.Context, d time.Duration) error {
					mu.Lock()
					slept = append(slept, d)
					mu.Unlock()
					return nil // the clock stands still: the requests arrive together
				}))
			})
			const req = `{"attributes": {"user": "acme"}, "max_delay_ms": 2500}`
			for i := range 3 {
				var d decisionBody
				if code, _ := f.post(t, "/v1/decide", req, &d); code != http.StatusOK || !d.Allowed || d.DelayMs == nil || *d.DelayMs != int64(i)*1000 {
					t.Fatalf("request %d: %d %+v, want allowed after %dms", i+1, code, d, i*1000)
				}
			}
			var d decisionBody
			if code, _ := f.post(t, "/v1/decide", req, &d); code != http.StatusOK || d.Allowed || d.RetryAfterMs != 3000 || d.DelayMs == nil || *d.DelayMs != 0 {
				t.Fatalf("4th: %d %+v, want denied, retry-after 3000ms (beyond 2500ms)", code, d)
			}
			if len(slept) != 2 || slept[1] != 2*time.Second {
				t.Fatalf("slept %v, want [1s 2s]", slept)
			}
			for _, bad := range []string{
				`{"attributes": {"user": "acme"}, "max_delay_ms": 5001}`,
				`{"attributes": {"user": "acme"}, "max_delay_ms": -1}`,
				`{"attributes": {"user": "acme"}, "cost": 2, "max_delay_ms": 10}`,
				`{"requests": [{"attributes": {"user": "acme"}}], "max_delay_ms": 10}`,
			} {
				var p listsBody
				if code, _ := f.post(t, "/v1/decide", bad, &p); code != http.StatusBadRequest || p.Detail == "" {
					t.Errorf("%s: %d %+v, want 400 saying why", bad, code, p)
				}
			}
		})
	}
}
