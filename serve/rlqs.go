package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/envoyconf"
)

// The bounds of Envoy's rate limit quota service (RLQS, StreamRateLimitQuotas), besides
// those of every gRPC call (MaxGRPCMessageBytes a message, the listener's connection and
// stream limits): a stream past one of them ends with the status given, its open
// assignments kept as charged (docs/serve.md, "Rate limit quota service (RLQS)").
const (
	// RLQSMaxBuckets bounds the buckets one stream reports (ResourceExhausted past it).
	RLQSMaxBuckets = 1000
	// RLQSMaxReports bounds the bucket reports of one message (InvalidArgument past it).
	RLQSMaxReports = 256
	// RLQSMaxBucketBytes bounds a bucket id's keys and values together, in bytes
	// (InvalidArgument past it); each is held to MaxNameBytes, MaxValueBytes and UTF-8 as
	// a descriptor's entry is, and an id has at most MaxEntries of them.
	RLQSMaxBucketBytes = 1 << 10
	// RLQSMinReportInterval: a bucket is assigned at most once in it. A report that comes
	// sooner is added to the next one and gets no answer of its own.
	RLQSMinReportInterval = time.Second
	// RLQSMaxAssignment caps the units one assignment grants.
	RLQSMaxAssignment = 10_000
	// An assignment lives twice its report's time_elapsed (the bucket's reporting
	// interval), within [RLQSMinTTL, RLQSMaxTTL]; RLQSDefaultTTL for a report without
	// time_elapsed (the one that subscribes a bucket).
	RLQSMinTTL     = 2 * time.Second
	RLQSMaxTTL     = 5 * time.Minute
	RLQSDefaultTTL = 10 * time.Second
)

// rlqsDesc is rlqsv3.RateLimitQuotaService_ServiceDesc with the handler below, which
// decodes the reports itself (see requestCodec).
var rlqsDesc = grpc.ServiceDesc{
	ServiceName: rlqsv3.RateLimitQuotaService_ServiceDesc.ServiceName,
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "StreamRateLimitQuotas",
		Handler:       func(srv any, ss grpc.ServerStream) error { return srv.(*Server).streamQuotas(ss) },
		ServerStreams: true,
		ClientStreams: true,
	}},
	Metadata: rlqsv3.RateLimitQuotaService_ServiceDesc.Metadata,
}

// rawReports is what the stream's messages are received into: see rawRequest.
type rawReports struct {
	*rlqsv3.RateLimitQuotaUsageReports
	raw []byte
}

// rlqsStats are the service's counters: reports, and assignments by action.
type rlqsStats struct {
	reports atomic.Uint64
	assign  [3]atomic.Uint64 // token_bucket, deny_all, allow_all
}

const (
	assignTokens = iota
	assignDeny
	assignAllow
)

var (
	rlqsReportsDesc = prometheus.NewDesc("rlctl_rlqs_reports_total",
		"Bucket usage reports received on rate limit quota (RLQS) streams.", nil, nil)
	rlqsAssignDesc = prometheus.NewDesc("rlctl_rlqs_assignments_total",
		"Quota assignments sent on rate limit quota (RLQS) streams, by action.", []string{"action"}, nil)
	rlqsActions = [...]string{"token_bucket", "deny_all", "allow_all"}
)

// RLQSStats is a prometheus.Collector of s's rate limit quota service:
// rlctl_rlqs_reports_total, the bucket reports received, and
// rlctl_rlqs_assignments_total{action="token_bucket|deny_all|allow_all"}, the
// assignments sent.
func (s *Server) RLQSStats() prometheus.Collector { return rlqsCollector{s} }

type rlqsCollector struct{ s *Server }

func (c rlqsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rlqsReportsDesc
	ch <- rlqsAssignDesc
}

func (c rlqsCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(rlqsReportsDesc, prometheus.CounterValue, float64(c.s.rlqs.reports.Load()))
	for i, a := range rlqsActions {
		ch <- prometheus.MustNewConstMetric(rlqsAssignDesc, prometheus.CounterValue, float64(c.s.rlqs.assign[i].Load()), a)
	}
}

