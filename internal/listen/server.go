package listen

import (
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Limits are the timeouts and sizes every connection of a listener is held to.
type Limits struct {
	// ReadHeader bounds the reading of an HTTP request's headers (and the TLS handshake
	// before them), Read the whole request, body included, and Write the response, from
	// the end of the request's headers. Idle is how long a kept-alive HTTP connection, or
	// a gRPC connection with no call open, may wait for its next request before it is
	// closed (gRPC: a GOAWAY).
	ReadHeader, Read, Write, Idle time.Duration
	// MaxHeaderBytes bounds an HTTP request's headers.
	MaxHeaderBytes int
	// Handshake bounds a gRPC connection's TLS handshake and HTTP/2 preface.
	Handshake time.Duration
	// Ping is how long a gRPC connection may be silent before the server pings it, and
	// PingTimeout how long it then waits for the answer before closing it.
	Ping, PingTimeout time.Duration
	// MinClientPing is the shortest interval at which a client may ping; one pinging more
	// often is sent GOAWAY (ENHANCE_YOUR_CALM). Pings are allowed with no call open.
	MinClientPing time.Duration
	// MaxStreams bounds the calls open at once on one gRPC connection (a client needing
	// more opens another connection, as Envoy does), so that streams held open, each a
	// goroutine, cost at most MaxStreams times the connection cap.
	MaxStreams uint32
}

// Defaults are the limits of rlctl serve's listeners (docs/serve.md, "Security").
var Defaults = Limits{
	ReadHeader:     5 * time.Second,
	Read:           10 * time.Second,
	Write:          10 * time.Second,
	Idle:           60 * time.Second,
	MaxHeaderBytes: 16 << 10,
	Handshake:      5 * time.Second,
	Ping:           30 * time.Second,
	PingTimeout:    10 * time.Second,
	MinClientPing:  10 * time.Second,
	MaxStreams:     100,
}

// HTTPServer returns a server of h held to the HTTP limits of l.
func HTTPServer(h http.Handler, l Limits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		WriteTimeout:      l.Write,
		IdleTimeout:       l.Idle,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// GRPCOptions are the options that hold a gRPC server to the gRPC limits of l: the
// handshake timeout, the streams per connection, keepalive enforcement and the idle
// timeout.
func GRPCOptions(l Limits) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ConnectionTimeout(l.Handshake),
		grpc.MaxConcurrentStreams(l.MaxStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.MinClientPing, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: l.Idle, Time: l.Ping, Timeout: l.PingTimeout}),
	}
}
