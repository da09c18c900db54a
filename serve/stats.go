package serve

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/envoyconf"
)

// EnvoyStats is envoyproxy/ratelimit's statistics of each limit, counted from a Server's
// ShouldRateLimit decisions, as the Prometheus families its default statsd mapping
// exports (src/stats/prom/default_mapper.yaml), which dashboards built for it read:
//
//	ratelimit_service_rate_limit_total_hits     hits asked of the limit
//	ratelimit_service_rate_limit_within_limit   hits the limit admitted
//	ratelimit_service_rate_limit_near_limit     hits past the near-limit ratio of the limit
//	ratelimit_service_rate_limit_over_limit     hits past the limit
//	ratelimit_service_rate_limit_shadow_mode    hits past the limit of a shadow rule
//
// counters labelled domain, key1 and key2: the first three '.'-separated parts of the
// limit's name after envoyproxy/ratelimit's statsd sanitizing (':' and '|' become '_', as
// do the dots of a dotted quad such as an IPv4 address), key2 empty for a name of two
// parts (which Prometheus reads as no key2 label, as the mapping writes it), the parts
// after the third dropped (several names then share a series, as in the mapping). A
// limit is a rule with a stats_key, whose value for the descriptor is its name (rlctl
// import writes each imported rule's); rules without one are not counted. A series
// exists, from 0 in every family, once its name has been counted or, for a stats_key
// that reads no request value, once its policies are loaded; past MaxEnvoyStatsSeries
// series, further names are counted in the series with no labels.
//
// The hits of a descriptor are its cost for the rule (engine.RuleResult.Cost: the
// descriptor's hits_addend, times the rule's cost). They are counted with
// envoyproxy/ratelimit's arithmetic (its limiter/base_limiter.go) on the rule's counter as
// it stood before the request, used = Limit − Remaining (fixed_window, every imported
// rule: the window's count): with after = used + hits,
//
//   - after ≤ limit: within_limit += hits; near_limit += the hits past
//     floor(limit × ratio) (float32, as there);
//   - after > limit: over_limit += the hits past the limit (all of them when used was at
//     the limit already) and near_limit += those between the near-limit threshold and
//     the limit; a shadow rule's shadow_mode += its over_limit;
//
// and total_hits += hits either way. Descriptors that share a rule's counter (the same
// key) count one after the other, as envoyproxy/ratelimit increments its counter once per
// descriptor. Where rlctl differs on purpose, the counts follow what rlctl does:
//
//   - A denied request is charged nothing, so its rule's counter stays where it was: a
//     request of n hits denied with m left counts n − m over the limit every time, where
//     envoyproxy/ratelimit (whose counter takes the n hits anyway) counts all n once its
//     counter has passed the limit. Requests of one hit count the same in both.
//   - A request's descriptors are charged together or not at all: a descriptor whose rule
//     admitted it, in a request another descriptor's rule denied, counts within_limit
//     (and near_limit) though nothing was charged. The statistics say what each limit
//     decided, as envoyproxy/ratelimit's do; whether the request passed is
//     rlctl_requests_total's outcome.
//   - A rule that no backend decided (Limit 0: on_error "allow" or "deny" during a
//     backend failure) counts total_hits only. A request answered from the deny cache
//     (engine.WithDenyCache, envoyproxy/ratelimit's local cache) counts its cached rule's
//     hits as over_limit and no other rule: the request went no further.
//   - A request refused (InvalidArgument, Unavailable) counts nothing: rlctl decides
//     which rules apply and evaluates them in the same call.
//
// EnvoyStats is a prometheus.Collector, safe for concurrent use.
type EnvoyStats struct {
	log   *slog.Logger // the Server's
	ratio float32
	index atomic.Pointer[statsIndex]

	mu     sync.RWMutex
	series map[[3]string]*statsSeries
	full   atomic.Bool // past MaxEnvoyStatsSeries: logged once
}

// MaxEnvoyStatsSeries is the number of label sets an EnvoyStats keeps. A stats_key that
// reads request values (detailed_metric, value_to_metric) makes one per value; past the
// cap, such a name's hits are counted in the series without labels, and the first time
// this happens the Server logs it at warn level.
const MaxEnvoyStatsSeries = 10000

// statsFamilies are the families of EnvoyStats, in the order of statsSeries.n.
var statsFamilies = [...]*prometheus.Desc{
	statsDesc("total_hits", "Hits (descriptor costs) asked of the limit named by a rule's stats_key, as envoyproxy/ratelimit counts them."),
	statsDesc("within_limit", "Hits the limit admitted, as envoyproxy/ratelimit counts them."),
	statsDesc("near_limit", "Hits past the near-limit ratio of the limit (-near-limit-ratio), as envoyproxy/ratelimit counts them."),
	statsDesc("over_limit", "Hits past the limit, as envoyproxy/ratelimit counts them; a denied request is charged nothing."),
	statsDesc("shadow_mode", "Hits past the limit of a shadow rule, as envoyproxy/ratelimit counts them."),
}

func statsDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("ratelimit_service_rate_limit_"+name, help, []string{"domain", "key1", "key2"}, nil)
}

// statsSeries is one label set's counters: total_hits, within_limit, near_limit,
// over_limit, shadow_mode.
type statsSeries struct {
	labels [3]string
	n      [len(statsFamilies)]atomic.Uint64
}

// statsIndex is the stats_key of each rule of one loaded configuration.
type statsIndex struct {
	cfg   *dsl.Config
	rules map[ruleID]*statsRule
}

type ruleID struct{ policy, rule string }

type statsRule struct {
	key   *dsl.Expr
	fixed *statsSeries // the series of a key that reads no request value
}

// NewEnvoyStats counts, from now on, the statistics of every ShouldRateLimit decision
// of s (see EnvoyStats), near_limit past nearLimitRatio of each limit
// (envoyproxy/ratelimit's NEAR_LIMIT_RATIO, 0.8 there by default), a number from 0 to 1.
// Register it with a prometheus.Registerer to export it. A Server has one EnvoyStats at
// most: a second is an error.
func NewEnvoyStats(s *Server, nearLimitRatio float64) (*EnvoyStats, error) {
	if !(nearLimitRatio >= 0 && nearLimitRatio <= 1) {
		return nil, fmt.Errorf("serve: near limit ratio %v: it is a fraction of the limit, from 0 to 1", nearLimitRatio)
	}
	c := &EnvoyStats{log: s.log, ratio: float32(nearLimitRatio), series: map[[3]string]*statsSeries{}}
	if !s.stats.CompareAndSwap(nil, c) {
		return nil, errors.New("serve: the server's statistics are already counted by an EnvoyStats")
	}
	if st := s.cur.Load(); st != nil {
		c.indexFor(st.cfg)
	}
	return c, nil
}

// Describe implements prometheus.Collector.
func (c *EnvoyStats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range statsFamilies {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *EnvoyStats) Collect(ch chan<- prometheus.Metric) {
	// A snapshot, so that a scrape does not hold back the decisions that add a series.
	c.mu.RLock()
	all := make([]*statsSeries, 0, len(c.series))
	for _, s := range c.series {
		all = append(all, s)
	}
	c.mu.RUnlock()
	for _, s := range all {
		for f, d := range statsFamilies {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(s.n[f].Load()), s.labels[:]...)
		}
	}
}

// countStats counts decision dec, of the descriptors ds, in s's EnvoyStats if it has one.
func (s *Server) countStats(ds []envoyconf.Request, dec *engine.Decision) {
	// The running policies: after a reload that raced with the decision, a rule's name
	// may find the new stats_key of a rule of that name.
	if c := s.stats.Load(); c != nil {
		c.count(s.cur.Load().cfg, ds, dec)
	}
}

// count counts dec, decided on the policies of cfg (see EnvoyStats).
func (c *EnvoyStats) count(cfg *dsl.Config, ds []envoyconf.Request, dec *engine.Decision) {
	idx := c.indexFor(cfg)
	if len(idx.rules) == 0 {
		return
	}
	for k := range dec.Rules {
		rr := &dec.Rules[k]
		ru := idx.rules[ruleID{rr.Policy, rr.Rule}]
		if ru == nil || rr.Cost <= 0 || rr.Request < 0 || rr.Request >= len(ds) {
			continue
		}
		s := ru.fixed
		if s == nil {
			name, err := ru.key.String(&ds[rr.Request])
			if err != nil {
				continue // the stats_key cannot be evaluated for this request: nothing to name
			}
			s = c.seriesOf(statsLabels(name))
		}
		hits := uint64(rr.Cost)
		var n statsCounts
		switch {
		case rr.Limit <= 0:
			n = statsCounts{total: hits}
		case dec.Source == engine.FromCache:
			n = tally(uint64(rr.Limit), uint64(rr.Limit), hits, c.ratio, rr.Shadow, true)
		default:
			n = tally(uint64(rr.Limit), before(dec, k), hits, c.ratio, rr.Shadow, false)
		}
		s.add(n)
	}
}

// before is the count of rule result k's counter before its descriptor's hits: Limit −
// Remaining, less what this decision charged it when it did (every result of its key
// charged together), plus the hits of the descriptors listed before it on the same key.
func before(dec *engine.Decision, k int) uint64 {
	rr := &dec.Rules[k]
	used := rr.Limit - min(max(rr.Remaining, 0), rr.Limit)
	// Remaining is after the charge when the decision charged the rule: a passing request
	// whose rule admitted it (a shadow rule over its limit is not charged).
	charged := dec.Allowed && rr.Allowed
	for j := range dec.Rules {
		o := &dec.Rules[j]
		if j == k || o.Key != rr.Key {
			continue
		}
		if j < k {
			used += o.Cost
		}
		if charged {
			used -= o.Cost
		}
	}
	if charged {
		used -= rr.Cost
	}
	return uint64(max(used, 0))
}

