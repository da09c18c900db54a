package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
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

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/internal/syncbuf"
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
	conn  *grpc.ClientConn // the gRPC server's
	url   string           // the HTTP API's base URL
	// hgetall reads a hash of the backend's keys, as redis-server's HGETALL.
	hgetall func(key string) (map[string]string, error)
}

func start(t *testing.T, backend string, files map[string]string) *fixture {
	t.Helper()
	return startWith(t, backend, files, nil)
}

// startWith is start with the Server's Config changed by with (when not nil).
func startWith(t *testing.T, backend string, files map[string]string, with func(*Config)) *fixture {
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
		f.hgetall = func(key string) (map[string]string, error) { return rdb.HGetAll(context.Background(), key).Result() }
	default:
		h := luahost.New(luahost.WithClock(f.clock))
		b = engine.NewLocal(h)
		f.hgetall = func(key string) (map[string]string, error) {
			v, err := h.Do(context.Background(), "HGETALL", key)
			m := map[string]string{}
			fields, _ := v.([]any)
			for i := 0; i+1 < len(fields); i += 2 {
				k, _ := fields[i].(string)
				m[k], _ = fields[i+1].(string)
			}
			return m, err
		}
	}
	c := Config{Paths: []string{f.dir}, Backend: b, Engine: []engine.Option{engine.WithClock(f.clock.Now), engine.WithTimeout(time.Minute)}, Clock: f.clock.Now}
	if with != nil {
		with(&c)
	}
	srv, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(GRPCServerOptions()...)
	srv.RegisterGRPC(g)
	go g.Serve(l)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient("passthrough:///"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f.rls = rlsv3.NewRateLimitServiceClient(conn)
	f.conn = conn
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

// post sends body to the HTTP API's path and decodes the JSON answer into out (when not
// nil); it returns the status and the response's headers.
func (f *fixture) post(t *testing.T, path, body string, out any) (int, http.Header) {
	t.Helper()
	resp, err := http.Post(f.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %s: %v", path, b, err)
		}
	}
	return resp.StatusCode, resp.Header
}

const workersPolicy = `
policy "jobs" {
  match = request.queue != ""

  rule "per_tenant" {
    algorithm = "sliding_window"
    key       = request.tenant
    limit     = 2
    window    = "1m"
  }

  rule "running" {
    algorithm = "concurrency"
    key       = request.queue
    max       = 1
    ttl       = "5m"
  }
}
`

// TestHTTPAPI: decide, peek and release over real HTTP: the verdict and the rules in the
// body, the RateLimit fields in the headers, leases given back by id, bad bodies refused
// with a problem.
func TestHTTPAPI(t *testing.T) {
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			f := start(t, backend, map[string]string{"jobs.hcl": workersPolicy})
			var d decisionBody
			code, h := f.post(t, "/v1/decide", `{"attributes": {"queue": "q1", "tenant": "acme"}}`, &d)
			if code != 200 || !d.Allowed || d.Source != "backend" || d.Lease == "" || len(d.Rules) != 2 || d.Rules[0].Remaining != 1 {
				t.Fatalf("first: %d %+v", code, d)
			}
			if !strings.Contains(h.Get("RateLimit-Policy"), `"jobs.per_tenant";q=2;w=60`) || h.Get("RateLimit") == "" {
				t.Fatalf("headers %v", h)
			}
			lease := d.Lease
			// The queue's one slot is taken: denied by "running", and per_tenant is not charged.
			var busy decisionBody
			if code, h = f.post(t, "/v1/decide", `{"attributes": {"queue": "q1", "tenant": "acme"}}`, &busy); code != 200 || busy.Allowed || busy.Decider != "jobs.running" || busy.Lease != "" {
				t.Fatalf("busy: %d %+v", code, busy)
			}
			var p decisionBody
			if f.post(t, "/v1/peek", `{"attributes": {"queue": "q1", "tenant": "acme"}, "cost": 5}`, &p); p.Rules[0].Remaining != 1 {
				t.Fatalf("peek after the denial: %+v", p)
			}
			var rel map[string]bool
			if code, _ = f.post(t, "/v1/release", `{"lease": "`+lease+`"}`, &rel); code != 200 || !rel["released"] {
				t.Fatalf("release: %d %v", code, rel)
			}
			if code, _ = f.post(t, "/v1/release", `{"lease": "`+lease+`"}`, nil); code != 404 {
				t.Fatalf("second release: %d, want 404", code)
			}
			if f.post(t, "/v1/decide", `{"attributes": {"queue": "q1", "tenant": "acme"}}`, &d); !d.Allowed || d.Rules[0].Remaining != 0 {
				t.Fatalf("after the release: %+v", d)
			}
			// Several requests as one: the tenant's limit is spent, so neither queue's slot
			// is taken.
			var batch decisionBody
			f.post(t, "/v1/decide", `{"requests": [{"attributes": {"queue": "q2", "tenant": "zeta"}}, {"attributes": {"queue": "q3", "tenant": "acme"}}]}`, &batch)
			if batch.Allowed || batch.Decider != "jobs.per_tenant" || len(batch.Rules) != 4 || batch.Rules[2].Request != 1 || batch.RetryAfterMs <= 0 {
				t.Fatalf("batch: %+v", batch)
			}
			if f.post(t, "/v1/peek", `{"attributes": {"queue": "q2", "tenant": "zeta"}}`, &p); p.Rules[0].Remaining != 2 || !p.Rules[1].Allowed {
				t.Fatalf("the denied batch charged q2's tenant or slot: %+v", p)
			}
			for _, bad := range []string{
				``, `{`, `[]`, `{"attributes": {"queue": 1}}`, `{"atributes": {}}`, `{"attributes": {}} {}`,
				`{"attributes": {}, "requests": [{}]}`, `{"requests": []}`, `{"attributes": {"queue": "q"}, "cost": -1}`,
			} {
				var pr map[string]any
				if code, h := f.post(t, "/v1/decide", bad, &pr); code != 400 || h.Get("Content-Type") != "application/problem+json" || pr["detail"] == "" {
					t.Errorf("%q: %d %v", bad, code, pr)
				}
			}
			resp, err := http.Get(f.url + "/openapi.json")
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || doc["openapi"] != "3.1.0" {
				t.Fatalf("openapi.json: %v %v", doc["openapi"], err)
			}
			resp.Body.Close()
		})
	}
}

