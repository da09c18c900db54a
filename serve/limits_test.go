package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/rlctl/rlctl/calendar"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// limitsPolicy has one rule per value of a descriptor's "k" entry (or attribute), on the
// client clock so that its window never rolls over mid-test.
const limitsPolicy = `
policy "limits" {
  clock = "client"
  rule "per_k" {
    algorithm = "fixed_window"
    when      = request.k != ""
    key       = request.k
    limit     = 1
    window    = "1h"
  }
}`

// limitsServer is a Server on b serving policy over gRPC, on a real server made with
// GRPCServerOptions on loopback, and over HTTP (httptest).
type limitsServer struct {
	srv  *Server
	conn *grpc.ClientConn
	rls  rlsv3.RateLimitServiceClient
	url  string
}

func startLimits(t testing.TB, b engine.Backend, policy string) *limitsServer {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "limits.hcl"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	clock := luahost.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	// Every caller has the admin right here: the limits hold for /v1/reset too.
	admin := func(*http.Request) bool { return true }
	srv, err := New(Config{Paths: []string{dir}, Backend: b, Engine: []engine.Option{engine.WithClock(clock.Now), engine.WithTimeout(time.Minute)}, Clock: clock.Now, Admin: admin})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(GRPCServerOptions()...)
	srv.RegisterGRPC(g)
	go g.Serve(l)
	t.Cleanup(g.Stop)
	// The client sends up to 4× the server's bound, so that the server's is the one met.
	conn, err := grpc.NewClient("passthrough:///"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(4*MaxGRPCMessageBytes)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h := httptest.NewServer(srv.Handler())
	t.Cleanup(h.Close)
	return &limitsServer{srv: srv, conn: conn, rls: rlsv3.NewRateLimitServiceClient(conn), url: h.URL}
}

func embedded() engine.Backend { return engine.NewLocal(luahost.New()) }

// rawCodec sends a request's bytes as given ([]byte), so that a test can send what
// grpc-go's own codec refuses to marshal (a string that is not UTF-8).
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}
func (rawCodec) Name() string { return "proto" }

// shouldRateLimitRaw sends req with every "\x00" in its strings' bytes replaced by bad
// (one byte, so lengths hold).
func (ls *limitsServer) shouldRateLimitRaw(t *testing.T, req *rlsv3.RateLimitRequest, bad byte) (*rlsv3.RateLimitResponse, error) {
	t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte{0}, []byte{bad})
	resp := &rlsv3.RateLimitResponse{}
	err = ls.conn.Invoke(context.Background(), rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, b, resp, grpc.ForceCodecV2(rawCodec{}))
	return resp, err
}

// entries is a descriptor of n entries: "k" = v, then k1 .. k<n-1> = "x".
func entries(n int, v string) *ratelimitv3.RateLimitDescriptor {
	kv := []string{"k", v}
	for i := 1; i < n; i++ {
		kv = append(kv, fmt.Sprint("k", i), "x")
	}
	return desc(kv...)
}

// descriptors is a request of n descriptors, each on a "k" of its own.
func descriptors(domain string, n int) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: domain}
	for i := range n {
		req.Descriptors = append(req.Descriptors, desc("k", fmt.Sprint(domain, "-", i)))
	}
	return req
}

