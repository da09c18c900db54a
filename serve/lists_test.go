package serve

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/internal/syncbuf"
)

// listsPolicy limits addresses and users; banned addresses are refused by per_ip for ten
// minutes at a time, and partners' users are exempt from per_user.
const listsPolicy = `
policy "api" {
  match = startswith(request.path, "/v1/")
  rule "per_ip" {
    algorithm  = "gcra"
    key        = request.ip
    rate       = "1/h"
    burst      = 10
    deny       = list("banned")
    deny_retry = "10m"
  }
  rule "per_user" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 2
    window    = "1h"
    exempt    = list("partners")
  }
}
`

// listsBody is the answer of /v1/lists/*.
type listsBody struct {
	Members []listMemberJSON `json:"members"`
	Detail  string           `json:"detail"` // of a problem
}

// TestHTTPLists: an admin token puts a request's key on a deny list and takes it off
// through the HTTP API, and decisions follow at once (denied with the list's retry, then
// decided by the rule again); an exempt list lets a key past its rule; without the admin
// right a change is 403, logged, while a read is answered; a list no rule names and a
// malformed body are 400 saying why.
func TestHTTPLists(t *testing.T) {
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			var logs syncbuf.Buffer
			f := startWith(t, backend, map[string]string{"api.hcl": listsPolicy}, func(c *Config) {
				c.Admin = func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer ops" }
				c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			const req = `{"attributes": {"path": "/v1/x", "ip": "192.0.2.1", "user": "acme"}}`
			decide := func(step string, allowed bool, decider string, retryMs int64) {
				t.Helper()
				var d decisionBody
				if code, _ := f.post(t, "/v1/decide", req, &d); code != http.StatusOK || d.Allowed != allowed || d.Decider != decider || d.RetryAfterMs != retryMs {
					t.Fatalf("%s: %d %+v, want allowed %v by %q, retry-after %dms", step, code, d, allowed, decider, retryMs)
				}
			}
			member := func(step, token, op, list, attrs string, want bool) {
				t.Helper()
				var got listsBody
				code := f.postAs(t, "/v1/lists/"+op, token, `{"list": "`+list+`", "attributes": `+attrs+`}`, &got)
				if code != http.StatusOK || len(got.Members) != 1 || got.Members[0].Policy != "api" || got.Members[0].Member != want || got.Members[0].Key == "" {
					t.Fatalf("%s: %d %+v, want one member %v", step, code, got, want)
				}
			}
			const ip, user = `{"ip": "192.0.2.1"}`, `{"user": "acme"}`
			decide("first", true, "", 0)

			for _, op := range []string{"add", "remove"} {
				for _, token := range []string{"", "reader"} {
					if code := f.postAs(t, "/v1/lists/"+op, token, `{"list": "banned", "attributes": `+ip+`}`, nil); code != http.StatusForbidden {
						t.Fatalf("%s with token %q: %d, want 403", op, token, code)
					}
				}
			}
			if !strings.Contains(logs.String(), "list change refused") {
				t.Errorf("a refused change is not logged:\n%s", logs.String())
			}
			member("get with the read right", "reader", "get", "banned", ip, false)

			// Deny: refused by per_ip with the list's retry, uncharged.
			member("add to banned", "ops", "add", "banned", ip, true)
			if l := logs.String(); !strings.Contains(l, "list add") || !strings.Contains(l, "list=banned") || !strings.Contains(l, "192.0.2.1") || !strings.Contains(l, "ok=true") {
				t.Errorf("the add is not logged with its list, request and outcome:\n%s", l)
			}
			decide("banned", false, "api.per_ip", 600_000)
			member("get after the add", "", "get", "banned", ip, true)
			member("another address", "", "get", "banned", `{"ip": "192.0.2.2"}`, false)
			member("remove from banned", "ops", "remove", "banned", ip, false)
			decide("unbanned", true, "", 0) // per_user's second of 2: the banned one was not charged
			decide("over per_user", false, "api.per_user", 3_600_000)

			// Exempt: per_user lets the key past its limit, uncharged; removal restores it.
			member("add to partners", "ops", "add", "partners", user, true)
			decide("exempt", true, "", 0)
			decide("exempt again", true, "", 0)
			member("get partners", "", "get", "partners", user, true)
			member("remove from partners", "ops", "remove", "partners", user, false)
			decide("no longer exempt", false, "api.per_user", 3_600_000)

			for _, c := range []struct {
				path, body string
				code       int
				want       string
			}{
				{"/v1/lists/add", `{"list": "vips", "attributes": ` + user + `}`, http.StatusBadRequest, `list("vips")`},
				{"/v1/lists/get", `{"list": "vips", "attributes": ` + user + `}`, http.StatusBadRequest, `list("vips")`},
				{"/v1/lists/add", `{"list": "banned", "attributes": ` + ip + `, "policy": "api"}`, http.StatusBadRequest, `unknown field "policy"`},
				{"/v1/lists/add", `{"attributes": ` + ip + `}`, http.StatusBadRequest, "the body must be"},
				{"/v1/lists/get", `{"list": "banned"}`, http.StatusBadRequest, "the body must be"},
				{"/v1/lists/get", `{"list": "` + strings.Repeat("b", MaxNameBytes+1) + `", "attributes": ` + ip + `}`, http.StatusBadRequest, "MaxNameBytes"},
				{"/v1/lists/get", `{"list": "banned", "attributes": ` + ip + `} {}`, http.StatusBadRequest, "more than one JSON value"},
				{"/v1/lists/get", "{\"list\": \"banned\", \"attributes\": {\"ip\": \"\xff\"}}", http.StatusBadRequest, "not UTF-8"},
				{"/v1/lists/clear", `{"list": "banned", "attributes": ` + ip + `}`, http.StatusNotFound, "/v1/lists/remove"},
			} {
				var p listsBody
				if code := f.postAs(t, c.path, "ops", c.body, &p); code != c.code || !strings.Contains(p.Detail, c.want) {
					t.Errorf("%s %s: %d %q, want %d saying %q", c.path, c.body, code, p.Detail, c.code, c.want)
				}
			}
			if l := logs.String(); !strings.Contains(l, "ok=false") {
				t.Errorf("the failed add is not logged as failed:\n%s", l)
			}
		})
	}
}

// postAs posts body to path as JSON with token as a bearer token (none when ""), decodes
// the answer into out (when not nil) and returns its status.
func (f *fixture) postAs(t *testing.T, path, token, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest("POST", f.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
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
