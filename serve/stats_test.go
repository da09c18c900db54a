package serve

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/envoyconf"
	"github.com/rlctl/rlctl/luahost"
)

// TestTally holds the statistics arithmetic to the expectations of envoyproxy/ratelimit's
// own tests (test/limiter/base_limiter_test.go, test/redis/fixed_cache_impl_test.go),
// each restated as the counter before the hits, the hits, and what they add; a ratio of
// 0.8 unless said.
func TestTally(t *testing.T) {
	for _, c := range []struct {
		name                string
		limit, before, hits uint64
		ratio               float32
		shadow, cached      bool
		want                statsCounts
	}{
		{"within", 10, 4, 1, 0.8, false, false, statsCounts{total: 1, within: 1}},
		{"within below the near threshold", 10, 5, 1, 0.8, false, false, statsCounts{total: 1, within: 1}},
		{"over, the limit reached", 10, 10, 1, 0.8, false, false, statsCounts{total: 1, over: 1}},
		{"no hits", 10, 11, 0, 0.8, false, false, statsCounts{}},
		{"within at the near threshold", 15, 11, 1, 0.8, false, false, statsCounts{total: 1, within: 1}},
		{"near", 15, 12, 1, 0.8, false, false, statsCounts{total: 1, within: 1, near: 1}},
		{"over", 15, 15, 1, 0.8, false, false, statsCounts{total: 1, over: 1}},
		{"over, shadow", 15, 15, 1, 0.8, true, false, statsCounts{total: 1, over: 1, shadow: 1}},
		{"local cache", 15, 0, 1, 0.8, false, true, statsCounts{total: 1, over: 1}},
		{"local cache, shadow", 15, 0, 1, 0.8, true, true, statsCounts{total: 1, over: 1, shadow: 1}},
		{"local cache of 2 hits", 5, 0, 2, 0.8, false, true, statsCounts{total: 2, over: 2}},
		{"3 hits within", 20, 2, 3, 0.8, false, false, statsCounts{total: 3, within: 3}},
		{"2 hits, one past the near threshold", 8, 5, 2, 0.8, false, false, statsCounts{total: 2, within: 2, near: 1}},
		{"3 hits all near", 20, 16, 3, 0.8, false, false, statsCounts{total: 3, within: 3, near: 3}},
		{"3 hits, 2 over and 1 near", 20, 19, 3, 0.8, false, false, statsCounts{total: 3, near: 1, over: 2}},
		{"7 hits, 2 over and 4 near", 20, 15, 7, 0.8, false, false, statsCounts{total: 7, near: 4, over: 2}},
		{"3 hits all over", 10, 27, 3, 0.8, false, false, statsCounts{total: 3, over: 3}},
		{"over from below the near threshold", 5, 2, 5, 0.8, false, false, statsCounts{total: 5, near: 1, over: 2}},
		{"over from below the near threshold, shadow", 5, 2, 5, 0.8, true, false, statsCounts{total: 5, near: 1, over: 2, shadow: 2}},
		{"the near threshold in float32", 1<<24 + 1, 1 << 24, 1, 1, false, false, statsCounts{total: 1, within: 1, near: 1}},
		{"ratio 0: every admitted hit is near", 10, 0, 2, 0, false, false, statsCounts{total: 2, within: 2, near: 2}},
	} {
		if got := tally(c.limit, c.before, c.hits, c.ratio, c.shadow, c.cached); got != c.want {
			t.Errorf("%s: limit %d, %d then %d hits: %+v, want %+v", c.name, c.limit, c.before, c.hits, got, c.want)
		}
	}
}

