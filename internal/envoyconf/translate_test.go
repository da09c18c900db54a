package envoyconf

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
)

// gen makes random configurations and descriptors for the differential test. Keys have no
// '_' and no '*': with those, envoyproxy/ratelimit's key_value lookup aliases distinct
// entries (documented as a difference), which rlctl does not reproduce.
type gen struct {
	rng *rand.Rand
}

var (
	genKeys        = []string{"a", "b", "c", "a", "b", "domain", "entry.2", "k.x", `k\y`, "k=y", "entries", "limit.window", strings.Repeat("long", 20)}
	genConfValues  = []string{"", "", "", "x", "y", "xy", "x:y", "%", "${x}", "x*", "*y", "x*y", "*", "*x*", "x**", "*:*", ""}
	genEntryValues = []string{"", "x", "y", "xy", "xxy", "yx", "x*", "*", "x:y", "x:", ":y", "%3A", "${x}", "xzy", "zzz", "*y"}
	genUnits       = []string{"SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "YEAR"}
)

func (g *gen) pick(xs []string) string { return xs[g.rng.IntN(len(xs))] }

func (g *gen) level(depth int) []*Descriptor {
	var out []*Descriptor
	seen := map[string]bool{}
	for range 1 + g.rng.IntN(4) {
		d := &Descriptor{Key: g.pick(genKeys), Value: g.pick(genConfValues)}
		if seen[d.finalKey()] {
			continue
		}
		seen[d.finalKey()] = true
		if g.rng.IntN(10) < 7 {
			rl := &RateLimit{Unit: g.pick(genUnits), RequestsPerUnit: uint32(g.rng.IntN(4)) /* 0 blocks */, Name: g.pick([]string{"", "", "n1", "n2", "n3"})}
			if g.rng.IntN(10) == 0 {
				rl.Unlimited, rl.Unit = true, ""
			}
			if g.rng.IntN(4) == 0 { // on an unlimited limit too: its replaces apply
				for _, n := range []string{"n1", "n2", "n3"} {
					if n != rl.Name && g.rng.IntN(2) == 0 {
						rl.Replaces = append(rl.Replaces, n)
					}
				}
			}
			d.RateLimit = rl
			d.ShadowMode = g.rng.IntN(7) == 0
		}
		d.ShareThreshold = d.wildcard() && g.rng.IntN(3) == 0
		if depth < 3 && g.rng.IntN(10) < 4 {
			d.Descriptors = g.level(depth + 1)
		}
		out = append(out, d)
	}
	return out
}

// configs is one or two domains, a domain sometimes in two files (merged).
func (g *gen) configs() []*Config {
	var cs []*Config
	for i := range 1 + g.rng.IntN(3) {
		domain := []string{"d1", "d2", "d1"}[i]
		cs = append(cs, &Config{Name: fmt.Sprintf("f%d.yaml", i), Domain: domain, Descriptors: g.level(1)})
	}
	return cs
}

// value is an entry value for node d: its own, one its wildcard matches, or another.
func (g *gen) value(d *Descriptor) string {
	switch g.rng.IntN(4) {
	case 0:
		return d.Value
	case 1:
		var b strings.Builder
		for _, c := range d.Value {
			if c == '*' {
				b.WriteString(g.pick([]string{"", "x", "y", "zz", "*"}))
			} else {
				b.WriteRune(c)
			}
		}
		return b.String()
	}
	return g.pick(genEntryValues)
}

// descriptor follows a random path of a configuration, or makes one up.
func (g *gen) descriptor(cs []*Config) (string, []peerEntry) {
	c := cs[g.rng.IntN(len(cs))]
	domain := c.Domain
	if g.rng.IntN(10) == 0 {
		domain = "d3"
	}
	var es []peerEntry
	level := c.Descriptors
	for len(level) > 0 && (len(es) == 0 || g.rng.IntN(3) > 0) {
		d := level[g.rng.IntN(len(level))]
		es = append(es, peerEntry{key: d.Key, value: g.value(d)})
		level = d.Descriptors
		if g.rng.IntN(8) == 0 {
			es = append(es, peerEntry{key: g.pick(genKeys), value: g.pick(genEntryValues)})
		}
	}
	return domain, es
}

func request(domain string, es []peerEntry, override *peerLimit) *Request {
	d := &ratelimitv3.RateLimitDescriptor{}
	if override != nil {
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: override.rpu, Unit: unitEnum[override.unit]}
	}
	for _, e := range es {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: e.key, Value: e.value})
	}
	r := NewRequest(domain, d)
	return &r
}