// quotaBucket is one bucket of a stream.
type quotaBucket struct {
	id  *rlqsv3.BucketId
	req envoyconf.Request
	// res is the open reservation of the last assignment (nil when it granted nothing
	// that is charged), granted its units.
	res     *engine.Reservation
	granted int64
	// carry: units reported admitted that no reservation has charged yet (the key was in
	// debt when they were reported).
	carry int64
	// The reports since the last assignment that came sooner than RLQSMinReportInterval.
	allowed, denied uint64
	elapsed         time.Duration
	assigned        time.Time // when last assigned; zero before
}

// quotaStream is one StreamRateLimitQuotas.
type quotaStream struct {
	s       *Server
	domain  string
	buckets map[string]*quotaBucket
}

// streamQuotas serves one StreamRateLimitQuotas, as RegisterGRPC describes.
func (s *Server) streamQuotas(ss grpc.ServerStream) error {
	q := &quotaStream{s: s, buckets: map[string]*quotaBucket{}}
	defer q.close()
	for {
		in := &rawReports{RateLimitQuotaUsageReports: new(rlqsv3.RateLimitQuotaUsageReports)}
		if err := ss.RecvMsg(in); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if in.raw != nil {
			if err := proto.Unmarshal(in.raw, in.RateLimitQuotaUsageReports); err != nil {
				return status.Errorf(codes.InvalidArgument, "rlctl: the message is not a RateLimitQuotaUsageReports: %v (domains, keys and values must be UTF-8)", err)
			}
		}
		resp, err := q.report(ss.Context(), in.RateLimitQuotaUsageReports)
		if err != nil {
			return err
		}
		if len(resp.GetBucketAction()) > 0 {
			if err := ss.SendMsg(resp); err != nil {
				return err
			}
		}
	}
}

// bucketKey is a bucket id's identity within a stream: its entries sorted by key.
func bucketKey(entries []*ratelimitv3.RateLimitDescriptor_Entry) string {
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(fmt.Sprintf("%d:%s%d:%s", len(e.Key), e.Key, len(e.Value), e.Value))
	}
	return b.String()
}

