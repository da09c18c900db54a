package listen

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestHealthDrain: a Watch stream open at Drain is told NOT_SERVING and ends, so
// GracefulStop returns; one opened after it ends at once; Check says NOT_SERVING.
func TestHealthDrain(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := NewHealth()
	g := grpc.NewServer()
	h.Register(g)
	go g.Serve(l)
	defer g.Stop()
	conn, err := grpc.NewClient("passthrough:///"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	ctx := context.Background()
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first status: %v %v", r, err)
	}
	h.Drain()
	h.Drain() // twice is once
	sawNotServing := false
	for {
		r, err := w.Recv()
		if err != nil {
			if status.Code(err) != codes.Unavailable {
				t.Errorf("the stream ended with %v, want Unavailable", err)
			}
			break
		}
		sawNotServing = sawNotServing || r.Status == healthpb.HealthCheckResponse_NOT_SERVING
	}
	if !sawNotServing {
		t.Error("the watcher was not told NOT_SERVING")
	}
	if r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("Check after Drain: %v %v", r, err)
	}
	late, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := late.Recv(); err != nil {
			break
		}
	}
	// With no stream open, GracefulStop returns: the test would hang here otherwise.
	g.GracefulStop()
}