// unitEnum is the value of a unit in the override's enum.
var unitEnum = map[string]typev3.RateLimitUnit{"SECOND": 1, "MINUTE": 2, "HOUR": 3, "DAY": 4, "WEEK": 7, "MONTH": 5, "YEAR": 6}

// override is a random limit override, or nil.
func (g *gen) override() *peerLimit {
	if g.rng.IntN(6) > 0 {
		return nil
	}
	return &peerLimit{rpu: uint32(g.rng.IntN(4)), unit: g.pick(genUnits)}
}

// peerConfigs is how many random configurations a differential test against the peer
// draws: n, a fifth of it under the race detector (five times slower there). make test's
// differential stage runs them all without it.
func peerConfigs(n uint64) uint64 {
	if raceEnabled {
		return n / 5
	}
	return n
}

// TestTranslateMatchesPeer is the differential test of the translation: on random
// configurations (nesting, exact and open values, wildcards anywhere, repeated and reserved
// keys, empty values, shadow, unlimited, share_threshold, merged domains) and random
// descriptors (some with a limit override), the translated policy applies exactly the limit
// envoyproxy/ratelimit's lookup (peerGetLimit) gives, with its amount, window and shadow
// mode, and two descriptors share a counter in rlctl exactly when they share a cache key
// in envoyproxy/ratelimit; and each decision is what that limit and partition give. The
// one difference by design: an override counts apart from the configuration's limits
// (envoyproxy/ratelimit's cache key does not say whether a limit was an override).
func TestTranslateMatchesPeer(t *testing.T) {
	const descriptors = 60
	ctx := context.Background()
	for seed := range peerConfigs(300) {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 28))}
		cs := g.configs()
		out, err := Translate(cs, Options{MergeDomains: true})
		if err != nil {
			if _, ok := err.(*Error); ok {
				continue // a merge that duplicates a composite key: refused as the peer does
			}
			t.Fatalf("seed %d: %v", seed, err)
		}
		cfg, diags := dsl.Parse(map[string][]byte{"import.hcl": out})
		if diags.HasErrors() {
			t.Fatalf("seed %d: %v\n%s", seed, diags, out)
		}
		plan, err := engine.Compile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		e := engine.New(engine.NewLocal(luahost.New(luahost.WithClock(luahost.NewManualClock(time.Unix(1<<31, 0))))), plan)
		peer := peerLoad(cs)
		toRlctl, toPeer := map[string]string{}, map[string]string{}
		used := map[string]uint32{}
		for i := range descriptors {
			domain, es := g.descriptor(cs)
			override := g.override()
			want := peerGetLimit(peer, domain, es)
			if override != nil && peer[domain] != nil {
				want = override
			}
			unlimited := want != nil && want.unlimited
			if unlimited {
				want = nil
			}
			r := request(domain, es, override)
			dec, err := e.Allow(ctx, r)
			if err != nil {
				t.Fatalf("seed %d descriptor %d %v: %v\n%s", seed, i, es, err, out)
			}
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d descriptor %s %v: %s\n%s", seed, domain, es, fmt.Sprintf(format, args...), out)
			}
			if dec.Unlimited(0) != unlimited {
				fail("envoyproxy/ratelimit's limit is unlimited: %v; rlctl's decision: %v", unlimited, dec.Unlimited(0))
			}
			if want == nil {
				if len(dec.Rules) != 0 || !dec.Allowed {
					fail("envoyproxy/ratelimit applies no limit; rlctl applied %+v", dec.Rules)
				}
				continue
			}
			if len(dec.Rules) != 1 {
				fail("envoyproxy/ratelimit applies %d per %s; rlctl applied %d rules %+v", want.rpu, want.unit, len(dec.Rules), dec.Rules)
			}
			got := dec.Rules[0]
			window, _ := time.ParseDuration(strings.NewReplacer("365d", "8760h", "30d", "720h", "7d", "168h", "1d", "24h").Replace(Units[want.unit]))
			if got.Limit != int64(want.rpu) || got.Window != window || got.Shadow != want.shadow {
				fail("envoyproxy/ratelimit applies %d per %s (shadow %v); rlctl rule %s: %d per %v (shadow %v)", want.rpu, want.unit, want.shadow, got.Rule, got.Limit, got.Window, got.Shadow)
			}
			pk := peerCacheKey(domain, es, want)
			if want == override {
				pk = "override " + pk
			}
			if k, ok := toRlctl[pk]; ok && k != got.Key {
				fail("envoyproxy/ratelimit counts it in %q with an earlier descriptor; rlctl in %q, not the earlier's %q", pk, got.Key, k)
			}
			if k, ok := toPeer[got.Key]; ok && k != pk {
				fail("rlctl counts it in %q with an earlier descriptor; envoyproxy/ratelimit apart (%q, the earlier's %q)", got.Key, pk, k)
			}
			toRlctl[pk], toPeer[got.Key] = got.Key, pk
			allowed := used[pk] < want.rpu
			if allowed {
				used[pk]++
			}
			if dec.Allowed != (allowed || want.shadow) {
				fail("with %d of %d used, rlctl allowed = %v", used[pk], want.rpu, dec.Allowed)
			}
		}
	}
}

