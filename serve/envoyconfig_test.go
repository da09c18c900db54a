package serve

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/envoyconf"
	"github.com/rlctl/rlctl/luahost"
)

// TestEnvoyConfig: the Envoy configuration the docs show is a valid Envoy bootstrap (by
// go-control-plane's own validation), its rate limit filter asks for the domain edge.hcl
// matches, and every descriptor its routes' rate_limits send has a rule of edge.hcl that
// applies to it.
func TestEnvoyConfig(t *testing.T) {
	src, err := os.ReadFile("testdata/envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := yaml.Unmarshal(src, &tree); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	var boot bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &boot); err != nil {
		t.Fatalf("envoy.yaml is not an Envoy bootstrap: %v", err)
	}
	if err := boot.ValidateAll(); err != nil {
		t.Fatalf("envoy.yaml: %v", err)
	}
	var domain string
	var limits []*routev3.RateLimit
	for _, l := range boot.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
					t.Fatal(err)
				}
				for _, hf := range hcm.GetHttpFilters() {
					var rl ratelimitfilter.RateLimit
					if hf.GetTypedConfig().UnmarshalTo(&rl) == nil {
						domain = rl.GetDomain()
					}
				}
				for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
					for _, r := range vh.GetRoutes() {
						limits = append(limits, r.GetRoute().GetRateLimits()...)
					}
				}
			}
		}
	}
	if domain != "edge" || len(limits) != 3 {
		t.Fatalf("domain %q and %d rate_limits, want edge and 3", domain, len(limits))
	}
	cfg, diags := dsl.Load("testdata/envoy/edge.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(engine.NewLocal(luahost.New()), plan)
	for i, rl := range limits {
		// The descriptor Envoy sends for these actions, with sample values.
		var kv []string
		for _, a := range rl.GetActions() {
			var key, value string
			switch {
			case a.GetRemoteAddress() != nil:
				key, value = "remote_address", "192.0.2.1"
			case a.GetGenericKey() != nil:
				key, value = a.GetGenericKey().GetDescriptorKey(), a.GetGenericKey().GetDescriptorValue()
				if key == "" {
					key = "generic_key"
				}
			case a.GetRequestHeaders() != nil:
				key, value = a.GetRequestHeaders().GetDescriptorKey(), "sample"
			default:
				t.Fatalf("rate_limits %d: an action this test does not know: %v", i, a)
			}
			kv = append(kv, key, value)
		}
		d := envoyconf.NewRequest(domain, desc(kv...))
		p, err := e.Peek(context.Background(), &d)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Rules) != 1 {
			t.Errorf("rate_limits %d sends the descriptor %s: %d rules of edge.hcl apply, want 1", i, d.Attr("descriptor"), len(p.Rules))
		}
	}
}
