package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rlctl/rlctl/internal/listen"
	"github.com/rlctl/rlctl/internal/syncbuf"
	"github.com/rlctl/rlctl/internal/testcert"
)

// served is an rlctl serve running in process, on loopback ports.
type served struct {
	grpc, http, admin string
	logs              *syncbuf.Buffer
	exit              chan int
}

// startServe runs rlctl serve with args and edge.hcl on the embedded backend, on
// loopback ports of its own (-watch=false unless args say otherwise), until it serves.
// stop, or the test's end, stops it.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	return startServeOn(t, filepath.Join(root, "serve", "testdata", "envoy", "edge.hcl"), args...)
}

// startServeOn is startServe with the policy file policy.
func startServeOn(t *testing.T, policy string, args ...string) *served {
	t.Helper()
	args = append([]string{"serve", "-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-watch=false"}, args...)
	args = append(args, policy)
	s := &served{logs: &syncbuf.Buffer{}, exit: make(chan int, 1)}
	ready := make(chan struct{})
	serveAdminReady = func(a string) { s.admin = a }
	serveReady = func(g, h string) { s.grpc, s.http = g, h; close(ready) }
	serveStop = make(chan struct{})
	go func() { s.exit <- run(args, &env{stdout: s.logs, stderr: s.logs}) }()
	select {
	case <-ready:
	case code := <-s.exit:
		t.Fatalf("rlctl %s exited %d before serving:\n%s", strings.Join(args, " "), code, s.logs)
	}
	stop := serveStop
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
			<-s.exit
		}
		serveReady, serveAdminReady, serveStop, serveGRPCOptions, serveDraining, serveSecretsReloaded, serveReloaded = nil, nil, nil, nil, nil, nil, nil
		serveLimits = listen.Defaults
	})
	return s
}

// stop stops the service as SIGTERM does; it must exit 0.
func (s *served) stop(t *testing.T) {
	t.Helper()
	close(serveStop)
	if code := <-s.exit; code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, s.logs)
	}
}

// edgeRequest is one ShouldRateLimit of edge.hcl's remote_address rule.
func edgeRequest(ip string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: ip}}},
	}}
}

// dialGRPC is a gRPC client of addr, with creds (insecure when nil).
func dialGRPC(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func decide(c *http.Client, url, token string) (int, error) {
	req, err := http.NewRequest("POST", url+"/v1/decide", strings.NewReader(`{"attributes": {"domain": "edge", "descriptor": "remote_address", "remote_address": "192.0.2.1"}}`))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestServeAdminListener: /metrics and /healthz are served on the admin listener and
// not on the HTTP API's, which still decides.
func TestServeAdminListener(t *testing.T) {
	s := startServe(t)
	for _, c := range []struct {
		url  string
		code int
	}{
		{"http://" + s.http + "/metrics", 404},
		{"http://" + s.http + "/healthz", 404},
		{"http://" + s.admin + "/metrics", 200},
		{"http://" + s.admin + "/healthz", 200},
		{"http://" + s.admin + "/v1/decide", 404},
		{"http://" + s.http + "/openapi.json", 200},
	} {
		if got := get(t, c.url); got != c.code {
			t.Errorf("GET %s: %d, want %d", c.url, got, c.code)
		}
	}
	if code, err := decide(http.DefaultClient, "http://"+s.http, ""); err != nil || code != 200 {
		t.Errorf("POST /v1/decide on the API: %d %v", code, err)
	}
	s.stop(t)
}

// TestServeHealthWatchDoesNotHoldDrain: a grpc.health.v1 Watch stream open at SIGTERM
// is told NOT_SERVING and ends, so the service exits once the call in flight has
// finished, long before its -drain of an hour; that call is answered. The admin
// /healthz says 503 meanwhile.
func TestServeHealthWatchDoesNotHoldDrain(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	serveGRPCOptions = []grpc.ServerOption{grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if strings.HasSuffix(info.FullMethod, "/ShouldRateLimit") {
			close(started)
			<-release
		}
		return h(ctx, req)
	})}
	draining := make(chan struct{})
	serveDraining = func() { close(draining) }
	s := startServe(t, "-drain", "1h")
	conn := dialGRPC(t, s.grpc, nil)
	ctx := context.Background()
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: %v %v", r, err)
	}
	inflight := make(chan error, 1)
	go func() {
		r, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, edgeRequest("198.51.100.1"))
		if err == nil && r.OverallCode != rlsv3.RateLimitResponse_OK {
			err = status.Errorf(codes.Internal, "the drained call: %v", r)
		}
		inflight <- err
	}()
	<-started
	close(serveStop)
	<-draining
	if code := get(t, "http://"+s.admin+"/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("the admin /healthz while draining: %d, want 503", code)
	}
	watchEnded := make(chan error, 1)
	go func() {
		for {
			if _, err := w.Recv(); err != nil {
				watchEnded <- err
				return
			}
		}
	}()
	// No timer: a Watch held open would be held for the drain's hour, and the test's own
	// -timeout ends it with every goroutine's stack.
	if err := <-watchEnded; status.Code(err) != codes.Unavailable {
		t.Errorf("the Watch stream ended with %v, want Unavailable", err)
	}
	close(release)
	if err := <-inflight; err != nil {
		t.Fatalf("the call in flight at the stop: %v", err)
	}
	if code := <-s.exit; code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, s.logs)
	}
}

