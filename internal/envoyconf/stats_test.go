package envoyconf

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/luahost"
)

// peerStatsKey is a model of the name envoyproxy/ratelimit's GetLimit
// (src/config/config_impl.go) gives the statistics of the limit it finds for a descriptor,
// "" when it finds none: the same walk as peerGetLimit, building as it goes the
// detailed_metric name (every entry's key_value), the value_to_metric name (each entry as
// the node it took: key_value, key_pattern or key, its value in place of a pattern or
// after a bare key when the node has value_to_metric, share_threshold's pattern first)
// and the share_threshold patterns of the entries matched by a wildcard, then choosing
// between them by the limit's detailed_metric. of gives each table entry's descriptor,
// for its flags.
func peerStatsKey(domains map[string]*peerNode, of map[*peerNode]*Descriptor, domain string, entries []peerEntry) string {
	dom := domains[domain]
	if dom == nil {
		return ""
	}
	table, prev := dom.children, dom
	var detailed, enhanced strings.Builder
	detailed.WriteString(domain)
	enhanced.WriteString(domain)
	share := map[int]string{}
	var limit *peerNode
	for i, e := range entries {
		fk := e.key + "_" + e.value
		detailed.WriteString("." + fk)
		next := table[fk]
		wild := ""
		if next == nil {
			for _, w := range prev.wild {
				if peerWildcardMatch(w.parts, fk) {
					next, wild = table[w.key], w.key
					break
				}
			}
		}
		byValue := next != nil
		if next == nil {
			next = table[e.key]
		}
		if wild != "" && next != nil && next.share && next.pattern != "" {
			share[i] = strings.TrimPrefix(next.pattern, e.key+"_")
		}
		enhanced.WriteString(".")
		if next == nil {
			enhanced.WriteString(e.key)
			break
		}
		v := ""
		switch d := of[next]; {
		case wild != "" && share[i] != "":
			v = share[i]
		case wild != "" && d.ValueToMetric:
			v = e.value
		case wild != "":
			v = strings.TrimPrefix(wild, e.key+"_")
		case byValue, d.ValueToMetric:
			v = e.value
		}
		enhanced.WriteString(e.key)
		if v != "" {
			enhanced.WriteString("_" + v)
		}
		if next.limit != nil && i == len(entries)-1 {
			limit = next
		}
		if len(next.children) == 0 {
			break
		}
		table, prev = next.children, next
	}
	switch {
	case limit == nil:
		return ""
	case !of[limit].DetailedMetric:
		return enhanced.String()
	case len(share) == 0:
		return detailed.String()
	}
	var b strings.Builder
	b.WriteString(domain)
	for i, e := range entries {
		b.WriteString("." + e.key)
		if p, ok := share[i]; ok {
			b.WriteString("_" + p)
		} else if e.value != "" {
			b.WriteString("_" + e.value)
		}
	}
	return b.String()
}

// peerDescriptors maps each node of peerLoad's tables to the descriptor it was loaded from.
func peerDescriptors(domains map[string]*peerNode, cfgs []*Config) map[*peerNode]*Descriptor {
	of := map[*peerNode]*Descriptor{}
	var walk func(n *peerNode, ds []*Descriptor)
	walk = func(n *peerNode, ds []*Descriptor) {
		for _, d := range ds {
			c := n.children[d.finalKey()]
			of[c] = d
			walk(c, d.Descriptors)
		}
	}
	for _, c := range cfgs {
		walk(domains[c.Domain], c.Descriptors)
	}
	return of
}

// applied is a translation loaded on an engine that peeks at which rule applies.
type applied struct {
	cfg *dsl.Config
	e   *engine.Engine
}