// bucketEntries are a bucket id's entries as a descriptor's, sorted by key.
func bucketEntries(id *rlqsv3.BucketId) []*ratelimitv3.RateLimitDescriptor_Entry {
	es := make([]*ratelimitv3.RateLimitDescriptor_Entry, 0, len(id.GetBucket()))
	for k, v := range id.GetBucket() {
		es = append(es, &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	slices.SortFunc(es, func(a, b *ratelimitv3.RateLimitDescriptor_Entry) int { return strings.Compare(a.Key, b.Key) })
	return es
}

// report checks a message whole, then answers each of its bucket reports in order.
func (q *quotaStream) report(ctx context.Context, m *rlqsv3.RateLimitQuotaUsageReports) (*rlqsv3.RateLimitQuotaResponse, error) {
	switch d := m.GetDomain(); {
	case q.domain == "" && d == "":
		return nil, status.Error(codes.InvalidArgument, "rlctl: the stream's first message has no domain (the rate limit quota filter's domain)")
	case q.domain == "":
		if err := checkString(d, MaxNameBytes, "MaxNameBytes", "the domain", -1, 0); err != nil {
			return nil, err
		}
		q.domain = d
	case d != "" && d != q.domain:
		return nil, status.Errorf(codes.InvalidArgument, "rlctl: the stream's domain is %q; a message names %q (open another stream for another domain)", q.domain, d)
	}
	us := m.GetBucketQuotaUsages()
	if len(us) > RLQSMaxReports {
		return nil, limitError("the message has %d bucket reports, more than the %d one may have (RLQSMaxReports)", len(us), RLQSMaxReports)
	}
	type item struct {
		key     string
		entries []*ratelimitv3.RateLimitDescriptor_Entry
	}
	items := make([]item, len(us))
	added := 0
	for i, u := range us {
		es := bucketEntries(u.GetBucketId())
		if len(es) == 0 {
			return nil, limitError("bucket report %d has no bucket_id", i)
		}
		if len(es) > MaxEntries {
			return nil, limitError("bucket report %d's bucket_id has %d entries, more than the %d one may have (MaxEntries)", i, len(es), MaxEntries)
		}
		size := 0
		for j, e := range es {
			if err := checkString(e.Key, MaxNameBytes, "MaxNameBytes", "key", i, j); err != nil {
				return nil, err
			}
			if err := checkString(e.Value, MaxValueBytes, "MaxValueBytes", "value", i, j); err != nil {
				return nil, err
			}
			size += len(e.Key) + len(e.Value)
		}
		if size > RLQSMaxBucketBytes {
			return nil, limitError("bucket report %d's bucket_id is %d bytes, more than the %d one may be (RLQSMaxBucketBytes)", i, size, RLQSMaxBucketBytes)
		}
		items[i] = item{key: bucketKey(es), entries: es}
		if _, ok := q.buckets[items[i].key]; !ok && !slices.ContainsFunc(items[:i], func(o item) bool { return o.key == items[i].key }) {
			added++
		}
	}
	if len(q.buckets)+added > RLQSMaxBuckets {
		return nil, status.Errorf(codes.ResourceExhausted, "rlctl: the stream would report %d buckets, more than the %d one may (RLQSMaxBuckets)", len(q.buckets)+added, RLQSMaxBuckets)
	}
	resp := &rlqsv3.RateLimitQuotaResponse{}
	for i, u := range us {
		b := q.buckets[items[i].key]
		if b == nil {
			b = &quotaBucket{id: &rlqsv3.BucketId{Bucket: u.GetBucketId().GetBucket()}}
			b.req = envoyconf.NewRequest(q.domain, &ratelimitv3.RateLimitDescriptor{Entries: items[i].entries})
			q.buckets[items[i].key] = b
		}
		q.s.rlqs.reports.Add(1)
		a, err := q.assign(ctx, b, u)
		if err != nil {
			return nil, err
		}
		if a != nil {
			resp.BucketAction = append(resp.BucketAction, a)
		}
	}
	return resp, nil
}

// assign settles bucket b's last assignment with report u and makes the next; nil when
// the report came sooner than RLQSMinReportInterval after the last assignment.
func (q *quotaStream) assign(ctx context.Context, b *quotaBucket, u *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage) (*rlqsv3.RateLimitQuotaResponse_BucketAction, error) {
	b.allowed = satAdd(b.allowed, u.GetNumRequestsAllowed())
	b.denied = satAdd(b.denied, u.GetNumRequestsDenied())
	if d := u.GetTimeElapsed().AsDuration(); d > 0 {
		b.elapsed += d
	}
	now := q.s.leases.now()
	if !b.assigned.IsZero() && now.Sub(b.assigned) < RLQSMinReportInterval {
		return nil, nil
	}
	allowed, denied, elapsed := b.allowed, b.denied, b.elapsed
	b.allowed, b.denied, b.elapsed = 0, 0, 0
	used := min(int64(min(allowed, algorithms.MaxInt))+b.carry, algorithms.MaxInt)
	b.carry = 0
	if b.res != nil {
		q.settle(ctx, b, used)
		used = 0
	}
	if used > 0 {
		if err := q.charge(ctx, b, used); err != nil {
			return nil, err
		}
	}

	ttl := RLQSDefaultTTL
	if elapsed > 0 {
		ttl = min(max(2*elapsed, RLQSMinTTL), RLQSMaxTTL)
	}
	demand := float64(allowed) + float64(denied)
	est := int64(demand)
	if elapsed > 0 {
		est = int64(math.Ceil(demand * float64(ttl) / float64(elapsed)))
	}
	est = min(max(est, 1), RLQSMaxAssignment)

	e := q.s.Engine()
	res, err := e.Reserve(ctx, &b.req, est)
	if err != nil {
		return nil, reserveError(b, err)
	}
	if d := res.Decision; !d.Allowed {
		// The most every enforcing rule allows now, when that is some.
		if g := fits(d, est); g > 0 {
			if res, err = e.Reserve(ctx, &b.req, g); err != nil {
				return nil, reserveError(b, err)
			}
			est = g
		}
	}
	b.assigned = now
	d := res.Decision
	act := &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{AssignmentTimeToLive: durationpb.New(ttl)}
	switch {
	case d.Source == engine.FromNoRules:
		act.RateLimitStrategy = blanket(typev3.RateLimitStrategy_ALLOW_ALL)
		q.s.rlqs.assign[assignAllow].Add(1)
	case !d.Allowed:
		if d.RetryAfter > 0 && d.RetryAfter < ttl {
			act.AssignmentTimeToLive = durationpb.New(d.RetryAfter)
		}
		act.RateLimitStrategy = blanket(typev3.RateLimitStrategy_DENY_ALL)
		q.s.rlqs.assign[assignDeny].Add(1)
	default:
		b.res, b.granted = res, est
		g := uint32(min(est, math.MaxUint32))
		act.RateLimitStrategy = &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
			MaxTokens: g, TokensPerFill: wrapperspb.UInt32(g), FillInterval: durationpb.New(ttl),
		}}}
		q.s.rlqs.assign[assignTokens].Add(1)
	}
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{
		BucketId:     b.id,
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{QuotaAssignmentAction: act},
	}, nil
}

