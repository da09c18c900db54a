package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// TestServePeerEndpoints: what envoyproxy/ratelimit's deployments probe and call is there:
// the gRPC health service under its name "ratelimit" and the empty name, GET /healthcheck
// on the HTTP listener ("OK", for anyone, as gRPC health is), POST /json behind the
// tokens like the rest of the API; -headers legacy and -shadow-mode reach the answers.
func TestServePeerEndpoints(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "-auth-tokens", tokens, "-headers", "legacy", "-legacy-header-names", "L,R,T", "-shadow-mode")
	ctx := context.Background()
	hc := healthpb.NewHealthClient(dialGRPC(t, s.grpc, nil))
	for _, name := range []string{"", "ratelimit"} {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: name})
		if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: %v %v, want SERVING", name, r, err)
		}
	}
	resp, err := http.Get("http://" + s.http + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /healthcheck without a token: %d, want 200", resp.StatusCode)
	}
	body := `{"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "192.0.2.9"}]}]}`
	for token, want := range map[string]int{"": 401, "s3cret": 200} {
		req, _ := http.NewRequest("POST", "http://"+s.http+"/json", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("POST /json with token %q: %d, want %d", token, resp.StatusCode, want)
		}
	}
	rls := rlsv3.NewRateLimitServiceClient(dialGRPC(t, s.grpc, nil))
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret")
	for i := range 4 { // edge.hcl allows 3 a minute per address
		r, err := rls.ShouldRateLimit(actx, edgeRequest("192.0.2.10"))
		if err != nil {
			t.Fatal(err)
		}
		h := map[string]string{}
		for _, x := range r.ResponseHeadersToAdd {
			h[x.Key] = x.Value
		}
		over := r.Statuses[0].Code == rlsv3.RateLimitResponse_OVER_LIMIT
		if r.OverallCode != rlsv3.RateLimitResponse_OK || over != (i == 3) || h["L"] != "3" || len(h) != 3 {
			t.Errorf("call %d under -shadow-mode -headers legacy: %v, statuses %v, headers %v", i, r.OverallCode, r.Statuses, h)
		}
	}
	s.stop(t)
}
