package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestHTTPOverrides: an admin token sets, reads and clears a key's override through the
// HTTP API and decisions follow it at once; without the admin right a change is 403 while
// a read is answered; a malformed or impossible override is 400 saying why.
func TestHTTPOverrides(t *testing.T) {
	const policy = `
policy "api" {
  rule "per_user" {
    algorithm   = "fixed_window"
    key         = request.user
    limit       = 2
    window      = "1h"
    overridable = true
  }
}
`
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			f := startWith(t, backend, map[string]string{"api.hcl": policy}, func(c *Config) {
				c.Admin = func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer ops" }
			})
			call := func(path, token, body string, out any) int {
				t.Helper()
				req, _ := http.NewRequest("POST", f.url+path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if out != nil {
					if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
						t.Fatalf("%s: %v", path, err)
					}
				}
				return resp.StatusCode
			}
			const who = `"attributes": {"user": "acme"}, "policy": "api", "rule": "per_user"`
			var d decisionBody
			for range 3 {
				f.post(t, "/v1/decide", `{"attributes": {"user": "acme"}}`, &d)
			}
			if d.Allowed {
				t.Fatalf("3rd of a limit of 2: %+v", d)
			}
			if code := call("/v1/overrides/set", "", `{`+who+`, "set": {"limit": "5"}}`, nil); code != http.StatusForbidden {
				t.Fatalf("set without the admin right: %d, want 403", code)
			}
			var p struct {
				Detail string `json:"detail"`
			}
			if code := call("/v1/overrides/set", "ops", `{`+who+`, "set": {"limit": "5"}, "until": "2200-01-01T00:00:00Z"}`, &p); code != http.StatusOK {
				t.Fatalf("set: %d %s", code, p.Detail)
			}
			// The 2 counted count against 5.
			if f.post(t, "/v1/decide", `{"attributes": {"user": "acme"}}`, &d); !d.Allowed || d.Rules[0].Remaining != 2 || d.Rules[0].Limit != 5 {
				t.Fatalf("after the override: %+v, want allowed with 2 of 5 left", d)
			}
			var got struct {
				Override *overrideJSON `json:"override"`
			}
			if code := call("/v1/overrides/get", "", `{`+who+`}`, &got); code != http.StatusOK || got.Override == nil || got.Override.Figures != "limit=5 window=1h" || got.Override.Until != "2200-01-01T00:00:00Z" {
				t.Fatalf("get: %d %+v", code, got.Override)
			}
			for body, want := range map[string]string{
				`{` + who + `, "set": {"window": "1m"}}`:                                "keeps its window",
				`{` + who + `, "set": {"rate": "1/s"}}`:                                 "takes no rate",
				`{` + who + `, "set": {"limit": "5"}, "until": "soon"}`:                 "RFC 3339",
				`{` + who + `, "set": {"limit": "5"}, "until": "2999-01-01T00:00:00Z"}`: "past the latest instant",
				`{` + who + `}`: "set must name",
				`{"attributes": {"user": "acme"}, "policy": "api", "rule": "nope", "set": {"limit": "5"}}`: `no rule "nope"`,
			} {
				var p struct {
					Detail string `json:"detail"`
				}
				if code := call("/v1/overrides/set", "ops", body, &p); code != http.StatusBadRequest || !strings.Contains(p.Detail, want) {
					t.Errorf("%s: %d %q, want 400 saying %q", body, code, p.Detail, want)
				}
			}
			if code := call("/v1/overrides/clear", "ops", `{`+who+`}`, nil); code != http.StatusOK {
				t.Fatalf("clear: %d", code)
			}
			if f.post(t, "/v1/decide", `{"attributes": {"user": "acme"}}`, &d); d.Allowed || d.Rules[0].Limit != 2 {
				t.Fatalf("after the clear: %+v, want denied by the limit of 2", d)
			}
			if code := call("/v1/overrides/get", "", `{`+who+`}`, &got); code != http.StatusOK || got.Override != nil {
				t.Fatalf("get after the clear: %d %+v", code, got.Override)
			}
		})
	}
}