// statsCounts is what one descriptor adds to a series.
type statsCounts struct {
	total, within, near, over, shadow uint64
}

func (s *statsSeries) add(n statsCounts) {
	for f, v := range [...]uint64{n.total, n.within, n.near, n.over, n.shadow} {
		if v > 0 {
			s.n[f].Add(v)
		}
	}
}

// tally is envoyproxy/ratelimit's arithmetic for hits asked of a limit whose counter stood
// at before; cached: its local cache knew the limit was reached, and nothing was counted.
func tally(limit, before, hits uint64, ratio float32, shadow, cached bool) statsCounts {
	n := statsCounts{total: hits}
	after := before + hits
	near := uint64(math.Floor(float64(float32(limit) * ratio)))
	switch {
	case cached:
		n.over = hits
	case after <= limit:
		n.within = hits
		if after > near {
			n.near = after - max(near, before)
		}
	case before >= limit:
		n.over = hits
	default:
		n.over = after - limit
		n.near = limit - max(near, before)
	}
	if shadow {
		n.shadow = n.over
	}
	return n
}

// indexFor returns the index of cfg's rules, made once per configuration.
func (c *EnvoyStats) indexFor(cfg *dsl.Config) *statsIndex {
	if idx := c.index.Load(); idx != nil && idx.cfg == cfg {
		return idx
	}
	idx := &statsIndex{cfg: cfg, rules: map[ruleID]*statsRule{}}
	for _, p := range cfg.Policies {
		for _, ru := range p.Rules {
			if ru.StatsKey == nil {
				continue
			}
			r := &statsRule{key: ru.StatsKey}
			if len(ru.StatsKey.Attrs()) == 0 {
				if name, err := ru.StatsKey.String(engine.Attrs{}); err == nil {
					r.fixed = c.seriesOf(statsLabels(name))
				}
			}
			idx.rules[ruleID{p.Name, ru.Name}] = r
		}
	}
	c.index.Store(idx)
	return idx
}

// seriesOf returns the series of labels, made on first use; past MaxEnvoyStatsSeries, the
// series without labels.
func (c *EnvoyStats) seriesOf(labels [3]string) *statsSeries {
	c.mu.RLock()
	s := c.series[labels]
	c.mu.RUnlock()
	if s != nil {
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.series[labels]; s != nil {
		return s
	}
	if len(c.series) >= MaxEnvoyStatsSeries {
		if !c.full.Swap(true) {
			if c.log != nil {
				c.log.Warn("rlctl serve: envoyproxy/ratelimit statistics: past the series cap, further names are counted without labels",
					"max_series", MaxEnvoyStatsSeries, "domain", labels[0], "key1", labels[1], "key2", labels[2])
			}
		}
		labels = [3]string{}
		if s := c.series[labels]; s != nil {
			return s
		}
	}
	s = &statsSeries{labels: labels}
	c.series[labels] = s
	return s
}

// statsLabels are the labels envoyproxy/ratelimit's default statsd mapping gives the
// statistics named name: domain, key1 and key2, the first three '.'-separated parts of
// the sanitized name (key1 and key2 empty when it has fewer).
func statsLabels(name string) [3]string {
	var l [3]string
	rest := sanitizeStatName(name)
	for i := range l {
		part, tail, more := strings.Cut(rest, ".")
		l[i] = part
		if !more {
			break
		}
		rest = tail
	}
	return l
}

// sanitizeStatName is name as envoyproxy/ratelimit writes it in a statsd name
// (utils.SanitizeStatName): ':' and '|' become '_', then so do the dots of each dotted
// quad of digit runs of one to three digits, found from left to right (the first three
// runs exactly, the last its first three digits).
func sanitizeStatName(name string) string {
	var b []byte // a copy, once something changes
	for i := 0; i < len(name); i++ {
		if name[i] == ':' || name[i] == '|' {
			if b == nil {
				b = []byte(name)
			}
			b[i] = '_'
		}
	}
	for i := 0; i < len(name); {
		end := dottedQuad(name, i)
		if end < 0 {
			i++
			continue
		}
		if b == nil {
			b = []byte(name)
		}
		for j := i; j < end; j++ {
			if b[j] == '.' {
				b[j] = '_'
			}
		}
		i = end
	}
	if b == nil {
		return name
	}
	return string(b)
}

// dottedQuad returns where the dotted quad starting at s[i] ends, or -1 when none starts
// there.
func dottedQuad(s string, i int) int {
	for group := range 4 {
		n := 0
		for i+n < len(s) && s[i+n] >= '0' && s[i+n] <= '9' {
			n++
		}
		switch {
		case n == 0:
			return -1
		case group == 3:
			return i + min(n, 3)
		case n > 3 || i+n >= len(s) || s[i+n] != '.':
			return -1
		}
		i += n + 1
	}
	return -1
}