// TestBefore: a rule's counter before a descriptor's hits, from the decision's results:
// after the charge when the decision charged it, as it was when it did not, the hits of
// earlier descriptors on the same key counted first.
func TestBefore(t *testing.T) {
	rr := func(key string, allowed bool, remaining, cost int64) engine.RuleResult {
		return engine.RuleResult{Key: key, Allowed: allowed, Limit: 10, Remaining: remaining, Cost: cost}
	}
	for _, c := range []struct {
		name string
		dec  engine.Decision
		want []uint64
	}{
		{"charged", engine.Decision{Allowed: true, Rules: []engine.RuleResult{rr("a", true, 6, 3)}}, []uint64{1}},
		{"denied", engine.Decision{Rules: []engine.RuleResult{rr("a", false, 2, 3)}}, []uint64{8}},
		{"admitted, not charged", engine.Decision{Rules: []engine.RuleResult{rr("a", true, 7, 3), rr("b", false, 0, 1)}}, []uint64{3, 10}},
		{"a shadow rule over its limit", engine.Decision{Allowed: true, Rules: []engine.RuleResult{rr("a", false, 1, 2)}}, []uint64{9}},
		{"a key charged twice", engine.Decision{Allowed: true, Rules: []engine.RuleResult{rr("a", true, 4, 2), rr("b", true, 9, 1), rr("a", true, 4, 3)}}, []uint64{1, 0, 3}},
		{"a key denied twice", engine.Decision{Rules: []engine.RuleResult{rr("a", false, 3, 2), rr("a", false, 3, 3)}}, []uint64{7, 9}},
	} {
		for k, want := range c.want {
			if got := before(&c.dec, k); got != want {
				t.Errorf("%s: rule %d: %d before, want %d", c.name, k, got, want)
			}
		}
	}
}

