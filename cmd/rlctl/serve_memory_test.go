package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// TestServeMemoryCap: the embedded backend is capped by default (-max-memory 256MiB), and
// a cap given with a unit evicts the least recently used keys once the counters fill it,
// counted in rlctl_evicted_keys_total.
func TestServeMemoryCap(t *testing.T) {
	s := startServe(t)
	if want := fmt.Sprintf(`"max_memory":%d`, defaultMaxMemory); !strings.Contains(s.logs.String(), want) {
		t.Errorf("the embedded backend's start does not log %s:\n%s", want, s.logs)
	}
	s.stop(t)

	s = startServe(t, "-max-memory", "64KiB")
	c := rlsv3.NewRateLimitServiceClient(dialGRPC(t, s.grpc, nil))
	for i := range 2000 {
		ip := fmt.Sprintf("198.51.%d.%d", i/256, i%256)
		if _, err := c.ShouldRateLimit(context.Background(), edgeRequest(ip)); err != nil {
			t.Fatal(err)
		}
	}
	if n := metric(t, "http://"+s.admin, "rlctl_evicted_keys_total"); n == 0 {
		t.Errorf("2,000 clients under -max-memory 64KiB: no key evicted\n%s", s.logs)
	}
}
