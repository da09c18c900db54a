package serve

import (
	"context"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// start is a Server on backend ("redis": the shared real redis-server, emptied first;
// "embedded": luahost) serving the policy files copied into a fresh directory, over real
// gRPC and HTTP on loopback. Every policy is put on the client clock, the test's virtual
// one, so fixed windows never roll over mid-test (on Redis too).
type fixture struct {
	srv   *Server
	dir   string
	clock *luahost.ManualClock
	rls   rlsv3.RateLimitServiceClient
	url   string // the HTTP API's base URL
}

func start(t *testing.T, backend string, files map[string]string) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), clock: luahost.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))}
	for name, src := range files {
		f.write(t, name, src)
	}
	var b engine.Backend
	switch backend {
	case "redis":
		rdb := redistest.Shared(t).Client(t)
		if err := rdb.FlushDB(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		b = engine.NewRedis(rdb)
	default:
		b = engine.NewLocal(luahost.New(luahost.WithClock(f.clock)))
	}
	srv, err := New(Config{Paths: []string{f.dir}, Backend: b, Engine: []engine.Option{engine.WithClock(f.clock.Now), engine.WithTimeout(time.Minute)}, Clock: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv.RegisterGRPC(g)
	go g.Serve(l)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient("passthrough:///"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f.rls = rlsv3.NewRateLimitServiceClient(conn)
	h := httptest.NewServer(srv.Handler())
	t.Cleanup(h.Close)
	f.url = h.URL
	return f
}

// write puts src in the fixture's directory, on the client clock.
func (f *fixture) write(t *testing.T, name, src string) {
	t.Helper()
	src = strings.ReplaceAll(src, "\n  match =", "\n  clock = \"client\"\n  match =")
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

func edgePolicy(t *testing.T) string {
	b, err := os.ReadFile("testdata/envoy/edge.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\n  match =") {
		t.Fatal("edge.hcl has no match line to put the clock before")
	}
	return string(b)
}

// desc is an Envoy descriptor of key, value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func headers(hs []*corev3.HeaderValue) map[string]string {
	m := map[string]string{}
	for _, h := range hs {
		m[h.Key] = h.Value
	}
	return m
}

var backendNames = []string{"redis", "embedded"}

// TestEnvoyDescriptors: an Envoy request's descriptors, on the policy translated from an
// envoyproxy/ratelimit config, are one decision: per-descriptor statuses with limits,
// remaining and reset, a denial charging nothing, shadow mode, hits_addend, headers.
func TestEnvoyDescriptors(t *testing.T) {
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			f := start(t, backend, map[string]string{"edge.hcl": edgePolicy(t)})
			ctx := context.Background()
			req := func(ip string) *rlsv3.RateLimitRequest {
				return &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
					desc("remote_address", ip), desc("generic_key", "api", "path", "/v1/items"), desc("tenant", "acme"),
				}}
			}
			for i := range 3 {
				resp, err := f.rls.ShouldRateLimit(ctx, req("10.0.0.1"))
				if err != nil {
					t.Fatal(err)
				}
				if resp.OverallCode != rlsv3.RateLimitResponse_OK || len(resp.Statuses) != 3 {
					t.Fatalf("call %d: %v", i+1, resp)
				}
				ip, path, tenant := resp.Statuses[0], resp.Statuses[1], resp.Statuses[2]
				if ip.Code != rlsv3.RateLimitResponse_OK || ip.CurrentLimit.GetRequestsPerUnit() != 3 || ip.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE ||
					ip.CurrentLimit.GetName() != "edge.remote_address" || ip.LimitRemaining != uint32(2-i) || ip.DurationUntilReset.AsDuration() <= 0 {
					t.Fatalf("call %d: address status %v", i+1, ip)
				}
				if path.CurrentLimit.GetRequestsPerUnit() != 10 || path.LimitRemaining != uint32(9-i) {
					t.Fatalf("call %d: path status %v", i+1, path)
				}
				if tenant.Code != rlsv3.RateLimitResponse_OK || tenant.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_HOUR || tenant.LimitRemaining != uint32(4-i) {
					t.Fatalf("call %d: tenant status %v", i+1, tenant)
				}
				if h := headers(resp.ResponseHeadersToAdd); !strings.Contains(h["ratelimit-policy"], `"edge.remote_address";q=3;w=60`) || h["ratelimit"] == "" || h["retry-after"] != "" {
					t.Fatalf("call %d: headers %v", i+1, h)
				}
			}
			resp, err := f.rls.ShouldRateLimit(ctx, req("10.0.0.1"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || resp.Statuses[0].Code != rlsv3.RateLimitResponse_OVER_LIMIT ||
				resp.Statuses[1].Code != rlsv3.RateLimitResponse_OK || resp.Statuses[0].DurationUntilReset.AsDuration() != time.Minute {
				t.Fatalf("4th call: %v", resp)
			}
			if h := headers(resp.ResponseHeadersToAdd); h["retry-after"] != "60" {
				t.Fatalf("4th call: headers %v", h)
			}
			// The denied request charged nothing: the path still has 7, the tenant 2.
			resp, err = f.rls.ShouldRateLimit(ctx, req("10.0.0.2"))
			if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[1].LimitRemaining != 6 || resp.Statuses[2].LimitRemaining != 1 {
				t.Fatalf("after the denial: %v %v", resp, err)
			}
			// Shadow mode: the tenant's limit is spent, its status stays OK.
			for _, ip := range []string{"10.0.1.1", "10.0.1.2", "10.0.1.3"} {
				resp, err = f.rls.ShouldRateLimit(ctx, req(ip))
				if err != nil {
					t.Fatal(err)
				}
			}
			if resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[2].Code != rlsv3.RateLimitResponse_OK || resp.Statuses[2].LimitRemaining != 0 {
				t.Fatalf("shadow: %v", resp)
			}
			// hits_addend: the request's for every descriptor, a descriptor's own over it
			// (0 peeks).
			one := &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 3, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "10.0.0.3")}}
			if resp, err = f.rls.ShouldRateLimit(ctx, one); err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != 0 {
				t.Fatalf("hits_addend 3: %v %v", resp, err)
			}
			peek := desc("remote_address", "10.0.0.4")
			peek.HitsAddend = wrapperspb.UInt64(0)
			two := &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 5, Descriptors: []*ratelimitv3.RateLimitDescriptor{peek}}
			if resp, err = f.rls.ShouldRateLimit(ctx, two); err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != 3 {
				t.Fatalf("descriptor hits_addend 0 over the request's 5: %v %v", resp, err)
			}
			// A domain no policy matches: every descriptor OK, without a limit.
			other := &rlsv3.RateLimitRequest{Domain: "elsewhere", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "10.0.0.1")}}
			if resp, err = f.rls.ShouldRateLimit(ctx, other); err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit != nil {
				t.Fatalf("another domain: %v %v", resp, err)
			}
			// What the protocol allows and rlctl refuses.
			neg := desc("remote_address", "10.0.0.5")
			neg.IsNegativeHits = true
			for name, r := range map[string]*rlsv3.RateLimitRequest{
				"no descriptors":   {Domain: "edge"},
				"is_negative_hits": {Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{neg}},
			} {
				if _, err := f.rls.ShouldRateLimit(ctx, r); status.Code(err) != codes.InvalidArgument {
					t.Errorf("%s: %v, want InvalidArgument", name, err)
				}
			}
		})
	}
}
