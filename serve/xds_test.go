package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	ratelimitconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/envoyconf"
	"github.com/rlctl/rlctl/internal/syncbuf"
	"github.com/rlctl/rlctl/internal/xdstest"
	"github.com/rlctl/rlctl/luahost"
)

const xdsNode = "rlctl-test"

// vclock is the backoff's virtual clock: each wait the client asks for, and the means to
// end it.
type vclock struct {
	waits chan wait
}

type wait struct {
	d    time.Duration
	fire chan time.Time
}

func (c *vclock) after(d time.Duration) <-chan time.Time {
	w := wait{d: d, fire: make(chan time.Time, 1)}
	c.waits <- w
	return w.fire
}

// recv is the next value of ch, within ctx.
func recv[T any](ctx context.Context, t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatal("waited in vain")
		var zero T
		return zero
	}
}

// within bounds a test's waits: a safety net, never what a test waits for.
func within(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// xdsConn is a connection to m that reconnects at once (grpc's own backoff would wait on
// the wall clock).
func xdsConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: time.Millisecond, Multiplier: 1, MaxDelay: time.Millisecond}, MinConnectTimeout: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// reloads counts a Server's load attempts by outcome (Config.Reloaded). Each is counted
// before the management server is answered: once it has the answer, the count is there.
type reloads struct{ ok, failed atomic.Int32 }

func (r *reloads) hook(ok bool, _, _ int) {
	if ok {
		r.ok.Add(1)
	} else {
		r.failed.Add(1)
	}
}

// xdsFixture is a Server on the embedded backend taking its policies from m (and the
// files, if any), with the backoff on clock.
func xdsFixture(t *testing.T, m *xdstest.Server, clock *vclock, files map[string]string) (*fixture, *reloads) {
	t.Helper()
	var log syncbuf.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(log.String())
		}
	})
	r := &reloads{}
	f := startWith(t, "embedded", files, func(c *Config) {
		if files == nil {
			c.Paths = nil
		}
		c.pause = func() {}
		c.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.Reloaded = r.hook
		c.XDS = &XDS{
			Conn: xdsConn(t, m.Addr), Node: &corev3.Node{Id: xdsNode}, Wait: within(t),
			Backoff: func(n int) time.Duration { return time.Duration(n) * time.Second },
			After:   clock.after,
		}
	})
	t.Cleanup(func() { f.srv.Close() })
	return f, r
}

// toProto is c as a management server sends it: envoyconf.FromProto's inverse.
func toProto(c *envoyconf.Config) *ratelimitconfv3.RateLimitConfig {
	units := map[string]ratelimitconfv3.RateLimitUnit{"SECOND": 1, "MINUTE": 2, "HOUR": 3, "DAY": 4, "MONTH": 5, "YEAR": 6, "WEEK": 7}
	var level func([]*envoyconf.Descriptor) []*ratelimitconfv3.RateLimitDescriptor
	level = func(ds []*envoyconf.Descriptor) []*ratelimitconfv3.RateLimitDescriptor {
		var out []*ratelimitconfv3.RateLimitDescriptor
		for _, d := range ds {
			pd := &ratelimitconfv3.RateLimitDescriptor{Key: d.Key, Value: d.Value, ShadowMode: d.ShadowMode, DetailedMetric: d.DetailedMetric, Descriptors: level(d.Descriptors)}
			if rl := d.RateLimit; rl != nil {
				pd.RateLimit = &ratelimitconfv3.RateLimitPolicy{Unit: units[rl.Unit], RequestsPerUnit: rl.RequestsPerUnit, Unlimited: rl.Unlimited, Name: rl.Name}
			}
			out = append(out, pd)
		}
		return out
	}
	return &ratelimitconfv3.RateLimitConfig{Name: c.Name, Domain: c.Domain, Descriptors: level(c.Descriptors)}
}

func parseYAML(t *testing.T, name, src string) *envoyconf.Config {
	t.Helper()
	c, err := envoyconf.Parse(name, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// edgeCalls are Envoy requests on the descriptors of testdata/envoy/ratelimit.yaml, past
// each of its limits.
func edgeCalls() []*rlsv3.RateLimitRequest {
	var calls []*rlsv3.RateLimitRequest
	add := func(n int, ds ...*ratelimitv3.RateLimitDescriptor) {
		for range n {
			calls = append(calls, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: ds})
		}
	}
	add(4, desc("remote_address", "10.0.0.1"))
	add(11, desc("generic_key", "api", "path", "/a"))
	add(2, desc("generic_key", "web", "path", "/a"))
	add(6, desc("tenant", "t1"))
	add(3, desc("remote_address", "10.0.0.2"), desc("generic_key", "api", "path", "/b"), desc("tenant", "t2"))
	calls = append(calls, &rlsv3.RateLimitRequest{Domain: "other", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "10.0.0.1")}})
	return calls
}