// writePair copies the pair p to cert and key, each by a rename (as a rotation does).
func writePair(t *testing.T, p testcert.Pair, cert, key string) {
	t.Helper()
	for from, to := range map[string]string{p.CertFile: cert, p.KeyFile: key} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		tmp := to + ".new"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, to); err != nil {
			t.Fatal(err)
		}
	}
}

// servedName is the common name of the certificate addr serves.
func servedName(t *testing.T, addr string, conf *tls.Config) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestServeTLS: with -tls-cert and -tls-key both the gRPC and the HTTP API listeners
// speak TLS only, and a new pair written over the files is served once seen.
func TestServeTLS(t *testing.T) {
	certs, secrets := t.TempDir(), t.TempDir()
	ca := testcert.New(t, "ca")
	one, two := ca.Server(t, certs, "one"), ca.Server(t, certs, "two")
	cert, key := filepath.Join(secrets, "tls.crt"), filepath.Join(secrets, "tls.key")
	writePair(t, one, cert, key)
	reloads := make(chan struct{}, 16)
	serveSecretsReloaded = func() { reloads <- struct{}{} }
	s := startServe(t, "-tls-cert", cert, "-tls-key", key, "-watch=true")
	conf := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}

	rls := rlsv3.NewRateLimitServiceClient(dialGRPC(t, s.grpc, credentials.NewTLS(conf)))
	ctx := context.Background()
	if r, err := rls.ShouldRateLimit(ctx, edgeRequest("198.51.100.2")); err != nil || r.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("ShouldRateLimit over TLS: %v %v", r, err)
	}
	plain := rlsv3.NewRateLimitServiceClient(dialGRPC(t, s.grpc, nil))
	if _, err := plain.ShouldRateLimit(ctx, edgeRequest("198.51.100.2")); status.Code(err) != codes.Unavailable {
		t.Errorf("ShouldRateLimit in plain text on the TLS listener: %v, want Unavailable", err)
	}
	web := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
	if code, err := decide(web, "https://"+s.http, ""); err != nil || code != 200 {
		t.Errorf("POST /v1/decide over TLS: %d %v", code, err)
	}
	if code, err := decide(http.DefaultClient, "http://"+s.http, ""); err == nil && code == 200 {
		t.Error("POST /v1/decide in plain text on the TLS listener was decided")
	}
	for _, addr := range []string{s.grpc, s.http} {
		if got := servedName(t, addr, conf); got != "one" {
			t.Fatalf("%s serves %q, want one", addr, got)
		}
	}

	writePair(t, two, cert, key)
	for servedName(t, s.http, conf) != "two" {
		<-reloads // each change seen is a reload; the test's -timeout bounds the wait
	}
	if got := servedName(t, s.grpc, conf); got != "two" {
		t.Errorf("gRPC serves %q after the rotation, want two", got)
	}
	// A pair that does not load (a certificate that is not PEM) keeps the running one.
	if err := os.WriteFile(cert, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(s.logs.String(), "the TLS certificate does not reload") {
		<-reloads
	}
	if got := servedName(t, s.http, conf); got != "two" {
		t.Errorf("after a bad pair, HTTP serves %q, want two", got)
	}
	s.stop(t)
}

// TestServeClientCA: with -tls-client-ca, a client with no certificate is refused on
// both listeners; one with a certificate of the CA is served.
func TestServeClientCA(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.New(t, "ca")
	server, client := ca.Server(t, dir, "server"), ca.Client(t, dir, "envoy")
	s := startServe(t, "-tls-cert", server.CertFile, "-tls-key", server.KeyFile, "-tls-client-ca", ca.WriteFile(t, dir, "clients.pem"))
	kp, err := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	anon := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
	mine := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{kp}}
	ctx := context.Background()
	if _, err := rlsv3.NewRateLimitServiceClient(dialGRPC(t, s.grpc, credentials.NewTLS(anon))).ShouldRateLimit(ctx, edgeRequest("198.51.100.3")); status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC with no client certificate: %v, want Unavailable", err)
	}
	if r, err := rlsv3.NewRateLimitServiceClient(dialGRPC(t, s.grpc, credentials.NewTLS(mine))).ShouldRateLimit(ctx, edgeRequest("198.51.100.3")); err != nil || r.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Errorf("gRPC with the CA's client certificate: %v %v", r, err)
	}
	if code, err := decide(&http.Client{Transport: &http.Transport{TLSClientConfig: anon}}, "https://"+s.http, ""); err == nil {
		t.Errorf("HTTP with no client certificate: %d", code)
	}
	if code, err := decide(&http.Client{Transport: &http.Transport{TLSClientConfig: mine}}, "https://"+s.http, ""); err != nil || code != 200 {
		t.Errorf("HTTP with the CA's client certificate: %d %v", code, err)
	}
	s.stop(t)
}

