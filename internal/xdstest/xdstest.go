// Package xdstest is a management server for tests: go-control-plane's xDS server with a
// snapshot cache of rate limit configurations (RateLimitConfig), on loopback, recording
// the requests its streams receive.
package xdstest

import (
	"context"
	"net"
	"sync"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	xdsserver "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	ratelimitconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
)

// Server is a running management server.
type Server struct {
	// Addr is where it listens (host:port).
	Addr string
	// Requests are the requests its streams receive, in order (buffered: a test that
	// lets more than 100 go unread blocks the server).
	Requests chan *discoveryv3.DiscoveryRequest

	cache  cache.SnapshotCache
	nonces sync.Map // a response's nonce → its version
	g      *grpc.Server
}

// Start starts a management server on addr ("127.0.0.1:0" for a port of its own),
// stopped when the test ends.
func Start(t testing.TB, addr string) *Server {
	t.Helper()
	m := &Server{cache: cache.NewSnapshotCache(false, cache.IDHash{}, nil), Requests: make(chan *discoveryv3.DiscoveryRequest, 100)}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	m.Addr = l.Addr().String()
	srv := xdsserver.NewServer(t.Context(), m.cache, xdsserver.CallbackFuncs{
		StreamRequestFunc: func(_ int64, r *discoveryv3.DiscoveryRequest) error {
			m.Requests <- r
			return nil
		},
		StreamResponseFunc: func(_ context.Context, _ int64, _ *discoveryv3.DiscoveryRequest, r *discoveryv3.DiscoveryResponse) {
			m.nonces.Store(r.GetNonce(), r.GetVersionInfo())
		},
	})
	m.g = grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(m.g, srv)
	go m.g.Serve(l)
	t.Cleanup(m.g.Stop)
	return m
}

// Stop stops the server at once, breaking its streams.
func (m *Server) Stop() { m.g.Stop() }

// Set makes rcs the resources of node, at version.
func (m *Server) Set(t testing.TB, node, version string, rcs ...*ratelimitconfv3.RateLimitConfig) {
	t.Helper()
	res := make([]types.Resource, len(rcs))
	for i, rc := range rcs {
		res[i] = rc
	}
	snap, err := cache.NewSnapshot(version, map[resource.Type][]types.Resource{resource.RateLimitConfigType: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatal(err)
	}
}

// Next is the next request the server receives; the test fails when ctx ends first.
func (m *Server) Next(ctx context.Context, t testing.TB) *discoveryv3.DiscoveryRequest {
	t.Helper()
	select {
	case r := <-m.Requests:
		return r
	case <-ctx.Done():
		t.Fatal("no request from the xDS client")
		return nil
	}
}

// Answered is the next request that answers a response of version (its ACK or NACK, by
// the response's nonce), skipping the others.
func (m *Server) Answered(ctx context.Context, t testing.TB, version string) *discoveryv3.DiscoveryRequest {
	t.Helper()
	for {
		r := m.Next(ctx, t)
		if v, ok := m.nonces.Load(r.GetResponseNonce()); ok && v == version {
			return r
		}
	}
}