// TestStatsLabels: the labels envoyproxy/ratelimit's default statsd mapping gives a name
// (its prometheus_sink_test.go's, and its manager_impl_test.go's sanitizing): two parts are
// domain and key1, three or more domain, key1 and key2, the rest dropped.
func TestStatsLabels(t *testing.T) {
	for _, c := range []struct {
		name string
		want [3]string
	}{
		{"domain1.key1_val1", [3]string{"domain1", "key1_val1", ""}},
		{"domain1.key1_val1.key2_val2", [3]string{"domain1", "key1_val1", "key2_val2"}},
		{"domain1.key3_val3.key4_val4.key5_val5", [3]string{"domain1", "key3_val3", "key4_val4"}},
		{"mongo_cps.database_users", [3]string{"mongo_cps", "database_users", ""}},
		{"d.path_/foo/bar", [3]string{"d", "path_/foo/bar", ""}},
		{"d.path_/foo:*:bar", [3]string{"d", "path_/foo_*_bar", ""}},
		{"d.path_/foo|bar|baz", [3]string{"d", "path_/foo_bar_baz", ""}},
		{"d.remote_address_10.0.0.1", [3]string{"d", "remote_address_10_0_0_1", ""}},
		{"d.remote_address_10.0.0.1.path_v1.2", [3]string{"d", "remote_address_10_0_0_1", "path_v1"}},
		{"d.x_2001:db8::1", [3]string{"d", "x_2001_db8__1", ""}},
		{"edge", [3]string{"edge", "", ""}},
	} {
		if got := statsLabels(c.name); got != c.want {
			t.Errorf("%q: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestSanitizeStatName holds sanitizeStatName to envoyproxy/ratelimit's definition, a
// replacer and a regular expression, on random names of digits, dots and a few others.
func TestSanitizeStatName(t *testing.T) {
	quad := regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)
	model := func(s string) string {
		s = strings.NewReplacer(":", "_", "|", "_").Replace(s)
		return quad.ReplaceAllStringFunc(s, func(ip string) string { return strings.ReplaceAll(ip, ".", "_") })
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789....:|a_é"
	for range 20000 {
		b := make([]rune, rng.IntN(24))
		for i := range b {
			b[i] = []rune(alphabet)[rng.IntN(len([]rune(alphabet)))]
		}
		s := string(b)
		if got, want := sanitizeStatName(s), model(s); got != want {
			t.Fatalf("%q: %q, want %q", s, got, want)
		}
	}
}

// statsOf gathers c: family name → labels (domain/key1/key2) → value.
func statsOf(t *testing.T, c prometheus.Collector) map[string]map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, f := range fams {
		m := map[string]float64{}
		for _, s := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			m[l["domain"]+"/"+l["key1"]+"/"+l["key2"]] = s.GetCounter().GetValue()
		}
		out[f.GetName()] = m
	}
	return out
}

// TestEnvoyStats: the families over real gRPC, on the embedded backend, for a
// configuration of envoyproxy/ratelimit's imported with rlctl import: their names, the
// labels detailed_metric, value_to_metric and share_threshold give (an address's dots
// sanitized, three parts for a nested key), and the counts of limits within, near and
// over, of hits_addend above 1 (a denied request counted again, since it charged
// nothing), of a shadow limit, and of a descriptor its limit admitted in a request
// another one denied.
func TestEnvoyStats(t *testing.T) {
	cfg := `domain: edge
descriptors:
  - key: remote_address
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: path
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: files
    value: "files/*"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: tenant
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: plan
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 4}
  - key: open
    rate_limit: {unit: minute, requests_per_unit: 100}
`
	out, err := envoyconf.Import([]envoyconf.File{{Name: "ratelimit.yaml", Src: []byte(cfg)}}, envoyconf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, "embedded", map[string]string{"edge.hcl": string(out)})
	st, err := NewEnvoyStats(f.srv, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewEnvoyStats(f.srv, 0.8); err == nil {
		t.Error("a second EnvoyStats of one server: no error")
	}
	ctx := context.Background()
	call := func(hits uint64, ds ...*ratelimitv3.RateLimitDescriptor) rlsv3.RateLimitResponse_Code {
		t.Helper()
		resp, err := f.rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: uint32(hits), Descriptors: ds})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetOverallCode()
	}
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	var codes []rlsv3.RateLimitResponse_Code
	for range 12 {
		codes = append(codes, call(1, desc("remote_address", "10.0.0.1")))
	}
	codes = append(codes, call(1, desc("remote_address", "10.0.0.2")))
	for range 3 {
		codes = append(codes, call(3, desc("path", "/api")))
	}
	codes = append(codes, call(1, desc("path", "")))
	for _, v := range []string{"files/a.pdf", "files/b.csv", "files/c", "files/d"} {
		codes = append(codes, call(1, desc("files", v)))
	}
	for range 3 {
		codes = append(codes, call(1, desc("tenant", "t1")))
	}
	// The address is over its limit: the request is denied, and plan/user charged nothing.
	codes = append(codes, call(1, desc("plan", "pro", "user", "u1"), desc("remote_address", "10.0.0.1")))
	two := desc("plan", "pro", "user", "u1")
	two.HitsAddend = wrapperspb.UInt64(4)
	codes = append(codes, call(1, two))
	codes = append(codes, call(1, desc("open", "x")), call(1, desc("unknown", "x")))
	want := []rlsv3.RateLimitResponse_Code{ok, ok, ok, ok, ok, ok, ok, ok, ok, ok, over, over, ok, ok, over, over, ok, ok, ok, ok, over, ok, ok, ok, over, ok, ok, ok}
	if fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Fatalf("the answers %v, want %v", codes, want)
	}

	const (
		ip     = "edge/remote_address_10_0_0_1/"
		ip2    = "edge/remote_address_10_0_0_2/"
		path   = "edge/path_/api/"
		bare   = "edge/path/"
		files  = "edge/files_files/*/"
		tenant = "edge/tenant/"
		user   = "edge/plan/user"
		open   = "edge/open/"
	)
	wantStats := map[string]map[string]float64{
		"ratelimit_service_rate_limit_total_hits":   {ip: 13, ip2: 1, path: 9, bare: 1, files: 4, tenant: 3, user: 5, open: 1},
		"ratelimit_service_rate_limit_within_limit": {ip: 10, ip2: 1, path: 3, bare: 1, files: 3, tenant: 2, user: 5, open: 1},
		"ratelimit_service_rate_limit_near_limit":   {ip: 2, ip2: 0, path: 2, bare: 0, files: 1, tenant: 1, user: 1, open: 0},
		"ratelimit_service_rate_limit_over_limit":   {ip: 3, ip2: 0, path: 2, bare: 0, files: 1, tenant: 1, user: 0, open: 0},
		"ratelimit_service_rate_limit_shadow_mode":  {ip: 0, ip2: 0, path: 0, bare: 0, files: 0, tenant: 1, user: 0, open: 0},
	}
	got := statsOf(t, st)
	if fmt.Sprint(got) != fmt.Sprint(wantStats) {
		t.Errorf("the statistics\n%v\nwant\n%v\n%s", got, wantStats, out)
	}
}

