package serve

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/internal/listen"
	"github.com/rlctl/rlctl/internal/syncbuf"
)

// inspectPolicy boxes an address denied once for ten minutes, and refuses banned ones;
// per_user is overridable, and staff are exempt from it.
const inspectPolicy = `
policy "api" {
  match = request.user != ""
  rule "per_ip" {
    algorithm = "fixed_window"
    key       = request.ip
    limit     = 2
    window    = "1h"
    block_for = "10m"
    deny      = list("banned")
  }
  rule "per_user" {
    algorithm   = "gcra"
    key         = request.user
    rate        = "1/s"
    burst       = 5
    overridable = true
    exempt      = list("staff")
  }
}
`

// inspectBody is the answer of /v1/inspect.
type inspectBody struct {
	Rules  []inspectRuleJSON `json:"rules"`
	Detail string            `json:"detail"` // of a problem
}

// TestHTTPInspect: /v1/inspect answers, per rule, the peek's verdict, the block running,
// the override in force and the key's list memberships, charging nothing; a read token
// may call it, no token is refused as /v1/peek is; every inspection is logged; a bad body
// is 400 saying why.
func TestHTTPInspect(t *testing.T) {
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			tokens := filepath.Join(t.TempDir(), "tokens")
			if err := os.WriteFile(tokens, []byte("reader\nadmin ops\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			tok, err := listen.LoadTokens(tokens)
			if err != nil {
				t.Fatal(err)
			}
			var logs syncbuf.Buffer
			f := startWith(t, backend, map[string]string{"api.hcl": inspectPolicy}, func(c *Config) {
				c.Admin = func(r *http.Request) bool { return tok.Admin(r.Header.Get("Authorization")) }
				c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			// The API behind the tokens, as rlctl serve -auth-tokens serves it.
			h := httptest.NewServer(tok.Handler(f.srv.Handler()))
			t.Cleanup(h.Close)
			f.url = h.URL

			const req = `{"attributes": {"ip": "192.0.2.1", "user": "acme"}}`
			inspect := func(step string) []inspectRuleJSON {
				t.Helper()
				var got inspectBody
				if code := f.postAs(t, "/v1/inspect", "reader", req, &got); code != http.StatusOK || len(got.Rules) != 2 {
					t.Fatalf("%s: %d %+v, want two rules", step, code, got)
				}
				return got.Rules
			}

			in := inspect("fresh")
			ip, user := in[0], in[1]
			if ip.Policy != "api" || ip.Rule != "per_ip" || ip.Algorithm != "fixed_window" || ip.Key == "" || !ip.Allowed || ip.Remaining != 2 || ip.Limit != 2 ||
				ip.BlockedUntil != "" || ip.Override != nil || len(ip.Lists) != 1 || ip.Lists[0] != (listStateJSON{List: "banned", Deny: true}) {
				t.Fatalf("fresh per_ip: %+v", ip)
			}
			if user.Rule != "per_user" || !user.Allowed || user.Override != nil || len(user.Lists) != 1 || user.Lists[0] != (listStateJSON{List: "staff"}) {
				t.Fatalf("fresh per_user: %+v", user)
			}
			if again := inspect("fresh, again"); again[0].Remaining != 2 || again[1].Remaining != user.Remaining {
				t.Fatalf("a second inspection charged: %+v, then %+v", in, again)
			}
			if l := logs.String(); !strings.Contains(l, "rlctl serve: inspect") || !strings.Contains(l, "level=INFO") || !strings.Contains(l, "remote=127.0.0.1") ||
				!strings.Contains(l, "192.0.2.1") || !strings.Contains(l, "acme") {
				t.Errorf("the inspection is not logged at info level with its caller and request:\n%s", l)
			}

			// Two allowed, the third denied: the offence starts per_ip's block.
			var d decisionBody
			for range 3 {
				if code := f.postAs(t, "/v1/decide", "reader", req, &d); code != http.StatusOK {
					t.Fatalf("decide: %d", code)
				}
			}
			if d.Allowed || d.Decider != "api.per_ip" {
				t.Fatalf("the third of a limit of 2: %+v", d)
			}
			blockEnd := f.clock.Now().Add(10 * time.Minute)
			const who = `"attributes": {"ip": "192.0.2.1", "user": "acme"}, "policy": "api", "rule": "per_user"`
			if code := f.postAs(t, "/v1/overrides/set", "ops", `{`+who+`, "set": {"burst": "50"}, "until": "2030-01-01T13:00:00Z"}`, nil); code != http.StatusOK {
				t.Fatalf("overrides/set: %d", code)
			}
			if code := f.postAs(t, "/v1/lists/add", "ops", `{"list": "staff", "attributes": {"user": "acme"}}`, nil); code != http.StatusOK {
				t.Fatalf("lists/add: %d", code)
			}
			f.clock.Advance(time.Minute)

			in = inspect("blocked")
			ip, user = in[0], in[1]
			if ip.Allowed || ip.BlockedUntil != blockEnd.UTC().Format(time.RFC3339Nano) || ip.RetryAfterMs != (9*time.Minute).Milliseconds() || ip.Lists[0].Member {
				t.Fatalf("blocked per_ip: %+v, want blocked until %v", ip, blockEnd)
			}
			want := inspectOverrideJSON{Figures: "rate=1/s burst=50", Own: "rate=1/s burst=5", Limit: "1/s, burst 50", Until: "2030-01-01T13:00:00Z"}
			if o := user.Override; o == nil || *o != want || !user.Lists[0].Member {
				t.Fatalf("per_user: %+v, override %+v, want %+v", user, o, want)
			}

			// Inspecting charged nothing: the same again.
			again := inspect("again")
			for i := range in {
				if again[i].Remaining != in[i].Remaining || again[i].BlockedUntil != in[i].BlockedUntil {
					t.Errorf("%s inspected twice: %+v, then %+v", in[i].Rule, in[i], again[i])
				}
			}

			// No token: refused as /v1/peek is.
			for _, path := range []string{"/v1/peek", "/v1/inspect"} {
				if code := f.postAs(t, path, "", req, nil); code != http.StatusUnauthorized {
					t.Errorf("%s with no token: %d, want 401", path, code)
				}
			}

			for _, c := range []struct {
				body string
				code int
				want string
			}{
				{`{}`, http.StatusBadRequest, "the body must be"},
				{`{"attributes": {"user": "acme"}, "cost": 1}`, http.StatusBadRequest, `unknown field "cost"`},
				{`{"attributes": {"user": "acme"}} {}`, http.StatusBadRequest, "more than one JSON value"},
				{"{\"attributes\": {\"user\": \"\xff\"}}", http.StatusBadRequest, "not UTF-8"},
				{`{"attributes": {"` + strings.Repeat("a", MaxNameBytes+1) + `": "x"}}`, http.StatusBadRequest, "MaxNameBytes"},
			} {
				var p inspectBody
				if code := f.postAs(t, "/v1/inspect", "reader", c.body, &p); code != c.code || !strings.Contains(p.Detail, c.want) {
					t.Errorf("%s: %d %q, want %d saying %q", c.body, code, p.Detail, c.code, c.want)
				}
			}
		})
	}
}
