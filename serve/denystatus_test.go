package serve

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// denyPolicy lets each user 2 exports at once, then one a minute.
const denyPolicy = `
policy "exports" {
  match = request.path == "/export"
  rule "per_user" {
    algorithm = "gcra"
    key       = request.user
    rate      = "1/m"
    burst     = 2
  }
}
`

// TestHTTPDenyStatus: /v1/decide?deny_status=429 answers a denial 429 with the body and
// the RateLimit, RateLimit-Policy and Retry-After fields that the same denial has at 200,
// and an allowed decision 200; a batch, at_most and settle denied are 429 too; any other
// value, the parameter given twice or on /v1/peek is 400 saying so; on both backends.
func TestHTTPDenyStatus(t *testing.T) {
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			f := start(t, backend, map[string]string{"exports.hcl": denyPolicy})
			const ann = `{"attributes": {"path": "/export", "user": "ann"}}`
			for i := range 2 {
				var d decisionBody
				if code, h := f.post(t, "/v1/decide?deny_status=429", ann, &d); code != http.StatusOK || !d.Allowed || h.Get("RateLimit") == "" || h.Get("Retry-After") != "" {
					t.Fatalf("request %d: %d %+v %v, want 200 allowed with RateLimit and no Retry-After", i+1, code, d, h)
				}
			}
			// The clock stands still: the denial at 200 and at 429 are the same denial.
			var plain, asked decisionBody
			code, plainH := f.post(t, "/v1/decide", ann, &plain)
			if code != http.StatusOK || plain.Allowed || plain.RetryAfterMs != 60000 {
				t.Fatalf("3rd without deny_status: %d %+v, want 200 denied for 60000ms", code, plain)
			}
			code, askedH := f.post(t, "/v1/decide?deny_status=429", ann, &asked)
			if code != http.StatusTooManyRequests || !reflect.DeepEqual(asked, plain) {
				t.Fatalf("3rd with deny_status=429: %d %+v, want 429 and the body of the 200: %+v", code, asked, plain)
			}
			for _, k := range []string{"RateLimit", "RateLimit-Policy", "Retry-After", "Content-Type"} {
				if askedH.Get(k) == "" || askedH.Get(k) != plainH.Get(k) {
					t.Errorf("%s: %q at 429, %q at 200: want the same, set", k, askedH.Get(k), plainH.Get(k))
				}
			}
			if askedH.Get("Retry-After") != "60" {
				t.Errorf("Retry-After %q, want 60", askedH.Get("Retry-After"))
			}

			for _, body := range []string{
				`{"requests": [{"attributes": {"path": "/export", "user": "bob"}}, {"attributes": {"path": "/export", "user": "ann"}}]}`,
				`{"attributes": {"path": "/export", "user": "ann"}, "cost": 2, "at_most": true}`,
				`{"attributes": {"path": "/export", "user": "ann"}, "cost": 1, "settle": true}`,
			} {
				var d decisionBody
				if code, h := f.post(t, "/v1/decide?deny_status=429", body, &d); code != http.StatusTooManyRequests || d.Allowed || h.Get("Retry-After") == "" {
					t.Errorf("%s: %d %+v, want 429 denied with Retry-After", body, code, d)
				}
			}

			for _, c := range []struct{ path, detail string }{
				{"/v1/decide?deny_status=500", `deny_status must be 429 (Too Many Requests), given once, not "500"`},
				{"/v1/decide?deny_status=", `deny_status must be 429 (Too Many Requests), given once, not ""`},
				{"/v1/decide?deny_status=429&deny_status=429", `not "429&429"`},
				{"/v1/decide?deny_status=Too+Many+Requests", `not "Too Many Requests"`},
				{"/v1/peek?deny_status=429", "deny_status applies to /v1/decide, not to /v1/peek"},
			} {
				var p struct {
					Status int    `json:"status"`
					Detail string `json:"detail"`
				}
				if code, _ := f.post(t, c.path, `{"attributes": {"path": "/export", "user": "cy"}}`, &p); code != http.StatusBadRequest || p.Status != code || !strings.Contains(p.Detail, c.detail) {
					t.Errorf("%s: %d %+v, want 400 saying %q", c.path, code, p, c.detail)
				}
			}
			// A refused query charged nothing: cy still has the whole burst.
			var d decisionBody
			if f.post(t, "/v1/peek", `{"attributes": {"path": "/export", "user": "cy"}}`, &d); d.Rules[0].Remaining != 2 {
				t.Errorf("cy after refused queries: %+v, want 2 remaining", d)
			}
		})
	}
}
