package serve_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
	"github.com/rlctl/rlctl/serve"
)

// An Envoy's rate limit quota filter reports a bucket: in the last 5 seconds it saw 12
// requests. The assignment is a token bucket for the next 10 seconds (twice the report's
// interval) of what the demand asks for then, 24 requests, reserved from the bucket's
// 100 a minute.
func Example_rlqs() {
	dir, _ := os.MkdirTemp("", "rlqs")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "quota.hcl"), []byte(`
policy "quota" {
  match = request.domain == "edge"
  rule "per_tenant" {
    algorithm = "fixed_window"
    key       = request.tenant
    limit     = 100
    window    = "1m"
  }
}
`), 0o644)
	srv, err := serve.New(serve.Config{Paths: []string{dir}, Backend: engine.NewLocal(luahost.New())})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	g := grpc.NewServer(serve.GRPCServerOptions()...)
	srv.RegisterGRPC(g)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	go g.Serve(l)
	defer g.Stop()

	conn, _ := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	stream, _ := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(context.Background())
	_ = stream.Send(&rlqsv3.RateLimitQuotaUsageReports{
		Domain: "edge",
		BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId:           &rlqsv3.BucketId{Bucket: map[string]string{"tenant": "acme"}},
			TimeElapsed:        durationpb.New(5e9),
			NumRequestsAllowed: 0,
			NumRequestsDenied:  12,
		}},
	})
	resp, err := stream.Recv()
	if err != nil {
		fmt.Println(err)
		return
	}
	a := resp.BucketAction[0].GetQuotaAssignmentAction()
	tb := a.GetRateLimitStrategy().GetTokenBucket()
	fmt.Println("token bucket:", tb.GetMaxTokens(), "tokens, refilled every", tb.GetFillInterval().AsDuration())
	fmt.Println("for", a.GetAssignmentTimeToLive().AsDuration())
	// Output:
	// token bucket: 24 tokens, refilled every 10s
	// for 10s
}
