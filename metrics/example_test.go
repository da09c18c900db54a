package metrics_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
	"github.com/rlctl/rlctl/metrics"
)

// An engine whose decisions are counted, scraped as Prometheus would scrape /metrics.
func ExampleNew() {
	cfg, diags := dsl.Parse(map[string][]byte{"api.hcl": []byte(`
policy "api" {
  rule "per_user" {
    algorithm = "gcra"
    key       = request.user
    rate      = "1/s"
    burst     = 2
  }
}`)})
	if diags.HasErrors() {
		log.Fatal(diags)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		log.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	m := metrics.New()
	reg.MustRegister(m)
	e := engine.New(engine.NewLocal(luahost.New()), plan, engine.WithHooks(m.Hooks()))

	for range 3 {
		if _, err := e.Allow(context.Background(), engine.Attrs{"user": "alice"}); err != nil {
			log.Fatal(err)
		}
	}
	scrape := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(scrape, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.Lines(scrape.Body.String()) {
		if strings.HasPrefix(line, "rlctl_decisions_total") || strings.HasPrefix(line, `rlctl_requests_total{outcome="denied"`) {
			fmt.Print(line)
		}
	}
	// Output:
	// rlctl_decisions_total{outcome="allowed",policy="api",rule="per_user"} 2
	// rlctl_decisions_total{outcome="denied",policy="api",rule="per_user"} 1
	// rlctl_requests_total{outcome="denied",source="backend"} 1
	// rlctl_requests_total{outcome="denied",source="cache"} 0
	// rlctl_requests_total{outcome="denied",source="fail_deny"} 0
	// rlctl_requests_total{outcome="denied",source="fail_open"} 0
	// rlctl_requests_total{outcome="denied",source="lease"} 0
	// rlctl_requests_total{outcome="denied",source="local"} 0
	// rlctl_requests_total{outcome="denied",source="no_rules"} 0
}
