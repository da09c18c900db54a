package listen

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Health is grpc.health.v1's service (grpc/health.Server) whose Watch streams end when
// the service drains. grpc's own keeps a Watch stream open after its Shutdown, and
// (*grpc.Server).GracefulStop waits for every stream: one watcher (a Kubernetes probe,
// an Envoy health check) would hold the drain for its whole length while new calls
// are refused. It is safe for concurrent use.
type Health struct {
	*health.Server
	draining chan struct{}
	once     sync.Once
}

// NewHealth returns a Health serving SERVING for the empty service name.
func NewHealth() *Health {
	return &Health{Server: health.NewServer(), draining: make(chan struct{})}
}

// Drain sets every service NOT_SERVING and ends every Watch stream, those open and those
// opened from then on, each after it has been sent NOT_SERVING, with codes.Unavailable.
// Check answers NOT_SERVING from then on. Drain may be called more than once.
func (h *Health) Drain() {
	h.once.Do(func() {
		h.Server.Shutdown()
		close(h.draining)
	})
}

// Watch is health.Server's until Drain.
func (h *Health) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-h.draining:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := h.Server.Watch(req, &watchStream{Health_WatchServer: stream, ctx: ctx})
	select {
	case <-h.draining:
		// health.Server may have seen the end of ctx before Drain's NOT_SERVING: say it
		// again (a watcher may be told one status twice), then end the stream.
		_ = stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING})
		return status.Error(codes.Unavailable, "the service is stopping")
	default:
		return err
	}
}

// Register registers h as the health service of g.
func (h *Health) Register(g *grpc.Server) { healthpb.RegisterHealthServer(g, h) }

// watchStream is a Watch stream whose context ends at the drain.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (s *watchStream) Context() context.Context { return s.ctx }
