package serve

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rlctl/rlctl/calendar"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/httplimit"
	"github.com/rlctl/rlctl/internal/envoyconf"
)

// RegisterGRPC registers Envoy's rate limit service (envoy.service.ratelimit.v3) on g.
//
// One ShouldRateLimit is one decision: each descriptor is a request of engine.AllowAll,
// so the rules of all the descriptors are charged together or, when one denies, not at
// all. A descriptor's request has the attributes of an envoyconf.Request: domain;
// descriptor, the entry keys in order joined by "." (remote_address, generic_key.path);
// entry.1, entry.2, … each entry's value by its position; and each entry's value by its
// key (the first entry of that key).
//
// Its cost is the descriptor's hits_addend when set, else the request's, else 1. The
// response has the overall code, one status per descriptor (OVER_LIMIT when one of its
// enforcing rules denied; shadow rules never do, as in envoyproxy/ratelimit's shadow
// mode), each with the descriptor's closest limit: its limit, what remains, and the time
// until it resets (until the request may pass, when denied). With Config.ShadowMode an
// answer that would be OVER_LIMIT is OK, its statuses as they are. The response carries
// the fields Config.Headers says for Envoy to add to the client's response: by default
// RateLimit-Policy, RateLimit and (when denied) Retry-After.
//
// A request with no domain or no descriptors is refused (InvalidArgument), as
// envoyproxy/ratelimit refuses them. A descriptor with is_negative_hits is refused (InvalidArgument): rlctl gives capacity
// back only for concurrency leases. A request a policy cannot evaluate is InvalidArgument;
// a backend failure that its policy's on_error does not cover is Unavailable, which Envoy
// treats by its failure_mode_deny.
//
// A request past a limit (MaxDescriptors, MaxEntries, MaxNameBytes, MaxValueBytes) is
// InvalidArgument, with a message naming the limit; on a server made with
// GRPCServerOptions, as g must be, a request past MaxGRPCMessageBytes is
// ResourceExhausted and one whose domain, keys or values are not UTF-8 InvalidArgument.
//
// It registers Envoy's rate limit quota service (envoy.service.rate_limit_quota.v3,
// StreamRateLimitQuotas) too. A stream's first message names the domain; each bucket
// report's bucket_id is a request as a descriptor is, its entries sorted by key (so
// entry.1 is the first key in byte order). Each bucket's quota is a reservation of the
// engine (engine.Engine.Reserve): a report first settles the bucket's last assignment with
// the units the report says were allowed (above the grant, the overdraft is the key's
// debt; below it, the rest is given back as Settle does), then reserves the next: the
// report's demand, allowed plus denied over time_elapsed, times the assignment's time to
// live (twice time_elapsed, within RLQSMinTTL and RLQSMaxTTL; RLQSDefaultTTL without it),
// at least 1 and at most RLQSMaxAssignment. When that does not fit, the most that every
// enforcing rule allows now is reserved instead. A grant is a token bucket of that many
// tokens, refilled with as many each time to live; a denial is DENY_ALL until the
// decision's retry-after (or the time to live, if sooner); a bucket no rule applies to is
// ALLOW_ALL. Units reported admitted with no assignment open (before the first, or while
// denied) are charged as an overdraft, or carried to the bucket's next report while its
// key is in debt. A bucket a policy cannot evaluate, or one a concurrency rule applies to,
// ends the stream with InvalidArgument; a backend failure that on_error does not cover,
// with Unavailable (an overdraft the backend fails to take is logged, and not owed).
// When a stream ends, its open assignments keep their grants as their
// cost: the Envoy may have admitted that much since its last report, which it will not
// report. The stream's bounds are RLQSMaxBuckets, RLQSMaxReports, RLQSMaxBucketBytes and
// RLQSMinReportInterval.
func (s *Server) RegisterGRPC(g *grpc.Server) {
	g.RegisterService(&rlsDesc, rls{s: s})
	g.RegisterService(&rlqsDesc, s)
}

type rls struct {
	rlsv3.UnimplementedRateLimitServiceServer
	s *Server
}

func (r rls) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return r.s.shouldRateLimit(ctx, req)
}