// TestEnvoyStatsRatio: -near-limit-ratio's values.
func TestEnvoyStatsRatio(t *testing.T) {
	f := start(t, "embedded", map[string]string{"p.hcl": `policy "p" {
  match = true
  rule "r" {
    algorithm = "fixed_window"
    key       = "k"
    limit     = 10
    window    = "1m"
    stats_key = "d.k"
  }
}
`})
	for _, r := range []float64{-0.1, 1.5, 2} {
		if _, err := NewEnvoyStats(f.srv, r); err == nil {
			t.Errorf("ratio %v: no error", r)
		}
	}
	st, err := NewEnvoyStats(f.srv, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if _, err := f.rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "v")}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := statsOf(t, st)["ratelimit_service_rate_limit_near_limit"]["d/k/"]; got != 1 {
		t.Errorf("near_limit at a ratio of 0.5, 6 hits of 10: %v, want 1", got)
	}
}

// BenchmarkEnvoyStats measures what counting envoyproxy/ratelimit's statistics adds to a
// decision: ShouldRateLimit in process on the embedded backend, for the docs'
// configuration imported (every rule with a stats_key, limits raised so that nothing is
// denied), one descriptor over 1,024 addresses, on two servers side by side in one run:
// without an EnvoyStats and with one.
//
//	go test -run '^$' -bench BenchmarkEnvoyStats -benchtime 20000x -count 3 ./serve
func BenchmarkEnvoyStats(b *testing.B) {
	src, err := os.ReadFile("testdata/envoy/ratelimit.yaml")
	if err != nil {
		b.Fatal(err)
	}
	out, err := ImportEnvoy("ratelimit.yaml", src)
	if err != nil {
		b.Fatal(err)
	}
	out = regexp.MustCompile(`(?m)^(\s*limit\s*=\s*)\d+$`).ReplaceAll(out, []byte("${1}1000000"))
	for _, stats := range []bool{false, true} {
		b.Run(fmt.Sprintf("stats=%v", stats), func(b *testing.B) {
			dir := b.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "edge.hcl"), out, 0o644); err != nil {
				b.Fatal(err)
			}
			srv, err := New(Config{Paths: []string{dir}, Backend: engine.NewLocal(luahost.New()), Engine: []engine.Option{engine.WithTimeout(10 * time.Second)}})
			if err != nil {
				b.Fatal(err)
			}
			if stats {
				if _, err := NewEnvoyStats(srv, 0.8); err != nil {
					b.Fatal(err)
				}
			}
			reqs := make([]*rlsv3.RateLimitRequest, 1024)
			for i := range reqs {
				reqs[i] = &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", fmt.Sprintf("10.0.%d.%d", i/256, i%256))}}
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				r, err := srv.shouldRateLimit(ctx, reqs[i%len(reqs)])
				if err != nil || r.OverallCode != rlsv3.RateLimitResponse_OK {
					b.Fatalf("%v %v", r, err)
				}
			}
		})
	}
}
