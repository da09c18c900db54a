package serve

import (
	"fmt"
	"unicode/utf8"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlctl/rlctl/engine"
)

// The budget of one call. Each interface refuses a call past any of these before it
// reaches the engine, with the error given; the numbers are the service's contract
// (docs/serve.md, "Limits"). Past them, engine.MaxRules bounds the rules one call
// checks, whatever the policies: the descriptors (or requests) of one call together may
// apply at most 128 rules, so 64 descriptors that each match two rules (or 32 of four)
// are the largest call. Refusals name the limit: InvalidArgument over gRPC, 400 over HTTP, except the
// message and body sizes (ResourceExhausted, 413).
//
// The numbers are far above what a gateway sends (Envoy sends one descriptor per
// rate_limits action, each of a few entries) and small enough that the largest call
// costs the backend under 5ms of script time (about 2ms on redis-server:
// BenchmarkLargestCall).
const (
	// MaxDescriptors bounds the descriptors of one ShouldRateLimit.
	MaxDescriptors = 64
	// MaxEntries bounds the entries of one descriptor.
	MaxEntries = 32
	// MaxNameBytes bounds, in bytes, the request's domain, each descriptor entry's key
	// and each HTTP attribute's name.
	MaxNameBytes = 256
	// MaxValueBytes bounds, in bytes, each descriptor entry's value and each HTTP
	// attribute's value: a URL path, a header or a token fits.
	MaxValueBytes = 4 << 10
	// MaxGRPCMessageBytes bounds a ShouldRateLimit request as received (gRPC's
	// ResourceExhausted past it).
	MaxGRPCMessageBytes = 256 << 10
	// MaxBodyBytes bounds the body of an HTTP API request (413 past it).
	MaxBodyBytes = 256 << 10
	// MaxBatch bounds the requests of one HTTP decision ("requests").
	MaxBatch = 128
	// MaxAttributes bounds the attributes of one HTTP request.
	MaxAttributes = 64
	// MaxDelayMs bounds an HTTP decision's max_delay_ms: a request that waits for its
	// turn holds its connection that long at most, within the listener's write timeout
	// (10s by default).
	MaxDelayMs = 5000
)

// The bounds of the HTTP API and the engine agree: a full batch of requests that each
// apply one rule is the most rules a call may check.
var _ [engine.MaxRules - MaxBatch]struct{}

// GRPCServerOptions are the options every gRPC server that RegisterGRPC registers on
// must be made with: the message size bound above and the codec that keeps request
// values injective (a value that is not UTF-8 is InvalidArgument, where grpc-go's own
// codec fails the call with Internal). Other services on the server (health, reflection)
// are decoded as usual.
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxGRPCMessageBytes), grpc.ForceServerCodecV2(requestCodec{})}
}

// checkRequest refuses (InvalidArgument) a ShouldRateLimit past the limits above.
func checkRequest(req *rlsv3.RateLimitRequest) error {
	if err := checkString(req.GetDomain(), MaxNameBytes, "MaxNameBytes", "the domain", -1, 0); err != nil {
		return err
	}
	ds := req.GetDescriptors()
	if len(ds) > MaxDescriptors {
		return limitError("the request has %d descriptors, more than the %d one may have (MaxDescriptors)", len(ds), MaxDescriptors)
	}
	for i, d := range ds {
		es := d.GetEntries()
		if len(es) > MaxEntries {
			return limitError("descriptor %d has %d entries, more than the %d one may have (MaxEntries)", i, len(es), MaxEntries)
		}
		for j, e := range es {
			if err := checkString(e.GetKey(), MaxNameBytes, "MaxNameBytes", "key", i, j); err != nil {
				return err
			}
			if err := checkString(e.GetValue(), MaxValueBytes, "MaxValueBytes", "value", i, j); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkString refuses s when it is longer than max bytes (the limit called name) or not
// UTF-8 (which the codec refuses already; a server made without GRPCServerOptions has
// grpc-go's, which fails such a call with Internal). s is descriptor i's entry j's part
// (key or value), or for i < 0 the one called part; the name is formatted only for a
// refusal, so a call within the limits pays nothing for it.
func checkString(s string, max int, name, part string, i, j int) error {
	if len(s) <= max && utf8.ValidString(s) {
		return nil
	}
	what := part
	if i >= 0 {
		what = fmt.Sprintf("descriptor %d entry %d's %s", i, j, part)
	}
	if len(s) > max {
		return limitError("%s is %d bytes, more than the %d it may be (%s)", what, len(s), max, name)
	}
	if !utf8.ValidString(s) {
		return limitError("%s is not UTF-8: rlctl takes UTF-8 text only, so that two byte strings are never one counter", what)
	}
	return nil
}

func limitError(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "rlctl: "+format, args...)
}

// checkAttributes refuses an HTTP request's attributes past the limits above; the
// body's UTF-8 was checked whole (see readBody).
func checkAttributes(attrs map[string]string) error {
	if len(attrs) > MaxAttributes {
		return fmt.Errorf("%d attributes, more than the %d a request may have (MaxAttributes)", len(attrs), MaxAttributes)
	}
	for k, v := range attrs {
		if len(k) > MaxNameBytes {
			return fmt.Errorf("an attribute's name is %d bytes, more than the %d it may be (MaxNameBytes)", len(k), MaxNameBytes)
		}
		if len(v) > MaxValueBytes {
			return fmt.Errorf("attribute %q is %d bytes, more than the %d it may be (MaxValueBytes)", k, len(v), MaxValueBytes)
		}
	}
	return nil
}