// TestGRPCLimits: each limit of a ShouldRateLimit at its maximum is decided, and one past
// it is refused with InvalidArgument naming the limit (ResourceExhausted for the message
// size), charging nothing.
func TestGRPCLimits(t *testing.T) {
	ls := startLimits(t, embedded(), limitsPolicy)
	long := func(n int) string { return strings.Repeat("v", n) }
	// A request of exactly size bytes: MaxDescriptors long values, the last ones cut to
	// size, the domain padded to the byte.
	big := func(size int) *rlsv3.RateLimitRequest {
		req := &rlsv3.RateLimitRequest{Domain: "d"}
		for i := range MaxDescriptors {
			req.Descriptors = append(req.Descriptors, desc("k", fmt.Sprintf("%04d", i)+long(MaxValueBytes-4)))
		}
		for i := MaxDescriptors - 1; proto.Size(req) > size; i-- {
			e := req.Descriptors[i].Entries[0]
			e.Value = e.Value[:len(e.Value)-min(proto.Size(req)-size, len(e.Value)-4)]
		}
		for proto.Size(req) < size {
			req.Domain += "d"
		}
		if proto.Size(req) != size {
			t.Fatalf("a request of %d bytes, want %d", proto.Size(req), size)
		}
		return req
	}
	cases := []struct {
		name  string
		ok    *rlsv3.RateLimitRequest
		over  *rlsv3.RateLimitRequest
		code  codes.Code
		limit string
	}{
		{"descriptors", descriptors("a", MaxDescriptors), descriptors("b", MaxDescriptors+1), codes.InvalidArgument, "MaxDescriptors"},
		{"entries", &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{entries(MaxEntries, "e1")}},
			&rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{entries(MaxEntries+1, "e2")}}, codes.InvalidArgument, "MaxEntries"},
		{"key bytes", &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "kb1", long(MaxNameBytes), "x")}},
			&rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "kb2", long(MaxNameBytes+1), "x")}}, codes.InvalidArgument, "MaxNameBytes"},
		{"value bytes", &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "vb1"+long(MaxValueBytes-3))}},
			&rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "vb2"+long(MaxValueBytes-2))}}, codes.InvalidArgument, "MaxValueBytes"},
		{"domain bytes", &rlsv3.RateLimitRequest{Domain: long(MaxNameBytes), Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "db1")}},
			&rlsv3.RateLimitRequest{Domain: long(MaxNameBytes + 1), Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "db2")}}, codes.InvalidArgument, "MaxNameBytes"},
		{"message bytes", big(MaxGRPCMessageBytes), big(MaxGRPCMessageBytes + 1), codes.ResourceExhausted, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := ls.rls.ShouldRateLimit(context.Background(), c.ok)
			if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
				t.Fatalf("at the limit (%d bytes): %v, %v; want OK", proto.Size(c.ok), resp.GetOverallCode(), err)
			}
			// The call was decided: its first descriptor's rule was charged.
			if resp, err := ls.rls.ShouldRateLimit(context.Background(), c.ok); err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("at the limit, again: %v, %v; want OVER_LIMIT (limit 1)", resp.GetOverallCode(), err)
			}
			_, err = ls.rls.ShouldRateLimit(context.Background(), c.over)
			if status.Code(err) != c.code || !strings.Contains(status.Convert(err).Message(), c.limit) {
				t.Fatalf("past the limit (%d bytes): %v; want %v naming %q", proto.Size(c.over), err, c.code, c.limit)
			}
			// Nothing was charged: the refused request's first rule still allows.
			first := &rlsv3.RateLimitRequest{Domain: c.over.Domain, Descriptors: c.over.Descriptors[:1]}
			if len(first.Descriptors[0].Entries) > MaxEntries {
				first.Descriptors[0].Entries = first.Descriptors[0].Entries[:1]
			}
			if c.name != "descriptors" && c.name != "entries" {
				return // its first descriptor is itself past the limit
			}
			if resp, err := ls.rls.ShouldRateLimit(context.Background(), first); err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
				t.Fatalf("a refused request's first descriptor alone: %v, %v; want OK (never charged)", resp.GetOverallCode(), err)
			}
		})
	}
}