// TestTranslateReplacesMatchesPeer: for requests of several descriptors, the rules the
// translation applies to each descriptor are the limits envoyproxy/ratelimit checks for
// it once the request's replaces are applied (constructLimitsToCheck).
func TestTranslateReplacesMatchesPeer(t *testing.T) {
	ctx := context.Background()
	checked := 0
	for seed := range peerConfigs(300) {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 30))}
		cs := g.configs()
		out, err := Translate(cs, Options{MergeDomains: true})
		if err != nil {
			if _, ok := err.(*Error); ok {
				continue
			}
			t.Fatalf("seed %d: %v", seed, err)
		}
		cfg, diags := dsl.Parse(map[string][]byte{"import.hcl": out})
		if diags.HasErrors() {
			t.Fatalf("seed %d: %v\n%s", seed, diags, out)
		}
		plan, err := engine.Compile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		e := engine.New(engine.NewLocal(luahost.New()), plan)
		peer := peerLoad(cs)
		for range 30 {
			domain, first := g.descriptor(cs)
			ds := [][]peerEntry{first}
			for range g.rng.IntN(3) {
				ds = append(ds, func() []peerEntry { _, es := g.descriptor(cs); return es }())
			}
			want := peerLimitsToCheck(peer, domain, ds)
			rs := make([]dsl.Request, len(ds))
			for i, es := range ds {
				rs[i] = request(domain, es, nil)
			}
			dec, err := e.AllowAll(ctx, rs, make([]int64, len(ds)))
			if err != nil {
				t.Fatalf("seed %d %v: %v\n%s", seed, ds, err, out)
			}
			got := make([]int, len(ds))
			for _, r := range dec.Rules {
				got[r.Request]++
				if w := want[r.Request]; w == nil || r.Limit != int64(w.rpu) {
					t.Fatalf("seed %d %s %v: descriptor %d: rlctl applies %s (%d), envoyproxy/ratelimit %+v\n%s", seed, domain, ds, r.Request, r.Rule, r.Limit, w, out)
				}
			}
			for i, w := range want {
				if (w != nil) != (got[i] == 1) {
					t.Fatalf("seed %d %s %v: descriptor %d: rlctl applies %d rules, envoyproxy/ratelimit %+v\n%s", seed, domain, ds, i, got[i], w, out)
				}
				if w != nil && len(ds) > 1 {
					checked++
				}
			}
		}
	}
	t.Logf("%d limits checked in requests of several descriptors", checked)
}