// TestReloadUnderLoad: while callers decide over gRPC without pause, reloads of a bad file,
// of a good file (a raised limit) and of a file changing a rule's algorithm fail no
// request; the bad one keeps the running policies with its diagnostics at file:line:col;
// the raised limit applies to the next requests, counters carried over; the new algorithm
// starts on keys of its own.
func TestReloadUnderLoad(t *testing.T) {
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			good := edgePolicy(t)
			f := start(t, backend, map[string]string{"edge.hcl": good})
			ctx := context.Background()
			call := func(ip string) (*rlsv3.RateLimitResponse, error) {
				return f.rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", ip)}})
			}
			for range 2 {
				if _, err := call("192.0.2.1"); err != nil {
					t.Fatal(err)
				}
			}
			const callers, each = 4, 150
			errs := make(chan error, callers)
			for c := range callers {
				go func() {
					for i := range each {
						resp, err := call(fmt.Sprintf("198.51.%d.%d", c, i))
						if err == nil && resp.OverallCode != rlsv3.RateLimitResponse_OK {
							err = fmt.Errorf("a first request denied: %v", resp)
						}
						if err != nil {
							errs <- err
							return
						}
					}
					errs <- nil
				}()
			}
			before := f.srv.Engine()
			if c, err := f.srv.Reload(); err != nil || c != nil || f.srv.Engine() != before {
				t.Fatalf("a reload of the same files: %v %v; the engine must stay", c, err)
			}
			f.write(t, "edge.hcl", strings.Replace(good, "limit     = 3", "limit     = 3\n    oops", 1))
			_, err := f.srv.Reload()
			if err == nil || !errors.Is(err, ErrPolicies) || !strings.Contains(err.Error(), "edge.hcl:") {
				t.Fatalf("a bad file: %v", err)
			}
			if f.srv.Engine() != before {
				t.Fatal("a refused reload replaced the engine")
			}
			f.write(t, "edge.hcl", strings.Replace(good, "limit     = 3", "limit     = 4", 1))
			changes, err := f.srv.Reload()
			if err != nil {
				t.Fatal(err)
			}
			if len(changes) != 3 || changes[0].Kind != Kept || changes[0].Rule != "remote_address" {
				t.Fatalf("changes %+v", changes)
			}
			// 192.0.2.1 had 2 counted of 3; now of 4 it has 1 left after this one.
			resp, err := call("192.0.2.1")
			if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 4 || resp.Statuses[0].LimitRemaining != 1 {
				t.Fatalf("after the reload: %v %v", resp, err)
			}
			// The algorithm changes under the same name: keys of its own, counters start empty.
			swapped := strings.Replace(strings.Replace(good, `algorithm = "fixed_window"`, `algorithm = "sliding_window"`, 1), "limit     = 3", "limit     = 4", 1)
			f.write(t, "edge.hcl", swapped)
			if changes, err = f.srv.Reload(); err != nil || changes[0].Kind != Reset || !strings.Contains(changes[0].Why, "the algorithm changed (fixed_window → sliding_window)") {
				t.Fatalf("an algorithm changed under the same name: %+v %v", changes, err)
			}
			for range callers {
				if err := <-errs; err != nil {
					t.Fatalf("a request failed during the reloads: %v", err)
				}
			}
			// sliding_window never read fixed_window's 3 of 4: 192.0.2.1 starts empty.
			resp, err = call("192.0.2.1")
			if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != 3 {
				t.Fatalf("after the algorithm changed: %v %v", resp, err)
			}
		})
	}
}