// TestGRPCInvalidUTF8: a domain, key or value that is not UTF-8 is InvalidArgument, not
// Internal (grpc-go's codec error), and never the counter of another value: "\ufffd" is
// a value of its own, "\xff" and "\xfe" are refused.
func TestGRPCInvalidUTF8(t *testing.T) {
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			b := embedded()
			if backend == "redis" {
				rdb := redistest.Shared(t).Client(t)
				if err := rdb.FlushDB(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
				b = engine.NewRedis(rdb)
			}
			ls := startLimits(t, b, limitsPolicy)
			ok := &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "\ufffd")}}
			for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
				if resp, err := ls.rls.ShouldRateLimit(context.Background(), ok); err != nil || resp.GetOverallCode() != want {
					t.Fatalf("\\ufffd, call %d: %v, %v; want %v", i+1, resp.GetOverallCode(), err, want)
				}
			}
			for _, req := range []*rlsv3.RateLimitRequest{
				{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "\x00")}},
				{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "a", "\x00", "b")}},
				{Domain: "d\x00", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "a")}},
			} {
				for _, bad := range []byte{0xff, 0xfe} {
					_, err := ls.shouldRateLimitRaw(t, req, bad)
					if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "UTF-8") {
						t.Errorf("%q with %#x: %v; want InvalidArgument saying UTF-8", req, bad, err)
					}
				}
			}
			// The bytes sent raw, when valid, are decided as usual.
			if resp, err := ls.shouldRateLimitRaw(t, &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "\x00")}}, 'z'); err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
				t.Fatalf("a valid request sent raw: %v, %v", resp.GetOverallCode(), err)
			}
		})
	}
}

// post sends body with Content-Type ct to the HTTP API's path; it returns the status
// and the decoded body.
func (ls *limitsServer) post(t *testing.T, path, ct string, body []byte) (int, map[string]any, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ls.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %d %s: %v", path, resp.StatusCode, b, err)
	}
	return resp.StatusCode, out, resp.Header
}

func attrsBody(attrs map[string]string) []byte {
	b, _ := json.Marshal(map[string]any{"attributes": attrs})
	return b
}

// TestHTTPLimits: each limit of a decision request at its maximum is decided, and one
// past it is refused (400 naming the limit, 413 for the body) as a problem, charging
// nothing.
func TestHTTPLimits(t *testing.T) {
	ls := startLimits(t, embedded(), limitsPolicy)
	attrs := func(k string, n int) map[string]string {
		m := map[string]string{"k": k}
		for i := 1; i < n; i++ {
			m[fmt.Sprint("a", i)] = "x"
		}
		return m
	}
	batch := func(prefix string, n int) []byte {
		var rs []map[string]any
		for i := range n {
			rs = append(rs, map[string]any{"attributes": map[string]string{"k": fmt.Sprint(prefix, i)}})
		}
		b, _ := json.Marshal(map[string]any{"requests": rs})
		return b
	}
	long := func(n int) string { return strings.Repeat("v", n) }
	// A body of exactly n bytes: one attribute padded with spaces after the JSON.
	body := func(k string, n int) []byte {
		b := attrsBody(map[string]string{"k": k})
		return append(b, bytes.Repeat([]byte(" "), n-len(b))...)
	}
	cases := []struct {
		name     string
		ok, over []byte
		code     int
		limit    string
	}{
		{"attributes", attrsBody(attrs("at1", MaxAttributes)), attrsBody(attrs("at2", MaxAttributes+1)), 400, "MaxAttributes"},
		{"name bytes", attrsBody(map[string]string{"k": "nb1", long(MaxNameBytes): "x"}), attrsBody(map[string]string{"k": "nb2", long(MaxNameBytes + 1): "x"}), 400, "MaxNameBytes"},
		{"value bytes", attrsBody(map[string]string{"k": "vb1" + long(MaxValueBytes-3)}), attrsBody(map[string]string{"k": "vb2" + long(MaxValueBytes-2)}), 400, "MaxValueBytes"},
		{"batch", batch("b1-", MaxBatch), batch("b2-", MaxBatch+1), 400, "MaxBatch"},
		{"body bytes", body("bb1", MaxBodyBytes), body("bb2", MaxBodyBytes+1), 413, "MaxBodyBytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if code, out, _ := ls.post(t, "/v1/decide", "application/json", c.ok); code != 200 || out["allowed"] != true {
				t.Fatalf("at the limit: %d %v", code, out)
			}
			if code, out, _ := ls.post(t, "/v1/decide", "application/json", c.ok); code != 200 || out["allowed"] != false {
				t.Fatalf("at the limit, again: %d %v; want denied (limit 1): the first was charged", code, out)
			}
			code, out, h := ls.post(t, "/v1/decide", "application/json", c.over)
			if code != c.code || h.Get("Content-Type") != "application/problem+json" || !strings.Contains(fmt.Sprint(out["detail"]), c.limit) {
				t.Fatalf("past the limit: %d %s %v; want %d problem naming %s", code, h.Get("Content-Type"), out, c.code, c.limit)
			}
			var first []byte
			switch c.name {
			case "batch":
				first = attrsBody(map[string]string{"k": "b2-0"})
			case "name bytes":
				return // the over request's k is its own and uncharged, but needs the long name
			default:
				var req decideRequest
				if err := json.Unmarshal(c.over, &req); err != nil {
					t.Fatal(err)
				}
				first = attrsBody(map[string]string{"k": req.Attributes["k"]})
				if c.name == "value bytes" {
					return // k itself is past the limit
				}
			}
			if code, out, _ := ls.post(t, "/v1/decide", "application/json", first); code != 200 || out["allowed"] != true {
				t.Fatalf("a refused request's key alone: %d %v; want allowed (never charged)", code, out)
			}
		})
	}
}

