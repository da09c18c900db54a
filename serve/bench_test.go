package serve

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// benchKeys is how many client addresses the load spreads over; paths and tenants
// take benchPaths and benchTenants values.
const (
	benchKeys    = 10000
	benchPaths   = 100
	benchTenants = 100
	// benchLimit replaces every limit of edge.hcl, so that nothing is denied (a million an
	// hour is near the largest fixed_window computes exactly: limit × window in µs < 2^53).
	benchLimit = 1000000
	// benchBudget bounds one sub-benchmark's load in time, whatever b.N is.
	benchBudget = 2 * time.Minute
)

// BenchmarkServe measures ShouldRateLimit over real gRPC (loopback TCP, one shared
// ClientConn, and four conns shared round-robin by the callers) against the same engine
// called in process with the same descriptors as dsl.Requests: the difference is what
// the service adds (protobuf, HTTP/2, the descriptor translation, the response and its
// headers). c callers each make b.N/c calls; every call's latency is recorded, and the
// benchmark reports decisions/s, p50-µs and p99-µs. backend=redis runs on the shared
// redis-server, backend=embedded on luahost; the policy is edge.hcl with its limits
// raised to benchLimit, over benchKeys addresses, so nothing is denied. Client, server
// and (for redis) redis-server share the machine: compare the paths within one run.
//
//	go test -run '^$' -bench 'BenchmarkServe$' -benchtime 20000x -count 2 ./serve
func BenchmarkServe(b *testing.B) {
	for _, backend := range backendNames {
		b.Run("backend="+backend, func(b *testing.B) {
			bs := startBench(b, backend)
			for _, shape := range []int{1, 3} {
				for _, c := range []int{8, 32} {
					b.Run(fmt.Sprintf("descriptors=%d/c=%d", shape, c), func(b *testing.B) {
						b.Run("via=inproc", func(b *testing.B) { bs.load(b, c, bs.inproc(shape)) })
						b.Run("via=grpc-1conn", func(b *testing.B) { bs.load(b, c, bs.grpc(shape, bs.conns[:1])) })
						b.Run("via=grpc-4conn", func(b *testing.B) { bs.load(b, c, bs.grpc(shape, bs.conns)) })
					})
				}
			}
		})
	}
}

// benchServer is a Server on a backend, serving gRPC on loopback, with client conns.
type benchServer struct {
	srv      *Server
	conns    []rlsv3.RateLimitServiceClient
	degraded atomic.Int64 // decisions made by on_error: a broken measurement
}

// call makes the i'th call of a load (i picks the descriptors' values); it reports
// whether the decision allowed.
type call func(ctx context.Context, i int) (bool, error)

// BenchmarkServeStreamWorkers measures the gRPC server option that rlctl serve does not
// set, NumStreamWorkers: by default grpc-go starts a goroutine per call, whose stack grows
// (copystack) to run the engine; workers keep their grown stacks. Embedded backend, one
// descriptor, one ClientConn, as BenchmarkServe's via=grpc-1conn.
//
//	go test -run '^$' -bench BenchmarkServeStreamWorkers -benchtime 20000x ./serve
func BenchmarkServeStreamWorkers(b *testing.B) {
	for _, workers := range []uint32{0, 4, 32} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var opts []grpc.ServerOption
			if workers > 0 {
				opts = append(opts, grpc.NumStreamWorkers(workers))
			}
			bs := startBench(b, "embedded", opts...)
			for _, c := range []int{8, 32} {
				b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) { bs.load(b, c, bs.grpc(1, bs.conns[:1])) })
			}
		})
	}
}