// shouldRateLimit decides req as RegisterGRPC describes; an error is a gRPC status.
func (s *Server) shouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "rlctl: the request has no domain (the rate limit filter's domain)")
	}
	if len(req.GetDescriptors()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "rlctl: the request has no descriptors")
	}
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	base := int64(req.GetHitsAddend())
	if base == 0 {
		base = 1
	}
	ds := make([]envoyconf.Request, len(req.GetDescriptors()))
	rs := make([]dsl.Request, len(ds))
	ns := make([]int64, len(ds))
	for i, d := range req.GetDescriptors() {
		if l := d.GetLimit(); l != nil && envoyconf.OverrideUnits[int32(l.GetUnit())] == "" {
			return nil, status.Errorf(codes.InvalidArgument, "rlctl: descriptor %d: its limit override has the unit %v; give it second, minute, hour, day, week, month or year", i, l.GetUnit())
		}
		if d.GetIsNegativeHits() {
			return nil, status.Errorf(codes.InvalidArgument, "rlctl: descriptor %d: is_negative_hits is not supported (rlctl gives capacity back only for concurrency leases)", i)
		}
		ds[i] = envoyconf.NewRequest(req.GetDomain(), d)
		rs[i] = &ds[i]
		ns[i] = base
		if h := d.GetHitsAddend(); h != nil {
			ns[i] = int64(min(h.GetValue(), math.MaxInt64))
		}
	}
	e := s.Engine()
	dec, err := e.AllowAll(ctx, rs, ns)
	if err != nil {
		if errors.Is(err, engine.ErrRequest) {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if dec.Holds() {
		// Envoy never calls back when its request ends: a lease would be held to its ttl.
		_ = e.Release(ctx, dec)
	}
	s.countStats(ds, dec) // EnvoyStats
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(ds))}
	if !dec.Allowed {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	for i := range ds {
		resp.Statuses[i] = descriptorStatus(dec, i)
	}
	shadowed := s.shadowMode && !dec.Allowed
	if shadowed {
		// As envoyproxy/ratelimit's SHADOW_MODE: the statuses say what was over the
		// limit, the answer lets the request through.
		resp.OverallCode = rlsv3.RateLimitResponse_OK
	}
	switch {
	case s.headers.Legacy != nil:
		resp.ResponseHeadersToAdd = legacyHeaders(resp.Statuses, s.headers.Legacy)
	case !s.headers.Omit:
		h := http.Header{}
		httplimit.Headers(h, dec)
		for _, k := range []string{"Ratelimit-Policy", "Ratelimit", "Retry-After"} {
			if v := h.Get(k); v != "" && !(shadowed && k == "Retry-After") {
				resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd, &corev3.HeaderValue{Key: headerName[k], Value: v})
			}
		}
	}
	return resp, nil
}

// headerName is how the fields are written to Envoy, in lower case as HTTP/2 has them.
var headerName = map[string]string{"Ratelimit-Policy": "ratelimit-policy", "Ratelimit": "ratelimit", "Retry-After": "retry-after"}

// legacyHeaders are envoyproxy/ratelimit's response headers (LIMIT_RESPONSE_HEADERS_ENABLED)
// of statuses, under names: the limit, what remains and the whole seconds until the
// window resets, of the status closest to its limit (one OVER_LIMIT, else the least
// remaining of those with a current limit); none when no status has a limit.
func legacyHeaders(statuses []*rlsv3.RateLimitResponse_DescriptorStatus, names *LegacyHeaders) []*corev3.HeaderValue {
	var pick *rlsv3.RateLimitResponse_DescriptorStatus
	for _, st := range statuses {
		if st.GetCurrentLimit() == nil {
			continue
		}
		if st.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT || pick == nil || pick.GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT && st.GetLimitRemaining() < pick.GetLimitRemaining() {
			pick = st
		}
	}
	if pick == nil {
		return nil
	}
	reset := int64(0)
	if d := pick.GetDurationUntilReset(); d != nil {
		reset = d.GetSeconds()
		if d.GetNanos() > 0 {
			reset++
		}
	}
	return []*corev3.HeaderValue{
		{Key: names.Limit, Value: strconv.FormatUint(uint64(pick.GetCurrentLimit().GetRequestsPerUnit()), 10)},
		{Key: names.Remaining, Value: strconv.FormatUint(uint64(pick.GetLimitRemaining()), 10)},
		{Key: names.Reset, Value: strconv.FormatInt(reset, 10)},
	}
}

