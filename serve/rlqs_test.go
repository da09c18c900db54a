package serve

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rlctl/rlctl/engine"
)

// rlqsPolicy: a bucket of domain "quota" may admit 100 requests a minute (fixed_window,
// shared by every Envoy reporting it); domain "conc" is a concurrency limit, which a
// reservation cannot hold.
const rlqsPolicy = `
policy "quota" {
  match = request.domain == "quota"
  rule "per_bucket" {
    algorithm = "fixed_window"
    key       = request.name
    limit     = 100
    window    = "1m"
  }
}
policy "conc" {
  match = request.domain == "conc"
  rule "running" {
    algorithm = "concurrency"
    key       = request.name
    max       = 1
    ttl       = "5m"
  }
}
`

type quotaStreamClient = grpc.BidiStreamingClient[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]

// simEnvoy is an Envoy's rate limit quota filter with one bucket: it admits what its
// assignment grants (over more when it overspends) and reports it.
type simEnvoy struct {
	name    string
	stream  quotaStreamClient
	granted int64 // the token bucket assigned; 0 under DENY_ALL
	window  int   // the window the grant was assigned in
	over    int64 // what it admits past each grant
}

func bucket(kv ...string) *rlqsv3.BucketId {
	b := &rlqsv3.BucketId{Bucket: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		b.Bucket[kv[i]] = kv[i+1]
	}
	return b
}

func usage(id *rlqsv3.BucketId, elapsed time.Duration, allowed, denied uint64) *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage {
	u := &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: id, NumRequestsAllowed: allowed, NumRequestsDenied: denied}
	if elapsed > 0 {
		u.TimeElapsed = durationpb.New(elapsed)
	}
	return u
}

