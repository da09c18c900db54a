package serve

import "google.golang.org/grpc"

// The budget of one call. Each interface refuses a call past any of these before it
// reaches the engine, with the error given; the numbers are the service's contract
// (docs/serve.md, "Limits").
const (
	// MaxGRPCMessageBytes bounds a ShouldRateLimit request as received (gRPC's
	// ResourceExhausted past it).
	MaxGRPCMessageBytes = 256 << 10
)

// GRPCServerOptions are the options every gRPC server that RegisterGRPC registers on
// must be made with: the message size bound above and the codec that keeps request
// values injective.
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxGRPCMessageBytes)}
}
