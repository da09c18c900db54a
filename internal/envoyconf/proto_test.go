package envoyconf

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	ratelimitconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// protoYAML and protoConfig are one configuration, every field the resource has set
// somewhere, as a file and as an xDS resource.
const protoYAML = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3, name: per_ip}
    detailed_metric: true
  - key: generic_key
    value: api
    descriptors:
      - key: path
        value: "/v1/*"
        rate_limit: {unit: second, requests_per_unit: 10}
      - key: path
        rate_limit: {unit: hour, requests_per_unit: 100}
        shadow_mode: true
  - key: tenant
    rate_limit: {unlimited: true}
  - key: plan
    value: gold
    rate_limit: {unit: day, requests_per_unit: 7}
`

var protoConfig = &ratelimitconfv3.RateLimitConfig{
	Name:   "edge.yaml",
	Domain: "edge",
	Descriptors: []*ratelimitconfv3.RateLimitDescriptor{
		{Key: "remote_address", RateLimit: &ratelimitconfv3.RateLimitPolicy{Unit: ratelimitconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: 3, Name: "per_ip"}, DetailedMetric: true},
		{Key: "generic_key", Value: "api", Descriptors: []*ratelimitconfv3.RateLimitDescriptor{
			{Key: "path", Value: "/v1/*", RateLimit: &ratelimitconfv3.RateLimitPolicy{Unit: ratelimitconfv3.RateLimitUnit_SECOND, RequestsPerUnit: 10}},
			{Key: "path", RateLimit: &ratelimitconfv3.RateLimitPolicy{Unit: ratelimitconfv3.RateLimitUnit_HOUR, RequestsPerUnit: 100}, ShadowMode: true},
		}},
		{Key: "tenant", RateLimit: &ratelimitconfv3.RateLimitPolicy{Unlimited: true}},
		{Key: "plan", Value: "gold", RateLimit: &ratelimitconfv3.RateLimitPolicy{Unit: ratelimitconfv3.RateLimitUnit_DAY, RequestsPerUnit: 7}},
	},
}

// TestFromProto: a resource reads as the same configuration in YAML parses, and so
// translates into the same policy file, byte for byte.
func TestFromProto(t *testing.T) {
	fromYAML, err := Parse("edge.yaml", []byte(protoYAML))
	if err != nil {
		t.Fatal(err)
	}
	got := FromProto(protoConfig.GetName(), protoConfig)
	if !reflect.DeepEqual(noPos(got), noPos(fromYAML)) {
		t.Errorf("FromProto:\n%s\nParse:\n%s", dump(got), dump(fromYAML))
	}
	want, err := Translate([]*Config{fromYAML}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Translate([]*Config{got}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(want) {
		t.Errorf("the resource translates to\n%s\nthe file to\n%s", out, want)
	}

	// replaces, which the translation refuses, is read too.
	rc := &ratelimitconfv3.RateLimitConfig{Domain: "d", Descriptors: []*ratelimitconfv3.RateLimitDescriptor{{Key: "k", RateLimit: &ratelimitconfv3.RateLimitPolicy{
		Unit: ratelimitconfv3.RateLimitUnit_SECOND, RequestsPerUnit: 1, Name: "a", Replaces: []*ratelimitconfv3.RateLimitReplace{{Name: "b"}, {Name: "c"}},
	}}}}
	if r := FromProto("r", rc).Descriptors[0].RateLimit.Replaces; !reflect.DeepEqual(r, []string{"b", "c"}) {
		t.Errorf("replaces %q", r)
	}
}

// TestFromProtoUnits: each unit of the enum, those later versions of the proto add
// included, is the unit a file names; UNKNOWN (no unit set) and numbers no version has
// are refused by Translate as a file's missing or invalid unit is, naming the resource.
func TestFromProtoUnits(t *testing.T) {
	for _, c := range []struct {
		num  int32
		unit string
		err  string
	}{
		{0, "", `rlc-1: invalid rate limit unit "". The units are second`},
		{1, "SECOND", ""}, {2, "MINUTE", ""}, {3, "HOUR", ""}, {4, "DAY", ""},
		{5, "MONTH", ""}, {6, "YEAR", ""}, {7, "WEEK", ""},
		{8, "8", `rlc-1: invalid rate limit unit "8"`},
	} {
		rc := &ratelimitconfv3.RateLimitConfig{Domain: "d", Descriptors: []*ratelimitconfv3.RateLimitDescriptor{{
			Key: "k", RateLimit: &ratelimitconfv3.RateLimitPolicy{Unit: ratelimitconfv3.RateLimitUnit(c.num), RequestsPerUnit: 1},
		}}}
		cfg := FromProto("rlc-1", roundTrip(t, rc))
		if u := cfg.Descriptors[0].RateLimit.Unit; u != c.unit {
			t.Errorf("unit %d: %q, want %q", c.num, u, c.unit)
		}
		out, err := Translate([]*Config{cfg}, Options{})
		switch {
		case c.err == "" && err != nil:
			t.Errorf("unit %d: %v", c.num, err)
		case c.err == "" && !strings.Contains(string(out), `window    = "`+Units[c.unit]+`"`):
			t.Errorf("unit %d: no window %s in\n%s", c.num, Units[c.unit], out)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("unit %d: %v, want %q", c.num, err, c.err)
		}
	}
}

// TestFromProtoLaterFields: a descriptor's quota_mode, which the Go types here lack, is
// read from the wire, so the resource translates (or is refused) as the same YAML does
// rather than as a plain rate limit; metadata is ignored.
func TestFromProtoLaterFields(t *testing.T) {
	d := &ratelimitconfv3.RateLimitDescriptor{Key: "k", RateLimit: &ratelimitconfv3.RateLimitPolicy{Unit: ratelimitconfv3.RateLimitUnit_SECOND, RequestsPerUnit: 1}}
	quota := protowire.AppendVarint(protowire.AppendTag(nil, 7, protowire.VarintType), 1)
	metadata := protowire.AppendBytes(protowire.AppendTag(nil, 8, protowire.BytesType), []byte{0x0a, 0x00})
	for _, c := range []struct {
		name  string
		extra []byte
		quota bool
	}{
		{"none", nil, false},
		{"quota_mode", quota, true},
		{"quota_mode false", protowire.AppendVarint(protowire.AppendTag(nil, 7, protowire.VarintType), 0), false},
		{"metadata", metadata, false},
		{"metadata then quota_mode", append(slices.Clone(metadata), quota...), true},
	} {
		b, err := proto.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var got ratelimitconfv3.RateLimitDescriptor
		if err := proto.Unmarshal(append(b, c.extra...), &got); err != nil {
			t.Fatal(err)
		}
		cfg := FromProto("rlc", &ratelimitconfv3.RateLimitConfig{Domain: "d", Descriptors: []*ratelimitconfv3.RateLimitDescriptor{&got}})
		if q := cfg.Descriptors[0].QuotaMode; q != c.quota {
			t.Errorf("%s: quota_mode %v, want %v", c.name, q, c.quota)
		}
		yaml := fmt.Sprintf("domain: d\ndescriptors:\n  - key: k\n    quota_mode: %v\n    rate_limit: {unit: second, requests_per_unit: 1}\n", c.quota)
		fromYAML, err := Parse("rlc", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		want, werr := Translate([]*Config{fromYAML}, Options{})
		out, err := Translate([]*Config{cfg}, Options{})
		var e, we *Error
		switch {
		case (err == nil) != (werr == nil):
			t.Errorf("%s: the resource translates with %v, the YAML with %v", c.name, err, werr)
		case err != nil && (!errors.As(err, &e) || !errors.As(werr, &we) || e.Msg != we.Msg):
			t.Errorf("%s: the resource is refused with %v, the YAML with %v", c.name, err, werr)
		case string(out) != string(want):
			t.Errorf("%s: the resource translates to\n%s\nthe YAML to\n%s", c.name, out, want)
		}
	}
}

// roundTrip is rc as a management server's bytes read back.
func roundTrip(t *testing.T, rc *ratelimitconfv3.RateLimitConfig) *ratelimitconfv3.RateLimitConfig {
	t.Helper()
	b, err := proto.Marshal(rc)
	if err != nil {
		t.Fatal(err)
	}
	var out ratelimitconfv3.RateLimitConfig
	if err := proto.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// noPos is c with its positions cleared (a resource has none).
func noPos(c *Config) *Config {
	out := *c
	out.Pos = Pos{}
	out.Descriptors = noPosLevel(c.Descriptors)
	return &out
}

func noPosLevel(ds []*Descriptor) []*Descriptor {
	if ds == nil {
		return nil
	}
	out := make([]*Descriptor, len(ds))
	for i, d := range ds {
		e := *d
		e.Pos = Pos{}
		e.Descriptors = noPosLevel(d.Descriptors)
		if d.RateLimit != nil {
			rl := *d.RateLimit
			rl.Pos = Pos{}
			e.RateLimit = &rl
		}
		out[i] = &e
	}
	return out
}

func dump(c *Config) string {
	var b strings.Builder
	var level func(ds []*Descriptor, indent string)
	level = func(ds []*Descriptor, indent string) {
		for _, d := range ds {
			fmt.Fprintf(&b, "%s%+v", indent, *d)
			if d.RateLimit != nil {
				fmt.Fprintf(&b, " %+v", *d.RateLimit)
			}
			b.WriteString("\n")
			level(d.Descriptors, indent+"  ")
		}
	}
	b.WriteString(c.Domain + "\n")
	level(c.Descriptors, "  ")
	return b.String()
}