// settle settles b's open reservation with the units reported admitted under it. An
// overdraft a rule cannot carry as a debt (ErrRequest) is settled at the grant instead;
// one the backend failed to take is logged (by the engine), and not owed.
func (q *quotaStream) settle(ctx context.Context, b *quotaBucket, used int64) {
	res := b.res
	b.res = nil
	err := res.Settle(ctx, used)
	if errors.Is(err, engine.ErrRequest) && used > b.granted {
		q.s.log.Warn("rlctl serve: an RLQS bucket admitted more than its assignment on a rule that carries no debt; the excess is not charged",
			"domain", q.domain, "bucket", b.req.Attr("entries"), "assigned", b.granted, "admitted", used, "error", err.Error())
		err = res.Settle(ctx, b.granted)
	}
	if err != nil {
		q.s.log.Warn("rlctl serve: an RLQS bucket's usage was not settled", "domain", q.domain, "bucket", b.req.Attr("entries"), "error", err.Error())
	}
}

// charge charges b used units that no reservation held, without a check (a debt past
// the limit); when the key is in debt already they are carried to b's next report.
func (q *quotaStream) charge(ctx context.Context, b *quotaBucket, used int64) error {
	res, err := q.s.Engine().Reserve(ctx, &b.req, 0)
	if err != nil {
		return reserveError(b, err)
	}
	if !res.Decision.Allowed {
		b.carry = used
		return nil
	}
	b.res, b.granted = res, 0
	q.settle(ctx, b, used)
	return nil
}

// fits is the largest estimate below est that every enforcing rule of denied decision
// d allows now; 0 when none, or when a rule denied for another reason than its count.
func fits(d *engine.Decision, est int64) int64 {
	g := est - 1
	for _, rr := range d.Rules {
		if rr.Shadow {
			continue
		}
		if rr.Limit <= 0 || rr.Cost <= 0 {
			return 0
		}
		unit := rr.Cost / est
		if unit <= 0 {
			return 0
		}
		g = min(g, max(rr.Remaining, 0)/unit)
	}
	return max(g, 0)
}

// reserveError is the stream's status for a failed Reserve of bucket b.
func reserveError(b *quotaBucket, err error) error {
	if errors.Is(err, engine.ErrRequest) {
		return status.Errorf(codes.InvalidArgument, "rlctl: bucket %s: %v", b.req.Attr("entries"), err)
	}
	return status.Errorf(codes.Unavailable, "rlctl: bucket %s: %v", b.req.Attr("entries"), err)
}

// close ends the stream: what is carried is charged if it can be; an open reservation
// keeps its grant as its cost (what the Envoy may have admitted since its last report,
// which it will not report).
func (q *quotaStream) close() {
	ctx, cancel := context.WithTimeout(context.Background(), leaseReturn)
	defer cancel()
	for _, b := range q.buckets {
		if b.carry > 0 && b.res == nil {
			if err := q.charge(ctx, b, b.carry); err != nil {
				q.s.log.Warn("rlctl serve: an RLQS stream's last usage could not be charged", "domain", q.domain, "bucket", b.req.Attr("entries"), "error", err.Error())
			}
		}
	}
}

func blanket(r typev3.RateLimitStrategy_BlanketRule) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: r}}
}

func satAdd(a, b uint64) uint64 {
	if a+b < a {
		return math.MaxUint64
	}
	return a + b
}
