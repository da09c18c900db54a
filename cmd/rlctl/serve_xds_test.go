package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	ratelimitconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/rlctl/rlctl/internal/syncbuf"
	"github.com/rlctl/rlctl/internal/xdstest"
)

// TestServeXDS: -xds takes envoyproxy/ratelimit configurations from a management server
// (here go-control-plane's), with the policy files; its limits decide, and their
// statistics are on /metrics under envoyproxy/ratelimit's names.
func TestServeXDS(t *testing.T) {
	xs := xdstest.Start(t, "127.0.0.1:0")
	addr := xs.Addr
	xs.Set(t, "edge-node", "v1", &ratelimitconfv3.RateLimitConfig{
		Name:   "xds-domain",
		Domain: "xds",
		Descriptors: []*ratelimitconfv3.RateLimitDescriptor{{
			Key:       "k",
			RateLimit: &ratelimitconfv3.RateLimitPolicy{Unit: ratelimitconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: 2},
		}},
	})
	s := startServe(t, "-xds", addr, "-xds-node", "edge-node")
	rls := rlsv3.NewRateLimitServiceClient(dialGRPC(t, s.grpc, nil))
	ctx := context.Background()
	req := &rlsv3.RateLimitRequest{Domain: "xds", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}},
	}}
	for i := range 3 {
		r, err := rls.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if over := r.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT; over != (i == 2) {
			t.Errorf("call %d of the xDS limit (2 a minute): %v", i, r.OverallCode)
		}
	}
	// The files' policies decide beside the management server's.
	for i := range 4 {
		r, err := rls.ShouldRateLimit(ctx, edgeRequest("192.0.2.77"))
		if err != nil {
			t.Fatal(err)
		}
		if over := r.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT; over != (i == 3) {
			t.Errorf("call %d of edge.hcl (3 a minute): %v", i, r.OverallCode)
		}
	}
	admin := "http://" + s.admin
	for family, want := range map[string]float64{"total_hits": 3, "within_limit": 2, "over_limit": 1, "near_limit": 1} {
		series := `ratelimit_service_rate_limit_` + family + `{domain="xds",key1="k",key2=""}`
		if got := metric(t, admin, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	s.stop(t)
}

// TestServeXDSWaits: until a first configuration arrives nothing is served, and a stop
// then ends the wait with an error (exit 1); xDS flags without -xds are a usage error.
func TestServeXDSWaits(t *testing.T) {
	xs := xdstest.Start(t, "127.0.0.1:0")
	logs := &syncbuf.Buffer{}
	serveStop = make(chan struct{})
	ready := make(chan struct{})
	serveReady = func(string, string) { close(ready) }
	t.Cleanup(func() { serveStop, serveReady = nil, nil })
	exit := make(chan int, 1)
	go func() {
		exit <- run([]string{"serve", "-grpc", "127.0.0.1:0", "-http", "", "-admin", "", "-xds", xs.Addr, "-xds-node", "nobody"}, &env{stdout: logs, stderr: logs})
	}()
	select { // its first request: the service waits for an answer that does not come
	case <-xs.Requests:
	case code := <-exit:
		t.Fatalf("exited %d before asking for a configuration:\n%s", code, logs)
	}
	close(serveStop)
	select {
	case code := <-exit:
		if code != 1 || !strings.Contains(logs.String(), "no configuration from the xDS server") {
			t.Errorf("stopped while waiting: exit %d, want 1 with the reason:\n%s", code, logs)
		}
	case <-ready:
		t.Fatal("served with no configuration")
	}

	var out syncbuf.Buffer
	policy := filepath.Join(root, "serve", "testdata", "envoy", "edge.hcl")
	if code := run([]string{"serve", "-xds-tls-ca", "ca.pem", policy}, &env{stdout: &out, stderr: &out}); code != 2 || !strings.Contains(out.String(), "need -xds") {
		t.Errorf("-xds-tls-ca without -xds: exit %d, want 2:\n%s", code, out.String())
	}
}