// TestHTTPInjective: bytes that are not UTF-8, and escapes of lone surrogates, are 400:
// encoding/json would read each as U+FFFD, so "\xff", "\xfe", "\ud800" and "\ufffd" were
// one counter. A real U+FFFD and a surrogate pair are values of their own.
func TestHTTPInjective(t *testing.T) {
	ls := startLimits(t, embedded(), limitsPolicy)
	decide := func(k string) (int, map[string]any) {
		code, out, _ := ls.post(t, "/v1/decide", "application/json", []byte(`{"attributes": {"k": "`+k+`"}}`))
		return code, out
	}
	for _, k := range []string{"\ufffd", `\ud83d\ude00`, `\\ud800`} {
		if code, out := decide(k); code != 200 || out["allowed"] != true {
			t.Fatalf("%q: %d %v; want allowed, a counter of its own", k, code, out)
		}
	}
	for _, k := range []string{"\xff", "\xfe", "a\xc3", `\ud800`, `\udfff`, `\ud800x`, `\ud800\u0041`, `x\\\ud83d`} {
		code, out := decide(k)
		if code != 400 || !strings.Contains(fmt.Sprint(out["detail"]), "UTF-8") {
			t.Errorf("%q: %d %v; want 400 saying UTF-8", k, code, out)
		}
	}
	// Attribute names too.
	if code, _, _ := ls.post(t, "/v1/decide", "application/json", []byte("{\"attributes\": {\"k\": \"n\", \"\xff\": \"x\"}}")); code != 400 {
		t.Errorf("a name that is not UTF-8: %d, want 400", code)
	}
	if code, out := decide(`\ufffd`); code != 200 || out["allowed"] != false {
		t.Fatalf("\\ufffd (escaped) after \"\ufffd\": %d %v; want denied: the one U+FFFD counter, charged once", code, out)
	}
}