func load(t *testing.T, out []byte) *applied {
	t.Helper()
	cfg, diags := dsl.Parse(map[string][]byte{"import.hcl": out})
	if diags.HasErrors() {
		t.Fatalf("%v\n%s", diags, out)
	}
	for _, d := range diags {
		if strings.Contains(d.Detail, "stats_key") || d.Subject != nil && strings.Contains(string(d.Subject.SliceBytes(out)), "stats_key") {
			t.Errorf("a diagnostic on a stats_key: %v", d)
		}
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applied{cfg: cfg, e: engine.New(engine.NewLocal(luahost.New(luahost.WithClock(luahost.NewManualClock(time.Unix(1<<31, 0))))), plan)}
}

// statsKey is the rendered stats_key of the rule that applies to the descriptor, and
// whether one applies.
func (a *applied) statsKey(t *testing.T, domain string, es []peerEntry, override *peerLimit) (string, bool) {
	t.Helper()
	r := request(domain, es, override)
	dec, err := a.e.Peek(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if len(dec.Rules) == 0 {
		return "", false
	}
	if len(dec.Rules) > 1 {
		t.Fatalf("%d rules apply to %s %v", len(dec.Rules), domain, es)
	}
	for _, p := range a.cfg.Policies {
		for _, ru := range p.Rules {
			if p.Name == dec.Rules[0].Policy && ru.Name == dec.Rules[0].Rule {
				if ru.StatsKey == nil {
					t.Fatalf("rule %s.%s has no stats_key", p.Name, ru.Name)
				}
				s, err := ru.StatsKey.String(r)
				if err != nil {
					t.Fatalf("rule %s.%s stats_key: %v", p.Name, ru.Name, err)
				}
				return s, true
			}
		}
	}
	t.Fatalf("no rule %s.%s", dec.Rules[0].Policy, dec.Rules[0].Rule)
	return "", false
}

// TestStatsKey: the names envoyproxy/ratelimit's own tests (test/config/config_test.go)
// expect for detailed_metric, value_to_metric and share_threshold, each with the
// stats_key expression the translation writes for it.
func TestStatsKey(t *testing.T) {
	const rl = "rate_limit: {unit: second, requests_per_unit: 1}"
	for _, c := range []struct {
		name, yaml string // the descriptors, in YAML's flow style
		entries    []peerEntry
		expr, want string
	}{
		{"no flags", "{key: k1, descriptors: [{key: k2, " + rl + "}]}",
			[]peerEntry{{"k1", "X"}, {"k2", "Y"}}, `"d.k1.k2"`, "d.k1.k2"},
		{"value_to_metric on a key alone", "{key: k1, value_to_metric: true, descriptors: [{key: k2, " + rl + "}]}",
			[]peerEntry{{"k1", "A"}, {"k2", "foo"}}, `tostring("d.k1${request.k1 == "" ? "" : "_"}${request.k1}.k2")`, "d.k1_A.k2"},
		{"value_to_metric of an empty value", "{key: k1, value_to_metric: true, descriptors: [{key: k2, " + rl + "}]}",
			[]peerEntry{{"k1", ""}, {"k2", "foo"}}, "", "d.k1.k2"},
		{"value_to_metric mid level", "{key: k1, descriptors: [{key: k2, value_to_metric: true, descriptors: [{key: k3, " + rl + "}]}]}",
			[]peerEntry{{"k1", "X"}, {"k2", "Y"}, {"k3", "Z"}}, "", "d.k1.k2_Y.k3"},
		{"value_to_metric on a wildcard", "{key: user, value_to_metric: true, descriptors: [{key: action, value: read*, value_to_metric: true, descriptors: [{key: resource, " + rl + "}]}]}",
			[]peerEntry{{"user", "alice"}, {"action", "readfile"}, {"resource", "documents"}},
			`tostring("d.user${request.user == "" ? "" : "_"}${request.user}.action_${request.action}.resource")`, "d.user_alice.action_readfile.resource"},
		{"value_to_metric on a configured value", "{key: m, value: GET, value_to_metric: true, " + rl + "}",
			[]peerEntry{{"m", "GET"}}, `"d.m_GET"`, "d.m_GET"},
		{"value_to_metric, one value", "{key: wild, value: foo*, value_to_metric: true, " + rl + "}",
			[]peerEntry{{"wild", "foo1"}}, `"d.wild_${request.wild}"`, "d.wild_foo1"},
		{"detailed_metric", "{key: key-1, detailed_metric: true, " + rl + "}",
			[]peerEntry{{"key-1", "value-1"}}, `"d.key-1_${request.key-1}"`, "d.key-1_value-1"},
		{"detailed_metric, empty value", "{key: k, detailed_metric: true, " + rl + "}",
			[]peerEntry{{"k", ""}}, "", "d.k_"},
		{"detailed_metric nested", "{key: key-1, descriptors: [{key: key-2, detailed_metric: true, " + rl + "}]}",
			[]peerEntry{{"key-1", "value-1"}, {"key-2", "value-2"}}, `tostring("d.key-1_${request.key-1}.key-2_${request.key-2}")`, "d.key-1_value-1.key-2_value-2"},
		{"detailed_metric over value_to_metric", "{key: route, value_to_metric: true, descriptors: [{key: subject_id, detailed_metric: true, " + rl + "}]}",
			[]peerEntry{{"route", "draw"}, {"subject_id", "123"}}, "", "d.route_draw.subject_id_123"},
		{"share_threshold", "{key: files, value: files/*, share_threshold: true, " + rl + "}",
			[]peerEntry{{"files", "files/a.pdf"}}, `"d.files_files/*"`, "d.files_files/*"},
		{"share_threshold over value_to_metric", "{key: route, value: api/*, share_threshold: true, value_to_metric: true, descriptors: [{key: method, " + rl + "}]}",
			[]peerEntry{{"route", "api/v1"}, {"method", "GET"}}, `"d.route_api/*.method"`, "d.route_api/*.method"},
		{"share_threshold with detailed_metric", "{key: service, value: svc/*, share_threshold: true, descriptors: [{key: endpoint, detailed_metric: true, " + rl + "}]}",
			[]peerEntry{{"service", "svc/user"}, {"endpoint", "get"}},
			`tostring("d.service_svc/*.endpoint${request.endpoint == "" && request.service != "svc/*" ? "" : "_"}${request.endpoint}")`, "d.service_svc/*.endpoint_get"},
		{"share_threshold with detailed_metric, empty value", "{key: service, value: svc/*, share_threshold: true, descriptors: [{key: endpoint, detailed_metric: true, " + rl + "}]}",
			[]peerEntry{{"service", "svc/user"}, {"endpoint", ""}}, "", "d.service_svc/*.endpoint"},
		{"share_threshold matched by its own text, detailed_metric, empty value", "{key: service, value: svc/*, share_threshold: true, descriptors: [{key: endpoint, detailed_metric: true, " + rl + "}]}",
			[]peerEntry{{"service", "svc/*"}, {"endpoint", ""}}, "", "d.service_svc/*.endpoint_"},
		{"a key ending in $ before a value", "{key: k$, value_to_metric: true, descriptors: [{key: j, value_to_metric: true, " + rl + "}]}",
			[]peerEntry{{"k$", "a.b"}, {"j", "%3A"}}, `tostring("d.k${"$"}${request["k$"] == "" ? "" : "_"}${request["k$"]}.j${request.j == "" ? "" : "_"}${request.j}")`, "d.k$_a.b.j_%3A"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse("c.yaml", []byte("domain: d\ndescriptors: ["+c.yaml+"]\n"))
			if err != nil {
				t.Fatal(err)
			}
			out, err := Translate([]*Config{cfg}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if c.expr != "" && !strings.Contains(string(out), "stats_key = "+c.expr+"\n") {
				t.Errorf("the translation does not write stats_key = %s:\n%s", c.expr, out)
			}
			got, ok := load(t, out).statsKey(t, "d", c.entries, nil)
			if !ok || got != c.want {
				t.Errorf("stats_key renders %q (a rule applies: %v), want %q\n%s", got, ok, c.want, out)
			}
			domains := peerLoad([]*Config{cfg})
			if p := peerStatsKey(domains, peerDescriptors(domains, []*Config{cfg}), "d", c.entries); p != c.want {
				t.Errorf("the model of envoyproxy/ratelimit names it %q, want %q", p, c.want)
			}
		})
	}
}

// peerDescriptorKey is envoyproxy/ratelimit's descriptorKey (src/config/config_impl.go):
// the name of an override's limit.
func peerDescriptorKey(domain string, es []peerEntry) string {
	key := ""
	for _, e := range es {
		if key != "" {
			key += "."
		}
		key += e.key
		if e.value != "" {
			key += "_" + e.value
		}
	}
	return domain + "." + key
}

// TestStatsKeyMatchesPeer is the differential test of the statistics' names: on the random
// configurations of TestTranslateMatchesPeer, with detailed_metric and value_to_metric set
// at random as well, and random descriptors (some values holding '.', '%', '$' or a
// multi-byte character), the stats_key of the rule rlctl applies renders exactly the name
// envoyproxy/ratelimit gives the limit it finds (peerStatsKey).
func TestStatsKeyMatchesPeer(t *testing.T) {
	const descriptors = 40
	extra := []string{"a.b", "1.2.3.4", "x%y", "$", "é", "x*y.z"}
	for seed := range peerConfigs(200) {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 29))}
		cs := g.configs()
		var flag func(ds []*Descriptor)
		flag = func(ds []*Descriptor) {
			for _, d := range ds {
				d.DetailedMetric = g.rng.IntN(3) == 0
				d.ValueToMetric = g.rng.IntN(3) == 0
				flag(d.Descriptors)
			}
		}
		for _, c := range cs {
			flag(c.Descriptors)
		}
		out, err := Translate(cs, Options{MergeDomains: true})
		if err != nil {
			if _, ok := err.(*Error); ok {
				continue
			}
			t.Fatalf("seed %d: %v", seed, err)
		}
		a := load(t, out)
		peer := peerLoad(cs)
		of := peerDescriptors(peer, cs)
		for range descriptors {
			domain, es := g.descriptor(cs)
			for i := range es {
				if g.rng.IntN(6) == 0 {
					es[i].value = g.pick(extra)
				}
			}
			want := ""
			override := g.override()
			if override != nil && len(es) == 0 {
				continue // a descriptor of no entries: not one Envoy sends
			}
			_, known := peer[domain]
			switch l := peerGetLimit(peer, domain, es); {
			case override != nil && known:
				want = peerDescriptorKey(domain, es) // an override's limit is named by its descriptor
			case override != nil: // no limit in a domain the configuration does not know
			case l != nil && !l.unlimited:
				want = peerStatsKey(peer, of, domain, es)
			}
			got, ok := a.statsKey(t, domain, es, override)
			if ok != (want != "") || got != want {
				t.Fatalf("seed %d: descriptor %s %v: stats_key %q (a rule applies: %v); envoyproxy/ratelimit names it %q\n%s", seed, domain, es, got, ok, want, out)
			}
		}
	}
}