// TestXDS: a Server taking its policies from a management server. The first
// configuration decides every call as the same configuration imported from YAML does;
// a second replaces it (removing a limit, which files could not without -allow-removal);
// a bad one is refused to the management server (NACK, the version it had) and counted as
// a failed reload, while the running policies keep deciding, and when the management
// server sends it again the client tries it after a wait on its clock rather than at once;
// when the management server goes away the client backs off on its clock, failure after
// failure, and when it comes back the client asks with the version it runs and takes the
// new configuration; the backoff starts over after a stream that worked.
func TestXDS(t *testing.T) {
	ctx := within(t)
	yaml, err := os.ReadFile("testdata/envoy/ratelimit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := xdstest.Start(t, "127.0.0.1:0")
	m.Set(t, xdsNode, "v1", toProto(parseYAML(t, "ratelimit.yaml", string(yaml))))
	clock := &vclock{waits: make(chan wait, 10)}
	f, r := xdsFixture(t, m, clock, nil)
	if first := m.Next(ctx, t); first.GetNode().GetId() != xdsNode || first.GetTypeUrl() != RateLimitConfigType || first.GetVersionInfo() != "" {
		t.Fatalf("first request %v", first)
	}
	if ack := m.Answered(ctx, t, "v1"); ack.GetErrorDetail() != nil || ack.GetVersionInfo() != "v1" {
		t.Fatalf("v1: %v", ack)
	}
	if r.ok.Load() != 1 || r.failed.Load() != 0 {
		t.Fatalf("reloads: %d ok, %d failed", r.ok.Load(), r.failed.Load())
	}

	t.Run("decides as imported", func(t *testing.T) {
		policy, err := envoyconf.Import([]envoyconf.File{{Name: "ratelimit.yaml", Src: yaml}}, envoyconf.Options{})
		if err != nil {
			t.Fatal(err)
		}
		files := start(t, "embedded", map[string]string{"edge.hcl": string(policy)})
		for i, call := range edgeCalls() {
			got, gerr := f.rls.ShouldRateLimit(ctx, call)
			want, werr := files.rls.ShouldRateLimit(ctx, call)
			if (gerr == nil) != (werr == nil) || !proto.Equal(got, want) {
				t.Fatalf("call %d %v:\nxDS   %v %v\nfiles %v %v", i, call, got, gerr, want, werr)
			}
		}
	})

	limitsOne := func(ip string) bool {
		t.Helper()
		var codes []rlsv3.RateLimitResponse_Code
		for range 2 {
			resp, err := f.rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", ip)}})
			if err != nil {
				t.Fatal(err)
			}
			codes = append(codes, resp.GetOverallCode())
		}
		return codes[0] == rlsv3.RateLimitResponse_OK && codes[1] == rlsv3.RateLimitResponse_OVER_LIMIT
	}
	v2 := `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 1}
`
	t.Run("replaced", func(t *testing.T) {
		m.Set(t, xdsNode, "v2", toProto(parseYAML(t, "edge", v2)))
		if ack := m.Answered(ctx, t, "v2"); ack.GetErrorDetail() != nil || ack.GetVersionInfo() != "v2" {
			t.Fatalf("v2: %v", ack)
		}
		if r.ok.Load() != 2 {
			t.Fatalf("v2 is not counted as a reload: %d", r.ok.Load())
		}
		if !limitsOne("10.1.0.1") {
			t.Error("v2's limit of 1 a minute does not decide")
		}
		resp, err := f.rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "t9")}})
		if err != nil || resp.GetStatuses()[0].GetCurrentLimit() != nil {
			t.Errorf("the tenant limit v2 removed still applies: %v %v", resp, err)
		}
	})

	t.Run("refused", func(t *testing.T) {
		bad := []*ratelimitconfv3.RateLimitConfig{{Name: "bad", Domain: "edge", Descriptors: []*ratelimitconfv3.RateLimitDescriptor{
			{Key: "k", RateLimit: &ratelimitconfv3.RateLimitPolicy{RequestsPerUnit: 1}}}}}
		twice := []*ratelimitconfv3.RateLimitConfig{toProto(parseYAML(t, "a", v2)), toProto(parseYAML(t, "b", v2))}
		// Each version's failure is counted against the count taken before it is sent: the
		// client may refuse it before the loop reads the count.
		failed := r.failed.Load()
		m.Set(t, xdsNode, "v3", bad...)
		for i, c := range []struct {
			version string
			why     string
			next    []*ratelimitconfv3.RateLimitConfig // set while the client waits to try it again
		}{
			{"v3", `bad: invalid rate limit unit ""`, twice},
			{"v4", `b: duplicate domain "edge"`, []*ratelimitconfv3.RateLimitConfig{toProto(parseYAML(t, "edge", v2))}},
		} {
			nack := m.Answered(ctx, t, c.version)
			if nack.GetErrorDetail() == nil || nack.GetVersionInfo() != "v2" || !strings.Contains(nack.GetErrorDetail().GetMessage(), c.why) {
				t.Fatalf("%s: %v, want a NACK at v2 saying %q", c.version, nack, c.why)
			}
			if r.failed.Load() <= failed {
				t.Errorf("%s is not counted as a failed reload", c.version)
			}
			if !limitsOne(fmt.Sprintf("10.2.0.%d", i)) {
				t.Fatalf("after %s, v2 no longer decides", c.version)
			}
			// The management server sends it again at once; the client waits first.
			w := recv(ctx, t, clock.waits)
			if w.d != time.Second {
				t.Errorf("%s comes again: the client waits %v, want the backoff's first 1s", c.version, w.d)
			}
			failed = r.failed.Load()
			m.Set(t, xdsNode, fmt.Sprintf("v%d", 4+i), c.next...)
			w.fire <- time.Time{}
		}
		if ack := m.Answered(ctx, t, "v5"); ack.GetErrorDetail() != nil || ack.GetVersionInfo() != "v5" {
			t.Fatalf("v5, as v2: %v", ack)
		}
	})

	t.Run("reconnects", func(t *testing.T) {
		m.Stop()
		for n := 1; n <= 3; n++ { // each attempt fails while the server is away
			w := recv(ctx, t, clock.waits)
			if w.d != time.Duration(n)*time.Second {
				t.Fatalf("wait %d: %v, want %ds", n, w.d, n)
			}
			if n < 3 {
				w.fire <- time.Time{}
				continue
			}
			m2 := xdstest.Start(t, m.Addr)
			m2.Set(t, xdsNode, "v6", toProto(parseYAML(t, "edge", strings.Replace(v2, "minute", "hour", 1))))
			w.fire <- time.Time{}
			var first *discoveryv3.DiscoveryRequest
			for first == nil { // grpc may still be reconnecting: more waits, each fired
				select {
				case w := <-clock.waits:
					w.fire <- time.Time{}
				case first = <-m2.Requests:
				case <-ctx.Done():
					t.Fatal("the client never came back")
				}
			}
			if first.GetVersionInfo() != "v5" || first.GetNode().GetId() != xdsNode || first.GetResponseNonce() != "" {
				t.Fatalf("first request after reconnecting: %v, want version v5", first)
			}
			if ack := m2.Answered(ctx, t, "v6"); ack.GetErrorDetail() != nil {
				t.Fatalf("v6: %v", ack)
			}
			resp, err := f.rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "10.3.0.1")}})
			if err != nil || resp.GetStatuses()[0].GetCurrentLimit().GetUnit() != rlsv3.RateLimitResponse_RateLimit_HOUR {
				t.Fatalf("v6 does not decide: %v %v", resp, err)
			}
			m2.Stop()
		}
		if w := recv(ctx, t, clock.waits); w.d != time.Second {
			t.Errorf("after a stream that worked, the backoff is %v, want it started over at 1s", w.d)
		}
		f.srv.Close() // returns while backing off
	})
}