// TestChanges: what a reload does to each rule's counters.
func TestChanges(t *testing.T) {
	load := func(src string) *dsl.Config {
		cfg, diags := dsl.Parse(map[string][]byte{"p.hcl": []byte(src)})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return cfg
	}
	rule := func(name, alg, key string) string {
		params := `limit = 5` + "\n" + `window = "1m"`
		if alg == "gcra" {
			params = `rate = "5/m"` + "\n" + `burst = 5`
		}
		return fmt.Sprintf("rule %q {\nalgorithm = %q\nkey = %s\n%s\n}\n", name, alg, key, params)
	}
	old := load(`policy "p" {` + "\n" + rule("a", "fixed_window", "request.ip") + rule("b", "fixed_window", "request.user") +
		rule("c", "fixed_window", "request.user") + rule("d", "gcra", "request.user") + "}\n")
	cur := load(`policy "p" {` + "\n" + rule("a", "fixed_window", "request.ip") + rule("b", "fixed_window", "lower(request.user)") +
		rule("d", "sliding_window", "request.user") + rule("e", "fixed_window", "request.user") + "}\n" +
		`policy "q" {` + "\n" + `shard = request.tenant` + "\n" + rule("a", "fixed_window", "request.ip") + "}\n")
	var got []string
	for _, c := range Changes(old, cur) {
		got = append(got, c.Policy+"."+c.Rule+" "+c.Kind.String())
	}
	want := []string{"p.a kept", "p.b reset", "p.d reset", "p.e added", "q.a added", "p.c removed"}
	if !slices.Equal(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	sharded := load(`policy "p" {` + "\n" + `shard = request.tenant` + "\n" + rule("a", "fixed_window", "request.ip") + "}\n")
	if c := Changes(old, sharded); c[0].Kind != Reset || !strings.Contains(c[0].Why, "shard") {
		t.Fatalf("a new shard: %+v", c[0])
	}
}

// TestWatchReloads: the watcher reloads a changed file, and a bad edit counts a failed
// reload and keeps the policies.
func TestWatchReloads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "edge.hcl")
	good := edgePolicy(t)
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	// Reloads are reported on a channel: the test waits for the file events to cause them,
	// with no clock of its own (the test's -timeout bounds a wait).
	reloads := make(chan bool, 16)
	srv, err := New(Config{Paths: []string{path}, Backend: engine.NewLocal(luahost.New()), Reloaded: func(ok bool, _, _ int) { reloads <- ok }})
	if err != nil {
		t.Fatal(err)
	}
	<-reloads // the first load
	ctx, cancel := context.WithCancel(context.Background())
	done, err := srv.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		<-done
	}()
	// await reads reloads until one with result ok: a change may be seen as more than one
	// event, and a reload that finds the same files reports ok.
	await := func(ok bool) {
		for <-reloads != ok {
		}
	}
	first := srv.Engine()
	if err := os.WriteFile(path, []byte(strings.Replace(good, "limit     = 3", "limit     = 4", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	await(true)
	for srv.Engine() == first {
		await(true) // the first reload seen may have been of the write's first event
	}
	running := srv.Engine()
	// An editor's save: a new file renamed over the old one.
	tmp := filepath.Join(dir, ".edge.hcl.swp")
	if err := os.WriteFile(tmp, []byte("policy {"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	await(false)
	if srv.Engine() != running {
		t.Fatal("a bad edit replaced the running engine")
	}
}

// TestReloadKeepsTheLocalFallback: during an outage an on_error = "local" policy counts in
// process; a reload in the middle of it keeps those counts (every engine of the server
// shares one fallback).
func TestReloadKeepsTheLocalFallback(t *testing.T) {
	redisSrv := redistest.Start(t)
	dir := t.TempDir()
	policy := strings.Replace(edgePolicy(t), "\n  match =", "\n  on_error = \"local\"\n  clock = \"client\"\n  match =", 1)
	path := filepath.Join(dir, "edge.hcl")
	if err := os.WriteFile(path, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	clock := luahost.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	srv, err := New(Config{Paths: []string{path}, Backend: engine.NewRedis(redisSrv.Client(t)),
		Engine: []engine.Option{engine.WithClock(clock.Now)}, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	redisSrv.Kill(t)
	ctx := context.Background()
	ip := []dsl.Request{engine.Attrs{"domain": "edge", "descriptor": "remote_address", "remote_address": "192.0.2.9"}}
	for range 2 {
		if d, err := srv.Engine().AllowAll(ctx, ip, nil); err != nil || !d.Allowed || d.Source != engine.FromLocal {
			t.Fatalf("before the reload: %+v %v", d, err)
		}
	}
	if _, err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if d, err := srv.Engine().AllowAll(ctx, ip, nil); err != nil || !d.Allowed || d.Source != engine.FromLocal || d.Rules[0].Remaining != 0 {
		t.Fatalf("the third request, after the reload: %+v %v", d, err)
	}
	if d, err := srv.Engine().AllowAll(ctx, ip, nil); err != nil || d.Allowed {
		t.Fatalf("the fourth request passed: the reload forgot the outage's counts: %+v %v", d, err)
	}
}

// TestLocalFallbackCap: LocalMaxMemory bounds what the shared on_error = "local" fallback
// keeps during an outage: past it keys are evicted and the hook counts them.
func TestLocalFallbackCap(t *testing.T) {
	redisSrv := redistest.Start(t)
	dir := t.TempDir()
	policy := strings.Replace(edgePolicy(t), "\n  match =", "\n  on_error = \"local\"\n  match =", 1)
	path := filepath.Join(dir, "edge.hcl")
	if err := os.WriteFile(path, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	var evicted atomic.Uint64
	srv, err := New(Config{Paths: []string{path}, Backend: engine.NewRedis(redisSrv.Client(t)), LocalMaxMemory: 64 << 10,
		Engine: []engine.Option{engine.WithHooks(engine.Hooks{Evicted: func(n uint64) { evicted.Add(n) }})}})
	if err != nil {
		t.Fatal(err)
	}
	redisSrv.Kill(t)
	ctx := context.Background()
	for i := range 5000 {
		ip := []dsl.Request{engine.Attrs{"domain": "edge", "descriptor": "remote_address", "remote_address": fmt.Sprint("10.", i/256, ".", i%256, ".1")}}
		if d, err := srv.Engine().AllowAll(ctx, ip, nil); err != nil || !d.Allowed || d.Source != engine.FromLocal {
			t.Fatalf("request %d: %+v %v", i, d, err)
		}
	}
	if evicted.Load() == 0 {
		t.Fatal("5000 clients in a 64 KiB fallback evicted nothing")
	}
}

// TestHTTPAtMost: a partial admission over HTTP grants the most of its cost that fits,
// says how many in granted, and is refused where it does not apply.
func TestHTTPAtMost(t *testing.T) {
	const policy = `
policy "mail" {
  rule "per_tenant" {
    algorithm = "fixed_window"
    key       = request.tenant
    limit     = 10
    window    = "1h"
  }
}
`
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			f := start(t, backend, map[string]string{"mail.hcl": policy})
			for i, want := range []int64{8, 2, 0} {
				var d decisionBody
				code, _ := f.post(t, "/v1/decide", `{"attributes": {"tenant": "acme"}, "cost": 8, "at_most": true}`, &d)
				if code != 200 || d.Granted == nil || *d.Granted != want || d.Allowed != (want > 0) {
					t.Fatalf("batch %d: %d %+v, want %d granted", i+1, code, d, want)
				}
				if want == 0 && d.RetryAfterMs <= 0 {
					t.Fatalf("denied with retry_after_ms %d, want the wait for one unit", d.RetryAfterMs)
				}
			}
			var d decisionBody
			if f.post(t, "/v1/decide", `{"attributes": {"tenant": "zeta"}}`, &d); d.Granted != nil {
				t.Fatalf("a request without at_most reports granted: %+v", d)
			}
			for _, bad := range []struct{ path, body string }{
				{"/v1/decide", `{"requests": [{"attributes": {}}], "at_most": true}`},
				{"/v1/peek", `{"attributes": {"tenant": "acme"}, "at_most": true}`},
				{"/v1/decide", `{"attributes": {"tenant": "acme"}, "cost": 0, "at_most": true}`},
			} {
				var pr map[string]any
				if code, _ := f.post(t, bad.path, bad.body, &pr); code != 400 || pr["detail"] == "" {
					t.Errorf("%s %s: %d %v, want 400", bad.path, bad.body, code, pr)
				}
			}
		})
	}
}

// TestHTTPReset: /v1/reset forgets a request's counters for a caller with the admin
// right only, and logs every attempt.
func TestHTTPReset(t *testing.T) {
	const policy = `
policy "login" {
  rule "per_user" {
    algorithm = "fixed_window"
    key       = request.user
    when      = request.user != ""
    limit     = 2
    window    = "1h"
  }
}
`
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			var logs syncbuf.Buffer
			f := startWith(t, backend, map[string]string{"login.hcl": policy}, func(c *Config) {
				c.Admin = func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer ops" }
				c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			var d decisionBody
			for range 3 {
				f.post(t, "/v1/decide", `{"attributes": {"user": "alice"}}`, &d)
			}
			if d.Allowed {
				t.Fatal("the third request of a limit of 2 was allowed")
			}
			reset := func(auth string) int {
				req, _ := http.NewRequest("POST", f.url+"/v1/reset", strings.NewReader(`{"attributes": {"user": "alice"}}`))
				req.Header.Set("Content-Type", "application/json")
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			for _, auth := range []string{"", "Bearer edge"} {
				if code := reset(auth); code != http.StatusForbidden {
					t.Errorf("reset with %q: %d, want 403", auth, code)
				}
			}
			if f.post(t, "/v1/decide", `{"attributes": {"user": "alice"}}`, &d); d.Allowed {
				t.Fatal("a refused reset forgot the counter")
			}
			if code := reset("Bearer ops"); code != http.StatusOK {
				t.Fatalf("reset with the admin token: %d, want 200", code)
			}
			if f.post(t, "/v1/decide", `{"attributes": {"user": "alice"}}`, &d); !d.Allowed || d.Rules[0].Remaining != 1 {
				t.Fatalf("after the reset: %+v, want a fresh counter", d)
			}
			if n := strings.Count(logs.String(), "reset refused"); n != 2 {
				t.Errorf("%d refused resets logged, want 2:\n%s", n, logs.String())
			}
			if !strings.Contains(logs.String(), `msg="rlctl serve: reset"`) || !strings.Contains(logs.String(), "alice") {
				t.Errorf("the reset is not logged with its request:\n%s", logs.String())
			}
		})
	}
}

// TestHTTPPenaltyBox: a boxed rule's offence blocks the key through the HTTP API; a peek
// (read right) shows the block, charging nothing; a reset (admin right) unblocks it.
func TestHTTPPenaltyBox(t *testing.T) {
	const policy = `
policy "login" {
  rule "per_user" {
    algorithm = "fixed_window"
    key       = request.user
    when      = request.user != ""
    limit     = 2
    window    = "1m"
    block_for = "1h"
  }
}
`
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			f := startWith(t, backend, map[string]string{"login.hcl": policy}, func(c *Config) {
				c.Admin = func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer ops" }
			})
			var d decisionBody
			for range 3 {
				f.post(t, "/v1/decide", `{"attributes": {"user": "alice"}}`, &d)
			}
			hour := time.Hour.Milliseconds()
			if d.Allowed || d.RetryAfterMs < hour-1000 || d.RetryAfterMs > hour {
				t.Fatalf("the offence: %+v, want denied for the hour's block", d)
			}
			var p decisionBody
			if f.post(t, "/v1/peek", `{"attributes": {"user": "alice"}}`, &p); p.Allowed || p.RetryAfterMs < hour-1000 || p.Rules[0].Remaining != 0 {
				t.Fatalf("peek of a blocked key: %+v, want the block", p)
			}
			req, _ := http.NewRequest("POST", f.url+"/v1/reset", strings.NewReader(`{"attributes": {"user": "alice"}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer ops")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("reset: %d", resp.StatusCode)
			}
			if f.post(t, "/v1/decide", `{"attributes": {"user": "alice"}}`, &d); !d.Allowed || d.Rules[0].Remaining != 1 {
				t.Fatalf("after the reset: %+v, want unblocked with a fresh counter", d)
			}
		})
	}
}