// TestRLQS: three Envoys on streams of their own report one bucket every 5 virtual
// seconds, each admitting exactly its assignment but one, which admits 5 more each time:
// the assignments of a window never add up past its limit, the key's count in the
// backend is what the Envoys reported admitted (the overdrafts included: the key goes into
// debt, and the next window starts with it), a spent bucket is DENY_ALL until the
// window's end, a bucket no policy applies to is ALLOW_ALL, and the stream bounds hold;
// on both backends.
func TestRLQS(t *testing.T) {
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			f := start(t, backend, map[string]string{"quota.hcl": rlqsPolicy})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			client := rlqsv3.NewRateLimitQuotaServiceClient(f.conn)
			open := func() quotaStreamClient {
				t.Helper()
				s, err := client.StreamRateLimitQuotas(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			const limit, interval, demand = 100, 5 * time.Second, 6
			id := bucket("name", "api")
			peek, err := f.srv.Engine().Peek(ctx, engine.Attrs{"domain": "quota", "name": "api", "descriptor": "name", "entry.1": "api"})
			if err != nil || len(peek.Rules) != 1 {
				t.Fatalf("peek: %v %v", peek, err)
			}
			key := peek.Rules[0].Key
			count := func() int64 {
				t.Helper()
				// A fixed_window key holds its count in field n, or compact in the one
				// field named by its window (lua/fixed_window.lua's Forms).
				m, err := f.hgetall(key)
				if err != nil {
					t.Fatalf("HGETALL %s: %v", key, err)
				}
				v, ok := m["n"]
				if !ok && len(m) == 1 {
					for _, only := range m {
						v, ok = only, true
					}
				}
				if !ok {
					t.Fatalf("HGETALL %s: %v, not a fixed_window key", key, m)
				}
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("HGETALL %s: %v", key, m)
				}
				return n
			}
			envoys := []*simEnvoy{{name: "a", stream: open()}, {name: "b", stream: open()}, {name: "overspender", stream: open(), over: 5}}
			start := f.clock.Now()
			windowOf := func(at time.Time) int { return int(at.Sub(start) / time.Minute) }
			var granted, reported [2]int64 // by window: grants assigned; units admitted, charged
			deniedAll, debt := false, false
			for cycle := range 24 { // two windows of 12 reports
				w := windowOf(f.clock.Now())
				for _, e := range envoys {
					m := &rlqsv3.RateLimitQuotaUsageReports{}
					if cycle == 0 {
						m.Domain = "quota"
						m.BucketQuotaUsages = append(m.BucketQuotaUsages, usage(id, 0, 0, demand))
					} else {
						allowed := e.granted
						if allowed > 0 {
							allowed += e.over
							reported[e.window] += e.granted // charged when it was reserved
							reported[w] += e.over           // charged as it is settled
						}
						m.BucketQuotaUsages = append(m.BucketQuotaUsages, usage(id, interval, uint64(allowed), demand))
					}
					if err := e.stream.Send(m); err != nil {
						t.Fatal(err)
					}
					resp, err := e.stream.Recv()
					if err != nil {
						t.Fatalf("cycle %d, %s: %v", cycle, e.name, err)
					}
					if len(resp.BucketAction) != 1 || resp.BucketAction[0].GetBucketId().GetBucket()["name"] != "api" {
						t.Fatalf("cycle %d, %s: %v, want one action for the bucket", cycle, e.name, resp)
					}
					a := resp.BucketAction[0].GetQuotaAssignmentAction()
					ttl := a.GetAssignmentTimeToLive().AsDuration()
					if ttl <= 0 || ttl > 2*interval && cycle > 0 || ttl > RLQSDefaultTTL {
						t.Fatalf("cycle %d, %s: time to live %v", cycle, e.name, ttl)
					}
					switch st := a.GetRateLimitStrategy(); {
					case st.GetTokenBucket() != nil:
						tb := st.GetTokenBucket()
						if tb.MaxTokens == 0 || tb.GetTokensPerFill().GetValue() != tb.MaxTokens || tb.GetFillInterval().AsDuration() != ttl {
							t.Fatalf("cycle %d, %s: token bucket %v", cycle, e.name, tb)
						}
						e.granted, e.window = int64(tb.MaxTokens), w
						granted[w] += e.granted
						if granted[w] > limit {
							t.Fatalf("cycle %d, %s: assignments of window %d add up to %d, past the limit of %d", cycle, e.name, w, granted[w], limit)
						}
					case st.GetBlanketRule() == typev3.RateLimitStrategy_DENY_ALL:
						e.granted = 0
						if c := count(); c < limit {
							t.Fatalf("cycle %d, %s: DENY_ALL with %d of %d counted", cycle, e.name, c, limit)
						}
						deniedAll = true
					default:
						t.Fatalf("cycle %d, %s: %v", cycle, e.name, a)
					}
				}
				if c := count(); c > limit {
					debt = true
				}
				held := false
				for _, e := range envoys {
					held = held || e.granted > 0
				}
				if !held {
					// Every grant of the window is reported: the count is what was admitted,
					// and what the window before owes past its limit.
					owed := int64(0)
					if w > 0 {
						owed = max(reported[w-1]-limit, 0)
					}
					if c := count(); c != reported[w]+owed {
						t.Fatalf("cycle %d: the key counts %d, the Envoys admitted %d in window %d, which starts %d in debt", cycle, c, reported[w], w, owed)
					}
				}
				f.clock.Advance(interval)
			}
			if !deniedAll || !debt {
				t.Fatalf("no DENY_ALL (%v) or no debt (%v)", deniedAll, debt)
			}
			// Window 1 starts with window 0's debt: its grants are the rest.
			if granted[1] > limit-(reported[0]-limit) {
				t.Fatalf("window 1 granted %d, past the limit less window 0's debt of %d", granted[1], reported[0]-limit)
			}
			for _, e := range envoys {
				if err := e.stream.CloseSend(); err != nil {
					t.Fatal(err)
				}
			}

			// A bucket no policy applies to is ALLOW_ALL; the stream's bucket bound holds.
			s := open()
			for i := range RLQSMaxBuckets/RLQSMaxReports + 1 {
				m := &rlqsv3.RateLimitQuotaUsageReports{Domain: "other"}
				for j := range RLQSMaxReports {
					m.BucketQuotaUsages = append(m.BucketQuotaUsages, usage(bucket("n", fmt.Sprint(i*RLQSMaxReports+j)), 0, 0, 1))
				}
				if err := s.Send(m); err != nil {
					t.Fatal(err)
				}
				resp, err := s.Recv()
				if (i+1)*RLQSMaxReports > RLQSMaxBuckets {
					if status.Code(err) != codes.ResourceExhausted {
						t.Fatalf("%d buckets on a stream: %v %v, want ResourceExhausted", (i+1)*RLQSMaxReports, resp, err)
					}
					break
				}
				if err != nil || len(resp.BucketAction) != RLQSMaxReports {
					t.Fatalf("message %d: %v", i, err)
				}
				for _, a := range resp.BucketAction {
					if st := a.GetQuotaAssignmentAction().GetRateLimitStrategy(); st.GetTokenBucket() != nil || st.GetBlanketRule() != typev3.RateLimitStrategy_ALLOW_ALL {
						t.Fatalf("a bucket no policy applies to: %v", a)
					}
				}
			}
			// What an Envoy admitted before its first assignment is charged with it.
			solo := open()
			if err := solo.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "quota", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(bucket("name", "solo"), 0, 7, 0)}}); err != nil {
				t.Fatal(err)
			}
			resp, err := solo.Recv()
			if err != nil || resp.BucketAction[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket().GetMaxTokens() != 7 {
				t.Fatalf("a first report of 7 admitted: %v %v, want 7 tokens", resp, err)
			}
			if p, err := f.srv.Engine().Peek(ctx, engine.Attrs{"domain": "quota", "name": "solo"}); err != nil || p.Rules[0].Remaining != limit-14 {
				t.Fatalf("after 7 admitted and 7 assigned: %v %v, want %d remaining", p, err, limit-14)
			}

			// A report sooner than RLQSMinReportInterval after the bucket's assignment gets
			// no answer of its own; the counters count it as a report.
			reports, assigned := f.srv.rlqs.reports.Load(), f.srv.rlqs.assign[assignAllow].Load()
			s = open()
			for i, advance := range []time.Duration{0, RLQSMinReportInterval - time.Millisecond, time.Millisecond} {
				f.clock.Advance(advance)
				m := &rlqsv3.RateLimitQuotaUsageReports{Domain: "other", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(bucket("n", "often"), advance, 1, 0)}}
				if err := s.Send(m); err != nil {
					t.Fatal(err)
				}
				if i == 1 {
					// The stream answers in order: once a new bucket's report is answered,
					// the one too soon was seen before the clock moves on.
					sync := &rlqsv3.RateLimitQuotaUsageReports{Domain: "other", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(bucket("n", "sync"), 0, 0, 0)}}
					if err := s.Send(sync); err != nil {
						t.Fatal(err)
					}
				}
				if resp, err := s.Recv(); err != nil || len(resp.BucketAction) != 1 {
					t.Fatalf("report %d: %v %v", i, resp, err)
				}
			}
			if r, a := f.srv.rlqs.reports.Load()-reports, f.srv.rlqs.assign[assignAllow].Load()-assigned; r != 4 || a != 3 {
				t.Fatalf("3 reports, one of them too soon, and a new bucket's: %d reports and %d assignments counted, want 4 and 3", r, a)
			}
			// Past the bounds of one message, and a bucket a reservation cannot hold.
			for _, c := range []struct {
				m    *rlqsv3.RateLimitQuotaUsageReports
				code codes.Code
			}{
				{&rlqsv3.RateLimitQuotaUsageReports{Domain: "other", BucketQuotaUsages: make([]*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage, RLQSMaxReports+1)}, codes.InvalidArgument},
				{&rlqsv3.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(id, 0, 0, 1)}}, codes.InvalidArgument},
				{&rlqsv3.RateLimitQuotaUsageReports{Domain: "conc", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(id, 0, 0, 1)}}, codes.InvalidArgument},
			} {
				s := open()
				if err := s.Send(c.m); err != nil {
					t.Fatal(err)
				}
				if resp, err := s.Recv(); status.Code(err) != c.code {
					t.Fatalf("%v: %v %v, want %v", c.m, resp, err, c.code)
				}
			}
		})
	}
}
