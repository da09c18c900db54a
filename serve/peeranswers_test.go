package serve

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/rlctl/rlctl/internal/envoyconf"
)

// peerConfig is an envoyproxy/ratelimit configuration with every unit and a shadow limit.
const peerConfig = `
domain: quota
descriptors:
  - key: plan
    value: monthly
    rate_limit: {unit: month, requests_per_unit: 2}
  - key: plan
    value: yearly
    rate_limit: {unit: year, requests_per_unit: 2}
  - key: plan
    value: weekly
    rate_limit: {unit: week, requests_per_unit: 2}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: user
    value: root
    rate_limit: {unlimited: true}
  - key: trial
    rate_limit: {unit: second, requests_per_unit: 1}
    shadow_mode: true
`

// startPeer serves peerConfig, imported, on backend with the Config changed by with.
func startPeer(t *testing.T, backend string, with func(*Config)) *fixture {
	t.Helper()
	hcl, err := envoyconf.Import([]envoyconf.File{{Name: "quota.yaml", Src: []byte(peerConfig)}}, envoyconf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return startWith(t, backend, map[string]string{"quota.hcl": string(hcl)}, with)
}

func quotaRequest(kv ...string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "quota", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc(kv...)}}
}

// TestEnvoyAnswersAsPeer: the answers envoyproxy/ratelimit gives where rlctl's semantics
// are the same: a request without a domain is refused; month, year and week limits report
// their units; under ShadowMode a request over the limit is OK with its statuses as they
// are (and no Retry-After); legacy headers name the descriptor closest to its limit; an
// unlimited descriptor has 4294967295 remaining, one that matches nothing 0.
func TestEnvoyAnswersAsPeer(t *testing.T) {
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			f := startPeer(t, backend, nil)
			if _, err := f.rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Descriptors: quotaRequest("user", "u").Descriptors}); status.Code(err) != codes.InvalidArgument {
				t.Errorf("no domain: %v, want InvalidArgument", err)
			}
			for v, unit := range map[string]rlsv3.RateLimitResponse_RateLimit_Unit{
				"monthly": rlsv3.RateLimitResponse_RateLimit_MONTH,
				"yearly":  rlsv3.RateLimitResponse_RateLimit_YEAR,
				"weekly":  rlsv3.RateLimitResponse_RateLimit_WEEK,
			} {
				resp, err := f.rls.ShouldRateLimit(ctx, quotaRequest("plan", v))
				if err != nil {
					t.Fatal(err)
				}
				if got := resp.Statuses[0].GetCurrentLimit().GetUnit(); got != unit {
					t.Errorf("plan %s: unit %v, want %v", v, got, unit)
				}
			}

			resp, err := f.rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "quota", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("user", "root"), desc("nothing", "x")}})
			if err != nil {
				t.Fatal(err)
			}
			if st := resp.Statuses[0]; st.Code != rlsv3.RateLimitResponse_OK || st.CurrentLimit != nil || st.LimitRemaining != math.MaxUint32 {
				t.Errorf("unlimited descriptor: %v, want OK, no limit, 4294967295 remaining", st)
			}
			if st := resp.Statuses[1]; st.Code != rlsv3.RateLimitResponse_OK || st.CurrentLimit != nil || st.LimitRemaining != 0 {
				t.Errorf("a descriptor no limit matches: %v, want OK, no limit, 0 remaining", st)
			}

			f = startPeer(t, backend, func(c *Config) { c.ShadowMode = true })
			for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
				resp, err := f.rls.ShouldRateLimit(ctx, quotaRequest("user", "u"))
				if err != nil {
					t.Fatal(err)
				}
				if resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].Code != want {
					t.Errorf("shadow mode, request %d: overall %v, status %v; want OK and %v", i, resp.OverallCode, resp.Statuses[0].Code, want)
				}
				if _, ok := headers(resp.ResponseHeadersToAdd)["retry-after"]; ok {
					t.Errorf("shadow mode, request %d: a Retry-After for a request let through", i)
				}
			}

			f = startPeer(t, backend, func(c *Config) {
				c.Headers = Headers{Legacy: &LegacyHeaders{Limit: "X-Limit", Remaining: "X-Left", Reset: "X-Reset"}}
			})
			f.clock.Set(time.Date(2030, 1, 1, 12, 0, 15, 500e6, time.UTC))
			two := &rlsv3.RateLimitRequest{Domain: "quota", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("plan", "weekly"), desc("user", "v")}}
			resp, err = f.rls.ShouldRateLimit(ctx, two)
			if err != nil {
				t.Fatal(err)
			}
			// user's minute is closest to its limit (0 of 1 left); its window ends 44.5 s
			// on, written in whole seconds rounded up as envoyproxy/ratelimit's reset is.
			h := headers(resp.ResponseHeadersToAdd)
			if h["X-Limit"] != "1" || h["X-Left"] != "0" || h["X-Reset"] != "45" || len(h) != 3 {
				t.Errorf("legacy headers %v, want X-Limit 1, X-Left 0, X-Reset 45 and nothing else", h)
			}
		})
	}
}

// TestEnvoyJSON: POST /json answers a RateLimitRequest in protobuf's JSON form as
// envoyproxy/ratelimit's /json does: 200, 429 over the limit, 400 for what is not a
// request; and, as rlctl's other endpoints, 415 for a body not sent as JSON.
func TestEnvoyJSON(t *testing.T) {
	f := startPeer(t, "embedded", nil)
	post := func(ct, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(f.url+"/json", ct, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	req := `{"domain": "quota", "descriptors": [{"entries": [{"key": "user", "value": "w"}]}]}`
	for i, want := range []int{200, 429} {
		code, body := post("application/json", req)
		var resp rlsv3.RateLimitResponse
		if err := protojson.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatalf("request %d: %v: %s", i, err, body)
		}
		overall := map[int]rlsv3.RateLimitResponse_Code{200: rlsv3.RateLimitResponse_OK, 429: rlsv3.RateLimitResponse_OVER_LIMIT}[want]
		if code != want || resp.OverallCode != overall || resp.Statuses[0].GetCurrentLimit().GetRequestsPerUnit() != 1 {
			t.Errorf("request %d: %d %s, want %d and %v", i, code, body, want, overall)
		}
	}
	for _, c := range []struct {
		ct, body string
		code     int
	}{
		{"application/json", `{"domain": "quota", "descriptors": [{"entries": [{"key": "user"}]}], "extra": 1}`, 400},
		{"application/json", `{"descriptors": [{"entries": [{"key": "user", "value": "w"}]}]}`, 400},
		{"application/json", `not json`, 400},
		{"application/x-www-form-urlencoded", req, 415},
	} {
		code, body := post(c.ct, c.body)
		var p map[string]any
		if code != c.code || json.Unmarshal([]byte(body), &p) != nil || p["status"] != float64(c.code) {
			t.Errorf("%s %s: %d %s, want a %d problem", c.ct, c.body, code, body, c.code)
		}
	}
}