// descriptorStatus is descriptor i's status: OVER_LIMIT when one of its enforcing rules
// denied, with its closest counted rule as the current limit: the first that denied, else
// the enforcing one with the least remaining, else a shadow rule (which, as in
// envoyproxy/ratelimit's shadow mode, reports its limit and remaining but is never
// OVER_LIMIT). A descriptor no rule applies to is OK with no limit, and 4294967295
// remaining when an unlimited block names it.
func descriptorStatus(d *engine.Decision, i int) *rlsv3.RateLimitResponse_DescriptorStatus {
	st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	var pick *engine.RuleResult
	for k := range d.Rules {
		rr := &d.Rules[k]
		if rr.Request != i || rr.Limit <= 0 {
			continue
		}
		if !rr.Allowed && !rr.Shadow {
			if st.Code == rlsv3.RateLimitResponse_OK {
				st.Code, pick = rlsv3.RateLimitResponse_OVER_LIMIT, rr
			}
			continue
		}
		// An enforcing rule is the closer limit; a shadow rule shows when it is the only one.
		if st.Code == rlsv3.RateLimitResponse_OK && (pick == nil || pick.Shadow && !rr.Shadow || pick.Shadow == rr.Shadow && rr.Remaining < pick.Remaining) {
			pick = rr
		}
	}
	if pick == nil {
		if d.Unlimited(i) {
			// As envoyproxy/ratelimit answers for an unlimited descriptor.
			st.LimitRemaining = math.MaxUint32
		}
		return st
	}
	st.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{
		Name:            pick.Policy + "." + pick.Rule,
		RequestsPerUnit: uint32(min(pick.Limit, math.MaxUint32)),
		Unit:            unitOf(pick),
	}
	st.LimitRemaining = uint32(min(max(pick.Remaining, 0), math.MaxUint32))
	reset := pick.ResetAfter
	if !pick.Allowed {
		reset = pick.RetryAfter
	}
	if reset != engine.Never {
		st.DurationUntilReset = durationpb.New(reset)
	}
	return st
}

// unitOf is the Envoy unit of a rule's result: a calendar rule's period (a calendar day,
// week, month or year), or the unit its window is exactly, as envoyproxy/ratelimit counts
// them (its month is 30 days, its year 365), or UNKNOWN (a 10s window, a bucket whose
// refill time is not a whole unit, a concurrency limit).
func unitOf(rr *engine.RuleResult) rlsv3.RateLimitResponse_RateLimit_Unit {
	switch rr.Calendar {
	case calendar.Day:
		return rlsv3.RateLimitResponse_RateLimit_DAY
	case calendar.Week:
		return rlsv3.RateLimitResponse_RateLimit_WEEK
	case calendar.Month:
		return rlsv3.RateLimitResponse_RateLimit_MONTH
	case calendar.Year:
		return rlsv3.RateLimitResponse_RateLimit_YEAR
	}
	switch rr.Window {
	case time.Second:
		return rlsv3.RateLimitResponse_RateLimit_SECOND
	case time.Minute:
		return rlsv3.RateLimitResponse_RateLimit_MINUTE
	case time.Hour:
		return rlsv3.RateLimitResponse_RateLimit_HOUR
	case 24 * time.Hour:
		return rlsv3.RateLimitResponse_RateLimit_DAY
	case 7 * 24 * time.Hour:
		return rlsv3.RateLimitResponse_RateLimit_WEEK
	case 30 * 24 * time.Hour:
		return rlsv3.RateLimitResponse_RateLimit_MONTH
	case 365 * 24 * time.Hour:
		return rlsv3.RateLimitResponse_RateLimit_YEAR
	}
	return rlsv3.RateLimitResponse_RateLimit_UNKNOWN
}