// TestXDSWaits: New waits for a first configuration that loads. A first one that does
// not is refused (NACK, with no version) and New goes on waiting until one does; with
// none at all, New ends with its Wait context.
func TestXDSWaits(t *testing.T) {
	ctx := within(t)
	m := xdstest.Start(t, "127.0.0.1:0")
	clock := &vclock{waits: make(chan wait, 10)}
	newServer := func(node string, wait context.Context) chan error {
		done := make(chan error, 1)
		go func() {
			srv, err := New(Config{Backend: engine.NewLocal(luahost.New()), XDS: &XDS{
				Conn: xdsConn(t, m.Addr), Node: &corev3.Node{Id: node}, Wait: wait, After: clock.after,
			}})
			if err == nil {
				srv.Close()
			}
			done <- err
		}()
		return done
	}

	done := newServer(xdsNode, ctx)
	m.Next(ctx, t) // the client is waiting
	m.Set(t, xdsNode, "v1", &ratelimitconfv3.RateLimitConfig{Name: "bad", Domain: "edge", Descriptors: []*ratelimitconfv3.RateLimitDescriptor{
		{Key: "k", RateLimit: &ratelimitconfv3.RateLimitPolicy{RequestsPerUnit: 1}}}})
	if nack := m.Answered(ctx, t, "v1"); nack.GetErrorDetail() == nil || nack.GetVersionInfo() != "" || !strings.Contains(nack.GetErrorDetail().GetMessage(), "invalid rate limit unit") {
		t.Fatalf("a first configuration that does not translate: %v", nack)
	}
	w := recv(ctx, t, clock.waits) // v1 again, tried after a wait
	select {
	case err := <-done:
		t.Fatalf("New returned (%v) with no configuration loaded", err)
	default:
	}
	m.Set(t, xdsNode, "v2", &ratelimitconfv3.RateLimitConfig{Name: "good", Domain: "edge", Descriptors: []*ratelimitconfv3.RateLimitDescriptor{
		{Key: "k", RateLimit: &ratelimitconfv3.RateLimitPolicy{Unit: ratelimitconfv3.RateLimitUnit_SECOND, RequestsPerUnit: 1}}}})
	w.fire <- time.Time{}
	if err := recv(ctx, t, done); err != nil {
		t.Fatalf("New, once a configuration loads: %v", err)
	}

	wait, cancel := context.WithCancel(ctx)
	done = newServer("rlctl-no-snapshot", wait)
	m.Next(ctx, t)
	cancel()
	if err := recv(ctx, t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("New with no configuration: %v, want the end of its Wait", err)
	}
}