// TestHTTPContentType: a POST to /v1/* must be application/json (a charset of UTF-8
// allowed); text/plain, form posts (which a browser page may send to any site), other
// charsets and none are 415 problems.
func TestHTTPContentType(t *testing.T) {
	ls := startLimits(t, embedded(), limitsPolicy)
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON; charset=UTF-8"} {
		if code, out, _ := ls.post(t, "/v1/peek", ct, attrsBody(map[string]string{"k": "c"})); code != 200 {
			t.Errorf("%q: %d %v, want 200", ct, code, out)
		}
	}
	for _, path := range []string{"/v1/decide", "/v1/peek", "/v1/release", "/v1/reset"} {
		for _, ct := range []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/json; charset=latin1", "application/jsonx", "application/json;;"} {
			code, out, h := ls.post(t, path, ct, attrsBody(map[string]string{"k": "c"}))
			if code != http.StatusUnsupportedMediaType || h.Get("Content-Type") != "application/problem+json" || out["status"] != float64(415) {
				t.Errorf("%s with %q: %d %s %v; want a 415 problem", path, ct, code, h.Get("Content-Type"), out)
			}
		}
	}
	if code, out, _ := ls.post(t, "/v1/decide", "text/plain", attrsBody(map[string]string{"k": "t"})); code != 415 {
		t.Fatalf("%d %v", code, out)
	}
	if code, out, _ := ls.post(t, "/v1/decide", "application/json", attrsBody(map[string]string{"k": "t"})); code != 200 || out["allowed"] != true {
		t.Fatalf("after a refused text/plain post: %d %v; want allowed (it charged nothing)", code, out)
	}
}

// budgetPolicy applies two rules to every descriptor with a "k", a gcra and a
// token_bucket rule when its "kind" is "a", a sliding_window and a sliding_log rule
// (a sorted set per key) when it is "b", so that MaxDescriptors descriptors apply
// engine.MaxRules rules: the largest call there is. The limits are high enough that every
// call is allowed, so every rule is checked and charged.
const budgetPolicy = `
policy "budget" {
  rule "gcra" {
    algorithm = "gcra"
    when      = request.kind == "a" && request.k != ""
    key       = request.k
    rate      = "1000/s"
    burst     = 1000
  }
  rule "tokens" {
    algorithm = "token_bucket"
    when      = request.kind == "a" && request.k != ""
    key       = request.k
    capacity  = 1000
    rate      = "100/s"
  }
  rule "sliding" {
    algorithm = "sliding_window"
    when      = request.kind == "b" && request.k != ""
    key       = request.k
    limit     = 1000
    window    = "1m"
  }
  rule "log" {
    algorithm = "sliding_log"
    when      = request.kind == "b" && request.k != ""
    key       = request.k
    limit     = 1000
    window    = "1m"
  }
}`

// largestCall is call i of the largest ShouldRateLimit: MaxDescriptors descriptors whose
// values fill the message to near MaxGRPCMessageBytes, on keys of their own for each i.
func largestCall(i int) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: "budget"}
	pad := strings.Repeat("v", MaxGRPCMessageBytes/MaxDescriptors-64)
	for d := range MaxDescriptors {
		req.Descriptors = append(req.Descriptors, desc("k", fmt.Sprintf("%d-%d-%s", i, d, pad), "kind", string(rune('a'+d%2))))
	}
	return req
}

// scriptTime is the engine script's run time on rdb's server as INFO commandstats
// counts it (FCALL, EVALSHA, EVAL): calls and µs in all.
func scriptTime(t testing.TB, ctx context.Context, info string) (calls, usec int64) {
	t.Helper()
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		name, stats, ok := strings.Cut(line, ":")
		if !ok || (name != "cmdstat_fcall" && name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		var c, u int64
		if _, err := fmt.Sscanf(stats, "calls=%d,usec=%d,", &c, &u); err != nil {
			t.Fatalf("commandstats %q: %v", line, err)
		}
		calls, usec = calls+c, usec+u
	}
	return calls, usec
}