// startBench serves the raised edge.hcl on backend over gRPC on loopback, with the
// server's opts, and connects four clients.
func startBench(b *testing.B, backend string, opts ...grpc.ServerOption) *benchServer {
	b.Helper()
	dir := b.TempDir()
	src, err := os.ReadFile("testdata/envoy/edge.hcl")
	if err != nil {
		b.Fatal(err)
	}
	limits := regexp.MustCompile(`(?m)^(\s*limit\s*=\s*)\d+$`)
	if n := len(limits.FindAll(src, -1)); n != 3 {
		b.Fatalf("edge.hcl has %d limits, want 3", n)
	}
	src = limits.ReplaceAll(src, []byte(fmt.Sprintf("${1}%d", benchLimit)))
	if err := os.WriteFile(filepath.Join(dir, "edge.hcl"), src, 0o644); err != nil {
		b.Fatal(err)
	}
	var be engine.Backend
	switch backend {
	case "redis":
		rdb := redistest.Shared(b).Client(b)
		rdb.Options().PoolSize = 64 // more than the callers: no wait for a connection
		if err := rdb.FlushDB(context.Background()).Err(); err != nil {
			b.Fatal(err)
		}
		be = engine.NewRedis(rdb)
	default:
		be = engine.NewLocal(luahost.New())
	}
	bs := &benchServer{}
	hooks := engine.Hooks{Degraded: func(string, string, error) { bs.degraded.Add(1) }}
	// A deadline far above any call's: a slow moment on the shared machine is measured,
	// not decided by on_error.
	bs.srv, err = New(Config{Paths: []string{dir}, Backend: be, Engine: []engine.Option{engine.WithTimeout(10 * time.Second), engine.WithHooks(hooks)}})
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer(append(GRPCServerOptions(), opts...)...)
	bs.srv.RegisterGRPC(g)
	go g.Serve(l)
	b.Cleanup(g.Stop)
	for range 4 {
		conn, err := grpc.NewClient("passthrough:///"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		bs.conns = append(bs.conns, rlsv3.NewRateLimitServiceClient(conn))
	}
	return bs
}

// benchValues are the i'th call's address, path and tenant.
func benchValues(i int) (addr, path, tenant string) {
	k := i % benchKeys
	return fmt.Sprintf("10.1.%d.%d", k/256, k%256), fmt.Sprintf("/v1/items/%d", i%benchPaths), fmt.Sprintf("t%d", i%benchTenants)
}

// inproc calls the server's engine with the descriptors as ShouldRateLimit makes them.
func (bs *benchServer) inproc(shape int) call {
	reqs := make([][]dsl.Request, benchKeys)
	for i := range reqs {
		addr, path, tenant := benchValues(i)
		reqs[i] = []dsl.Request{engine.Attrs{"domain": "edge", "descriptor": "remote_address", "remote_address": addr}}
		if shape == 3 {
			reqs[i] = append(reqs[i],
				engine.Attrs{"domain": "edge", "descriptor": "generic_key.path", "generic_key": "api", "path": path},
				engine.Attrs{"domain": "edge", "descriptor": "tenant", "tenant": tenant})
		}
	}
	e := bs.srv.Engine()
	return func(ctx context.Context, i int) (bool, error) {
		d, err := e.AllowAll(ctx, reqs[i%benchKeys], nil)
		if err != nil {
			return false, err
		}
		return d.Allowed, nil
	}
}

// grpc sends ShouldRateLimit; caller g's calls go on conn g % len(conns) (the caller is
// i % c, and c is a multiple of len(conns)).
func (bs *benchServer) grpc(shape int, conns []rlsv3.RateLimitServiceClient) call {
	reqs := make([]*rlsv3.RateLimitRequest, benchKeys)
	for i := range reqs {
		addr, path, tenant := benchValues(i)
		reqs[i] = &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", addr)}}
		if shape == 3 {
			reqs[i].Descriptors = append(reqs[i].Descriptors, desc("generic_key", "api", "path", path), desc("tenant", tenant))
		}
	}
	return func(ctx context.Context, i int) (bool, error) {
		resp, err := conns[i%len(conns)].ShouldRateLimit(ctx, reqs[i%benchKeys])
		if err != nil {
			return false, err
		}
		return resp.OverallCode == rlsv3.RateLimitResponse_OK, nil
	}
}

// load runs b.N calls from c goroutines, each making b.N/c of them (the first b.N%c one
// more), and reports decisions/s and the latency percentiles. Caller g's k'th call is
// call number g + k*c, so the callers' keys differ at any moment.
func (bs *benchServer) load(b *testing.B, c int, f call) {
	ctx, cancel := context.WithTimeout(context.Background(), benchBudget)
	defer cancel()
	for i := range 2 * c { // connections and the script loaded before the clock starts
		if _, err := f(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
	degraded := bs.degraded.Load()
	lat := make([]time.Duration, b.N)
	var denied atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	start := make(chan struct{})
	off := 0
	for g := range c {
		n := b.N / c
		if g < b.N%c {
			n++
		}
		mine := lat[off : off+n]
		off += n
		wg.Go(func() {
			<-start
			for k := range mine {
				t0 := time.Now()
				ok, err := f(ctx, g+k*c)
				mine[k] = time.Since(t0)
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				if !ok {
					denied.Add(1)
				}
			}
		})
	}
	b.ReportAllocs()
	b.ResetTimer()
	close(start)
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	if d := bs.degraded.Load() - degraded; d > 0 {
		b.Fatalf("%d decisions were made by on_error: the measurement is of failures", d)
	}
	if d := denied.Load(); d > 0 {
		b.Fatalf("%d of %d calls were denied: the limits are not large enough", d, b.N)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(micros(percentile(lat, 50)), "p50-µs")
	b.ReportMetric(micros(percentile(lat, 99)), "p99-µs")
}

// percentile is the p'th percentile of sorted: the smallest value at least p% of the
// values are not above.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