// TestXDSWithFiles: the files and the management server's policies decide together; an
// update of the server's loads with the running files (a file broken since is not read
// and does not refuse it), a file reload with the server's running policies; removal
// protection still holds for the files; a server policy named as a file's is refused.
func TestXDSWithFiles(t *testing.T) {
	ctx := within(t)
	m := xdstest.Start(t, "127.0.0.1:0")
	v1 := `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 1}
`
	m.Set(t, xdsNode, "v1", toProto(parseYAML(t, "edge", v1)))
	files := map[string]string{"users.hcl": `policy "users" {
  match = request.domain == "users"
  rule "each" {
    algorithm = "fixed_window"
    key       = request.user
    limit     = 1
    window    = "1m"
  }
}
`}
	f, _ := xdsFixture(t, m, &vclock{waits: make(chan wait, 10)}, files)
	decide := func(domain, key, value string) rlsv3.RateLimitResponse_Code {
		t.Helper()
		resp, err := f.rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc(key, value)}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetOverallCode()
	}
	both := func(step string, ip, user string) {
		t.Helper()
		if decide("edge", "remote_address", ip) != rlsv3.RateLimitResponse_OK || decide("edge", "remote_address", ip) != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Errorf("%s: the server's policy does not decide", step)
		}
		if decide("users", "user", user) != rlsv3.RateLimitResponse_OK || decide("users", "user", user) != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Errorf("%s: the file's policy does not decide", step)
		}
	}
	both("start", "10.0.0.1", "u1")

	f.write(t, "users.hcl", "this does not parse {")
	m.Set(t, xdsNode, "v2", toProto(parseYAML(t, "edge", strings.Replace(v1, "minute", "hour", 1))))
	if ack := m.Answered(ctx, t, "v2"); ack.GetErrorDetail() != nil {
		t.Fatalf("v2 is refused for a file it should not read: %v", ack.GetErrorDetail())
	}
	both("v2", "10.0.0.2", "u2")

	if _, err := f.srv.Reload(); !errors.Is(err, ErrPolicies) {
		t.Fatalf("a reload of the broken file: %v", err)
	}
	f.write(t, "users.hcl", "# emptied\n")
	if _, err := f.srv.Reload(); !errors.Is(err, ErrRemoval) {
		t.Fatalf("a reload removing the file's policy: %v, want ErrRemoval", err)
	}
	f.write(t, "users.hcl", strings.Replace(files["users.hcl"], `"1m"`, `"1h"`, 1))
	if _, err := f.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	both("file reloaded", "10.0.0.3", "u3")

	clash := toProto(parseYAML(t, "users", "domain: users\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 9}\n"))
	m.Set(t, xdsNode, "v3", toProto(parseYAML(t, "edge", v1)), clash)
	if nack := m.Answered(ctx, t, "v3"); nack.GetErrorDetail() == nil || nack.GetVersionInfo() != "v2" || !strings.Contains(nack.GetErrorDetail().GetMessage(), `"users"`) {
		t.Fatalf("a server policy named as a file's: %v", nack)
	}
	both("v3 refused", "10.0.0.4", "u4")
}