// measureLargestCall makes n largest calls on a private redis-server and returns the
// script's mean run time per call on the server (INFO commandstats, with the slow log
// off), its server's main thread CPU time per call (INFO cpu), and the longest of n more
// (SLOWLOG at slowlog-log-slower-than 1000, so that the commands the script runs, which
// Redis 7 logs as well, mostly are not: 0 when none took 1ms), in µs. Go's work and the test's gRPC calls run in between and are not counted.
func measureLargestCall(t testing.TB, n int) (mean, cpu float64, longest int64) {
	t.Helper()
	ctx := context.Background()
	rs := redistest.Start(t)
	rdb := rs.Client(t)
	ls := startLimits(t, engine.NewRedis(rdb), budgetPolicy)
	call := func(i int) {
		resp, err := ls.rls.ShouldRateLimit(ctx, largestCall(i))
		if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || len(resp.GetStatuses()) != MaxDescriptors {
			t.Fatalf("largest call %d: %v, %v", i, resp.GetOverallCode(), err)
		}
	}
	do := func(args ...any) {
		if err := rdb.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	call(-1) // loads the library, outside the figures
	do("CONFIG", "SET", "slowlog-log-slower-than", "-1")
	do("CONFIG", "RESETSTAT")
	cpu0 := mainThreadCPU(t, rdb)
	for i := range n {
		call(i)
	}
	cpu = (mainThreadCPU(t, rdb) - cpu0) * 1e6 / float64(n)
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls, usec := scriptTime(t, ctx, info)
	if calls != int64(n) {
		t.Fatalf("the server ran the script %d times for %d calls of one hash slot: %s", calls, n, info)
	}
	do("CONFIG", "SET", "slowlog-log-slower-than", "1000")
	do("CONFIG", "SET", "slowlog-max-len", "1024")
	do("SLOWLOG", "RESET")
	for i := range n {
		call(n + i)
	}
	logs, err := rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range logs {
		if len(l.Args) == 0 || !strings.EqualFold(l.Args[0], "fcall") && !strings.EqualFold(l.Args[0], "evalsha") {
			continue // a command the script ran, which a loaded machine held up
		}
		// FCALL function numkeys key ... (SLOWLOG keeps the first 32 arguments).
		if len(l.Args) < 3 || l.Args[2] != fmt.Sprint(engine.MaxRules) {
			t.Fatalf("a script call of %v keys, want %d", l.Args[:min(3, len(l.Args))], engine.MaxRules)
		}
		longest = max(longest, l.Duration.Microseconds())
	}
	return float64(usec) / float64(calls), cpu, longest
}

// mainThreadCPU is the CPU time, user and system, in seconds, of the main thread of
// rdb's server (INFO cpu), where commands and scripts run.
func mainThreadCPU(t testing.TB, rdb *redis.Client) float64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		name, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_user_main_thread" || name == "used_cpu_sys_main_thread" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("INFO cpu %q: %v", line, err)
			}
			sum += f
		}
	}
	return sum
}

// TestLargestCallBudget measures the largest call (MaxDescriptors descriptors of two
// rules each, engine.MaxRules rules, every one charged) on a real redis-server: one
// script run per call, of every rule, whose time on the server is logged (the budget is
// 5ms; the figures are in BENCHMARKS.md, from BenchmarkLargestCall):
//
//	go test -count=1 -run TestLargestCallBudget -v ./serve
func TestLargestCallBudget(t *testing.T) {
	mean, cpu, longest := measureLargestCall(t, 20)
	t.Logf("largest call (%d rules) on redis-server: script %.0f µs a call (commandstats), longest of as many more %d µs (SLOWLOG; 0: none took 1ms); main thread CPU %.0f µs a call (script, the call's parsing and its reply)", engine.MaxRules, mean, longest, cpu)
}

// BenchmarkLargestCall reports the largest call's script time on a real redis-server:
// redis-us/call (INFO commandstats), redis-cpu-us/call (the server's main thread, INFO
// cpu: the script and the call's parsing and reply) and redis-max-us (SLOWLOG's longest).
// commandstats and SLOWLOG time the script by the wall clock, so a loaded machine
// inflates them where the CPU time holds.
//
//	go test -run XXX -bench BenchmarkLargestCall -benchtime 50x -count 3 ./serve
func BenchmarkLargestCall(b *testing.B) {
	mean, cpu, longest := measureLargestCall(b, b.N)
	b.ReportMetric(mean, "redis-us/call")
	b.ReportMetric(cpu, "redis-cpu-us/call")
	b.ReportMetric(float64(longest), "redis-max-us")
}

