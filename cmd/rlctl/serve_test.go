package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/internal/syncbuf"
)

// metric reads one sample from a Prometheus text exposition: the line that starts with
// name and its labels exactly as written ({a="x",b="y"}, sorted by label name), or -1.
func metric(t *testing.T, url, series string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return f
		}
	}
	return -1
}

// TestServeEndToEnd runs rlctl serve on a real redis-server with the policy translated
// from an envoyproxy/ratelimit config, and checks over real gRPC and HTTP: decisions,
// health, the metrics it exports, a bad edit and a SIGHUP reload while serving, and a
// shutdown that lets a call in flight (held by a paused Redis) finish.
func TestServeEndToEnd(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	policy, err := os.ReadFile("../../serve/testdata/envoy/edge.hcl")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "edge.hcl")
	if err := os.WriteFile(path, policy, 0o644); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 64)
	serveGRPCOptions = []grpc.ServerOption{grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if info.FullMethod == "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" {
			select {
			case started <- struct{}{}:
			default:
			}
		}
		return h(ctx, req)
	})}
	serveStop = make(chan struct{})
	ready := make(chan [3]string, 1)
	var adminAddr string
	serveAdminReady = func(a string) { adminAddr = a }
	serveReady = func(g, h string) { ready <- [3]string{g, h, adminAddr} }
	// Reloads and the drain are reported on channels: the test waits for them to happen,
	// on real file events and signals, with no clock of its own.
	reloads := make(chan bool, 16)
	serveReloaded = func(ok bool) { reloads <- ok }
	draining := make(chan struct{})
	serveDraining = func() { close(draining) }
	defer func() {
		serveGRPCOptions, serveStop, serveReady, serveAdminReady, serveReloaded, serveDraining = nil, nil, nil, nil, nil, nil
	}()

	var logs syncbuf.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- run([]string{"serve", "-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-redis", "redis://" + srv.Addr(), "-timeout", "20s", "-drain", "30s", path},
			&env{stdout: &logs, stderr: &logs})
	}()
	var addrs [3]string
	select {
	case addrs = <-ready:
	case code := <-exit:
		t.Fatalf("serve exited %d:\n%s", code, logs.String())
	}
	web, admin := "http://"+addrs[1], "http://"+addrs[2]
	conn, err := grpc.NewClient("passthrough:///"+addrs[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rls := rlsv3.NewRateLimitServiceClient(conn)
	ctx := context.Background()
	call := func(ip string) *rlsv3.RateLimitResponse {
		t.Helper()
		resp, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: ip}}},
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "tenant", Value: "acme"}}},
		}})
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v\n%s", err, logs.String())
		}
		return resp
	}
	// The fourth call is denied; when its minute ends (Redis's clock) the counter starts
	// afresh, so the carry-over checked after the reloads is checked in that minute only.
	var windowEnd time.Time
	for i := range 4 {
		r := call("203.0.113.9")
		if got, want := r.OverallCode, rlsv3.RateLimitResponse_OK; (i < 3) != (got == want) {
			t.Fatalf("call %d: %v", i+1, got)
		}
		windowEnd = time.Now().Add(r.Statuses[0].DurationUntilReset.AsDuration())
	}
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", h, err)
	}
	resp, err := http.Post(web+"/v1/decide", "application/json", strings.NewReader(`{"attributes": {"domain": "edge", "descriptor": "remote_address", "remote_address": "203.0.113.9"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var d struct{ Allowed bool }
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || d.Allowed || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("HTTP decide of the spent address: %+v %v %v", d, err, resp.Header)
	}
	resp.Body.Close()

	for series, want := range map[string]float64{
		`rlctl_decisions_total{outcome="allowed",policy="edge",rule="remote_address"}`: 3,
		`rlctl_decisions_total{outcome="denied",policy="edge",rule="remote_address"}`:  2,
		`rlctl_decisions_total{outcome="shadow_denied",policy="edge",rule="tenant"}`:   0,
		`rlctl_decisions_total{outcome="allowed",policy="edge",rule="tenant"}`:         4,
		`rlctl_requests_total{outcome="denied",source="backend"}`:                      2,
		`rlctl_config_reloads_total{result="ok"}`:                                      1,
		`rlctl_plan_rules`:         3,
		`rlctl_script_loads_total`: 1,
		`rlctl_backend_call_duration_seconds_count{op="check",result="ok"}`: 5,
	} {
		if got := metric(t, admin, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}

	// await reads reloads until one with result ok (one file write may make the watcher
	// reload twice; the second finds the same files); the test's -timeout bounds it.
	await := func(ok bool) {
		for <-reloads != ok {
		}
	}
	await(true) // the first load
	if err := os.WriteFile(path, []byte(strings.Replace(string(policy), "limit     = 3", "limit     = three", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	await(false)
	if got := metric(t, admin, `rlctl_config_reloads_total{result="failed"}`); got < 1 {
		t.Errorf("rlctl_config_reloads_total{result=\"failed\"} = %v, want at least 1", got)
	}
	if !strings.Contains(logs.String(), "edge.hcl:14:17: error: Unknown variable") {
		t.Errorf("the refused reload's log has no file:line:col:\n%s", logs.String())
	}
	if call("203.0.113.10").OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatal("a bad edit stopped the service deciding")
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(policy), "limit     = 3", "limit     = 5", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	await(true)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	await(true)
	if got := metric(t, admin, `rlctl_config_reloads_total{result="ok"}`); got < 3 {
		t.Errorf("rlctl_config_reloads_total{result=\"ok\"} = %v, want at least 3 (the load, the fixed file, SIGHUP)", got)
	}
	// The raised limit applies, the address's counter carried over: 3 counted, 2 left, 1
	// after this call; or, when the minute of the first calls has ended meanwhile, 4 left
	// of a fresh 5 (the window ends seen before and now differ by a minute, not by the
	// moments between the calls).
	r := call("203.0.113.9")
	want := uint32(1)
	if end := time.Now().Add(r.Statuses[0].DurationUntilReset.AsDuration()); end.Sub(windowEnd) > 30*time.Second {
		want = 4
	}
	if r.OverallCode != rlsv3.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != want {
		t.Fatalf("after the reloads (want %d left): %v", want, r)
	}

	// Shutdown drains: a call held by a paused Redis finishes after the stop begins.
	srv.Pause(t)
	for len(started) > 0 {
		<-started
	}
	inflight := make(chan error, 1)
	go func() {
		r, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "198.18.0.1"}}},
		}})
		if err == nil && r.OverallCode != rlsv3.RateLimitResponse_OK {
			err = fmt.Errorf("the drained call: %v", r)
		}
		inflight <- err
	}()
	<-started
	close(serveStop)
	<-draining
	srv.Resume()
	if err := <-inflight; err != nil {
		t.Fatalf("the call in flight at shutdown failed: %v", err)
	}
	if code := <-exit; code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, logs.String())
	}
}

// TestServeAllowRemoval: a reload that removes a rule is refused, the running policies
// staying, unless serve runs with -allow-removal.
func TestServeAllowRemoval(t *testing.T) {
	edge, err := os.ReadFile(filepath.Join(root, "serve", "testdata", "envoy", "edge.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	// edge.hcl less its last rule, "tenant".
	cut := string(edge[:strings.Index(string(edge), `  rule "tenant"`)]) + "}\n"
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow=%v", allow), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "edge.hcl")
			if err := os.WriteFile(path, edge, 0o644); err != nil {
				t.Fatal(err)
			}
			reloads := make(chan bool, 16)
			serveReloaded = func(ok bool) { reloads <- ok }
			var args []string
			if allow {
				args = append(args, "-allow-removal")
			}
			s := startServeOn(t, path, args...)
			if !<-reloads {
				t.Fatal("the first load failed")
			}
			// Written whole and renamed into place: the watcher must not reload a file
			// half written, which would fail for a reason of its own.
			if err := writeAtomic(path, []byte(cut)); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			if ok := <-reloads; ok != allow {
				t.Errorf("the reload removing a rule: ok = %v, want %v\n%s", ok, allow, s.logs)
			}
			rules := metric(t, "http://"+s.admin, "rlctl_plan_rules")
			if want := map[bool]float64{false: 3, true: 2}[allow]; rules != want {
				t.Errorf("rlctl_plan_rules = %v, want %v", rules, want)
			}
			s.stop(t)
		})
	}
}

// writeAtomic replaces path with data in one rename, as an editor or a deploy does.
func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
