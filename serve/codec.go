package serve

import (
	"context"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec requestCodec defers to
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// grpc-go turns an error of its codec into codes.Internal, so a ShouldRateLimit whose
// string fields are not UTF-8 (which proto3 forbids) would fail as if the server had.
// requestCodec leaves a ShouldRateLimit's bytes undecoded, and the service's handler
// (rlsDesc) decodes them itself, refusing a request that does not decode with
// InvalidArgument. Every other message is the proto codec's.
type requestCodec struct{}

// rawRequest is what the service's handler decodes into: under requestCodec the bytes
// as received, in raw; under grpc-go's proto codec (a server made without
// GRPCServerOptions) the embedded message, decoded.
type rawRequest struct {
	*rlsv3.RateLimitRequest
	raw []byte
}

func (requestCodec) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2("proto").Marshal(v)
}

func (requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawRequest); ok {
		r.raw = data.Materialize()
		return nil
	}
	if r, ok := v.(*rawReports); ok {
		r.raw = data.Materialize()
		return nil
	}
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

func (requestCodec) Name() string { return "proto" }

// rlsDesc is rlsv3.RateLimitService_ServiceDesc with the handler below.
var rlsDesc = grpc.ServiceDesc{
	ServiceName: rlsv3.RateLimitService_ServiceDesc.ServiceName,
	HandlerType: (*rlsv3.RateLimitServiceServer)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: shouldRateLimit}},
	Streams:     []grpc.StreamDesc{},
	Metadata:    rlsv3.RateLimitService_ServiceDesc.Metadata,
}

// shouldRateLimit is the generated handler but for decoding: interceptors see the
// request as decoded (all of it that decoded), and one that does not decode is refused
// by the handler they call, so an interceptor that refuses the call (authentication)
// does so first.
func shouldRateLimit(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := &rawRequest{RateLimitRequest: new(rlsv3.RateLimitRequest)}
	if err := dec(in); err != nil {
		return nil, err
	}
	var bad error
	if in.raw != nil {
		if err := proto.Unmarshal(in.raw, in.RateLimitRequest); err != nil {
			bad = status.Errorf(codes.InvalidArgument, "rlctl: the request is not a RateLimitRequest: %v (domains, keys and values must be UTF-8, so that two byte strings are never one counter)", err)
		}
	}
	handler := func(ctx context.Context, req any) (any, error) {
		if bad != nil {
			return nil, bad
		}
		return srv.(rlsv3.RateLimitServiceServer).ShouldRateLimit(ctx, req.(*rlsv3.RateLimitRequest))
	}
	if interceptor == nil {
		return handler(ctx, in.RateLimitRequest)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: rlsv3.RateLimitService_ShouldRateLimit_FullMethodName}
	return interceptor(ctx, in.RateLimitRequest, info, handler)
}