// TestServeTokens: with -auth-tokens a call with no token or a wrong one is
// Unauthenticated (gRPC) or 401 (HTTP), a right one passes, gRPC health needs none, and
// a token file rewritten while serving is read again.
func TestServeTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("# edge\nold-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reloads := make(chan struct{}, 16)
	serveSecretsReloaded = func() { reloads <- struct{}{} }
	s := startServe(t, "-auth-tokens", path, "-watch=true")
	conn := dialGRPC(t, s.grpc, nil)
	rls := rlsv3.NewRateLimitServiceClient(conn)
	rlqs := rlqsv3.NewRateLimitQuotaServiceClient(conn)
	grpcCode := func(token string) codes.Code {
		ctx := context.Background()
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		_, err := rls.ShouldRateLimit(ctx, edgeRequest("198.51.100.4"))
		// The rate limit quota service's stream is held to the same tokens.
		stream, serr := rlqs.StreamRateLimitQuotas(ctx)
		if serr == nil {
			serr = stream.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
				{BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"remote_address": "198.51.100.4"}}},
			}})
		}
		if stream != nil && (serr == nil || serr == io.EOF) { // io.EOF: the status is Recv's
			_, serr = stream.Recv()
		}
		if status.Code(serr) != status.Code(err) {
			t.Errorf("token %q: ShouldRateLimit %v, StreamRateLimitQuotas %v", token, err, serr)
		}
		return status.Code(err)
	}
	httpCode := func(token string) int {
		code, err := decide(http.DefaultClient, "http://"+s.http, token)
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
	check := func(token string, ok bool) {
		t.Helper()
		wantGRPC, wantHTTP := codes.Unauthenticated, 401
		if ok {
			wantGRPC, wantHTTP = codes.OK, 200
		}
		if got := grpcCode(token); got != wantGRPC {
			t.Errorf("gRPC with token %q: %v, want %v", token, got, wantGRPC)
		}
		if got := httpCode(token); got != wantHTTP {
			t.Errorf("HTTP with token %q: %d, want %d", token, got, wantHTTP)
		}
	}
	check("", false)
	check("wrong", false)
	check("old-token", true)
	if r, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health with no token: %v %v", r, err)
	}

	if err := os.WriteFile(path, []byte("new-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for httpCode("new-token") != 200 {
		<-reloads // the test's -timeout bounds the wait
	}
	check("new-token", true)
	check("old-token", false)
	s.stop(t)
}

// TestServeMaxConns: past -max-conns a new connection is closed at once and counted,
// the client connected already keeps deciding, and once the flood ends a new client
// gets through.
func TestServeMaxConns(t *testing.T) {
	serveLimits.Handshake = time.Hour // the flood's connections send nothing: keep them
	s := startServe(t, "-max-conns", "3")
	ctx := context.Background()
	first := rlsv3.NewRateLimitServiceClient(dialGRPC(t, s.grpc, nil))
	if _, err := first.ShouldRateLimit(ctx, edgeRequest("198.51.100.5")); err != nil {
		t.Fatal(err)
	}
	var flood []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", s.grpc)
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, c)
		t.Cleanup(func() { c.Close() }) // before the stop, which waits for every connection
	}
	over, err := net.Dial("tcp", s.grpc)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	_ = over.SetReadDeadline(time.Now().Add(time.Minute)) // a bound for a listener with no cap
	if _, err := over.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a connection past -max-conns: %v, want EOF at once", err)
	}
	if r, err := first.ShouldRateLimit(ctx, edgeRequest("198.51.100.5")); err != nil || r.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("the client connected before the flood: %v %v", r, err)
	}
	if got := metric(t, "http://"+s.admin, `rlctl_connections_refused_total{listener="grpc"}`); got < 1 {
		t.Errorf(`rlctl_connections_refused_total{listener="grpc"} = %v, want at least 1`, got)
	}
	for _, c := range flood {
		c.Close()
	}
	// The flood's slots free as the server sees them close; the client retries until then.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	next := rlsv3.NewRateLimitServiceClient(dialGRPC(t, s.grpc, nil))
	if _, err := next.ShouldRateLimit(wctx, edgeRequest("198.51.100.6"), grpc.WaitForReady(true)); err != nil {
		t.Fatalf("a client after the flood: %v", err)
	}
	s.stop(t)
}