// TestOpenAPILimits: the OpenAPI document states the limits the handler enforces.
func TestOpenAPILimits(t *testing.T) {
	var doc struct {
		Info struct {
			Description string `json:"description"`
		} `json:"info"`
		Paths      map[string]map[string]struct{ Responses map[string]any } `json:"paths"`
		Components struct {
			Schemas struct {
				Attributes struct {
					MaxProperties        int                     `json:"maxProperties"`
					PropertyNames        struct{ MaxLength int } `json:"propertyNames"`
					AdditionalProperties struct{ MaxLength int } `json:"additionalProperties"`
				}
				DecideRequest struct {
					Properties struct {
						Requests struct{ MaxItems int } `json:"requests"`
					} `json:"properties"`
				}
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openapi, &doc); err != nil {
		t.Fatal(err)
	}
	a := doc.Components.Schemas.Attributes
	if a.MaxProperties != MaxAttributes || a.PropertyNames.MaxLength != MaxNameBytes || a.AdditionalProperties.MaxLength != MaxValueBytes || doc.Components.Schemas.DecideRequest.Properties.Requests.MaxItems != MaxBatch {
		t.Errorf("openapi.json's limits: attributes %+v, requests %d", a, doc.Components.Schemas.DecideRequest.Properties.Requests.MaxItems)
	}
	for _, n := range []int{MaxBodyBytes, MaxBatch, MaxAttributes, MaxNameBytes, MaxValueBytes, engine.MaxRules} {
		if !strings.Contains(doc.Info.Description, fmt.Sprint(n)) {
			t.Errorf("openapi.json's description does not state %d", n)
		}
	}
	// Every POST of the API takes a JSON body, and so every one can be refused for it.
	posts := 0
	for path, ops := range doc.Paths {
		post, ok := ops["post"]
		if !ok || !strings.HasPrefix(path, "/v1/") {
			continue
		}
		posts++
		for _, code := range []string{"400", "413", "415"} {
			if _, ok := post.Responses[code]; !ok {
				t.Errorf("openapi.json: POST %s has no %s response", path, code)
			}
		}
	}
	if posts < 11 {
		t.Errorf("openapi.json describes %d POSTs under /v1/, want every one: decide, peek, release, reset, overrides/{set,clear,get}, lists/{add,remove,get}, inspect", posts)
	}
}

// TestMaxRulesOnBothInterfaces: a request whose descriptors (or batch) apply more than
// engine.MaxRules rules is refused, InvalidArgument and 400 naming the limit, and charges
// nothing; one that applies MaxRules or fewer is decided.
func TestMaxRulesOnBothInterfaces(t *testing.T) {
	var five strings.Builder
	five.WriteString("policy \"five\" {\n  clock = \"client\"\n")
	for i := range 5 {
		fmt.Fprintf(&five, "  rule \"r%d\" {\n    algorithm = \"fixed_window\"\n    when = request.k != \"\"\n    key = request.k\n    limit = 1\n    window = \"1h\"\n  }\n", i)
	}
	five.WriteString("}\n")
	ls := startLimits(t, embedded(), five.String())
	fits, over := engine.MaxRules/5, engine.MaxRules/5+1
	if resp, err := ls.rls.ShouldRateLimit(context.Background(), descriptors("g1", fits)); err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("%d descriptors of 5 rules: %v, %v", fits, resp.GetOverallCode(), err)
	}
	_, err := ls.rls.ShouldRateLimit(context.Background(), descriptors("g2", over))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "MaxRules") {
		t.Fatalf("%d descriptors of 5 rules: %v; want InvalidArgument naming MaxRules", over, err)
	}
	if resp, err := ls.rls.ShouldRateLimit(context.Background(), descriptors("g2", 1)); err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("the refused request's first descriptor: %v, %v; want OK (never charged)", resp.GetOverallCode(), err)
	}
	batch := func(prefix string, n int) []byte {
		var rs []map[string]any
		for i := range n {
			rs = append(rs, map[string]any{"attributes": map[string]string{"k": fmt.Sprint(prefix, i)}})
		}
		b, _ := json.Marshal(map[string]any{"requests": rs})
		return b
	}
	if code, out, _ := ls.post(t, "/v1/decide", "application/json", batch("h1-", fits)); code != 200 || out["allowed"] != true {
		t.Fatalf("a batch of %d requests of 5 rules: %d %v", fits, code, out)
	}
	if code, out, _ := ls.post(t, "/v1/decide", "application/json", batch("h2-", over)); code != 400 || !strings.Contains(fmt.Sprint(out["detail"]), "MaxRules") {
		t.Fatalf("a batch of %d requests of 5 rules: %d %v; want 400 naming MaxRules", over, code, out)
	}
	if code, out, _ := ls.post(t, "/v1/decide", "application/json", attrsBody(map[string]string{"k": "h2-0"})); code != 200 || out["allowed"] != true {
		t.Fatalf("the refused batch's first request: %d %v; want allowed (never charged)", code, out)
	}
}