// TestServeSlowClients: the HTTP API cuts a trickled body and closes an idle kept-alive
// connection, and the gRPC listener closes a connection that never sends its preface:
// each seen as the server closing the connection, with the limits made short.
func TestServeSlowClients(t *testing.T) {
	serveLimits = listen.Limits{
		ReadHeader: 100 * time.Millisecond, Read: 200 * time.Millisecond, Write: time.Second, Idle: 100 * time.Millisecond,
		MaxHeaderBytes: 16 << 10, Handshake: 100 * time.Millisecond,
		Ping: time.Minute, PingTimeout: time.Minute, MinClientPing: time.Second, MaxStreams: 16,
	}
	s := startServe(t)
	dial := func(addr string) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(time.Minute)) // a bound for a server that holds it
		return c
	}
	// closed reads r, of c, to its end: the server closing c. c is closed either way, so
	// that a connection held by the server does not hold the stop too.
	closed := func(c net.Conn, r io.Reader, what string) {
		t.Helper()
		if _, err := io.ReadAll(r); err != nil {
			t.Errorf("%s: the server still holds the connection (%v)", what, err)
		}
		c.Close()
	}
	slow := dial(s.http)
	if _, err := io.WriteString(slow, "POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"attr"); err != nil {
		t.Fatal(err)
	}
	closed(slow, slow, "a trickled body")

	idle := dial(s.http)
	if _, err := io.WriteString(idle, "GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	closed(idle, br, "an idle kept-alive connection")

	raw := dial(s.grpc)
	closed(raw, raw, "a gRPC connection with no preface")
	s.stop(t)
}

// fakeListener is a listener at an address, for warnExposed.
type fakeListener struct {
	net.Listener
	addr net.Addr
}

func (f fakeListener) Addr() net.Addr { return f.addr }

// TestWarnExposed: a listener beyond loopback with no authentication, or with tokens in
// clear text, is warned of; one on loopback, or with client certificates or tokens over
// TLS, is not.
func TestWarnExposed(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.New(t, "ca")
	p := ca.Server(t, dir, "s")
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clientCA := ca.WriteFile(t, dir, "ca.pem")
	any4 := &net.TCPAddr{IP: net.IPv4zero, Port: 8081}
	lo := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8081}
	for _, c := range []struct {
		name             string
		addr             net.Addr
		cert, ca, tokens string
		want             string
	}{
		{"all interfaces, nothing", any4, "", "", "", "no authentication"},
		{"all interfaces, TLS only", any4, p.CertFile, "", "", "no authentication"},
		{"all interfaces, tokens in clear", any4, "", "", tokens, "clear text"},
		{"all interfaces, tokens over TLS", any4, p.CertFile, "", tokens, ""},
		{"all interfaces, client certificates", any4, p.CertFile, clientCA, "", ""},
		{"loopback, nothing", lo, "", "", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := ""
			if c.cert != "" {
				key = p.KeyFile
			}
			sec, err := loadSecurity(c.cert, key, c.ca, c.tokens)
			if err != nil {
				t.Fatal(err)
			}
			var logs syncbuf.Buffer
			sec.warnExposed(slog.New(slog.NewTextHandler(&logs, nil)), "gRPC", fakeListener{addr: c.addr})
			if got := logs.String(); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("logged %q, want a warning with %q", got, c.want)
			}
		})
	}
}

// TestServeAdminToken: POST /v1/reset needs a token of the admin right ("admin TOKEN" in
// -auth-tokens): a plain token is 403, none 401, the admin token resets; without
// -auth-tokens nobody may reset.
func TestServeAdminToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("edge\nadmin ops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reset := func(addr, token string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/reset", strings.NewReader(`{"attributes": {"domain": "edge", "descriptor": "remote_address", "remote_address": "198.51.100.4"}}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	s := startServe(t, "-auth-tokens", path)
	for token, want := range map[string]int{"": 401, "edge": 403, "ops": 200} {
		if got := reset(s.http, token); got != want {
			t.Errorf("reset with token %q: %d, want %d", token, got, want)
		}
	}
	if !strings.Contains(s.logs.String(), "rlctl serve: reset") {
		t.Errorf("the reset is not in the log:\n%s", s.logs)
	}
	s.stop(t)
	open := startServe(t)
	if got := reset(open.http, "ops"); got != 403 {
		t.Errorf("reset without -auth-tokens: %d, want 403", got)
	}
	open.stop(t)
}