// TestOpenAPIForGenerators: the document carries what code generators need: a unique
// operationId on every operation, a server, and the bearer scheme, which the admin
// operations require.
func TestOpenAPIForGenerators(t *testing.T) {
	var doc struct {
		Servers    []struct{ URL string } `json:"servers"`
		Components struct {
			SecuritySchemes map[string]struct{ Type, Scheme string } `json:"securitySchemes"`
		} `json:"components"`
		Paths map[string]map[string]struct {
			OperationID string                `json:"operationId"`
			Security    []map[string][]string `json:"security"`
			Description string                `json:"description"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openapi, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Servers) == 0 || doc.Servers[0].URL == "" {
		t.Error("openapi.json names no server")
	}
	if s := doc.Components.SecuritySchemes["bearerAuth"]; s.Type != "http" || s.Scheme != "bearer" {
		t.Errorf("openapi.json's bearerAuth scheme: %+v", s)
	}
	seen := map[string]string{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", method, path)
			} else if other, dup := seen[op.OperationID]; dup {
				t.Errorf("%s %s repeats the operationId %q of %s", method, path, op.OperationID, other)
			}
			seen[op.OperationID] = path
			admin := strings.Contains(op.Description, "Needs the admin right")
			required := len(op.Security) == 1 && op.Security[0]["bearerAuth"] != nil
			if admin != required {
				t.Errorf("%s %s: needs the admin right %v, but requires a bearer token %v", method, path, admin, required)
			}
		}
	}
}

// TestEnvoyUnitOfACalendar: a calendar rule answers Envoy in its calendar unit whatever
// its period's length (a month of 31 days less an hour is a MONTH), and another rule in
// the unit its window is exactly, or UNKNOWN.
func TestEnvoyUnitOfACalendar(t *testing.T) {
	for _, c := range []struct {
		rr   engine.RuleResult
		want rlsv3.RateLimitResponse_RateLimit_Unit
	}{
		{engine.RuleResult{Calendar: calendar.Month, Window: 31*24*time.Hour - time.Hour}, rlsv3.RateLimitResponse_RateLimit_MONTH},
		{engine.RuleResult{Calendar: calendar.Day, Window: 23 * time.Hour}, rlsv3.RateLimitResponse_RateLimit_DAY},
		{engine.RuleResult{Calendar: calendar.Week, Window: 7 * 24 * time.Hour}, rlsv3.RateLimitResponse_RateLimit_WEEK},
		{engine.RuleResult{Calendar: calendar.Year, Window: 366 * 24 * time.Hour}, rlsv3.RateLimitResponse_RateLimit_YEAR},
		{engine.RuleResult{Window: time.Minute}, rlsv3.RateLimitResponse_RateLimit_MINUTE},
		{engine.RuleResult{Window: 10 * time.Second}, rlsv3.RateLimitResponse_RateLimit_UNKNOWN},
	} {
		if got := unitOf(&c.rr); got != c.want {
			t.Errorf("%v %v: %v, want %v", c.rr.Calendar, c.rr.Window, got, c.want)
		}
	}
}
