package envoyconf

import (
	"strconv"

	ratelimitconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
)

// FromProto is the configuration an xDS RateLimitConfig resource holds, named name (the
// resource's name, for errors). It is not checked: Translate checks it as it checks a
// parsed file, and with no line numbers its errors name the resource alone.
//
// Every field of the resource is read, as envoyproxy/ratelimit reads it. A unit is its
// enum name, "SECOND" to "YEAR"; UNKNOWN, which the resource has when no unit was set, is
// "", as a file without unit. Units and fields that later versions of the proto add are
// read by their wire numbers even where the Go types here lack them: WEEK (7), MONTH (5)
// and YEAR (6), and a descriptor's quota_mode (field 7), so a management server sending
// them is translated, or refused, as the same YAML would be. Any other unknown unit is
// its number, which Check refuses. A descriptor's metadata (field 8) is ignored, as
// Parse ignores it.
func FromProto(name string, rc *ratelimitconfv3.RateLimitConfig) *Config {
	return &Config{Name: name, Domain: rc.GetDomain(), Descriptors: descriptorsFromProto(rc.GetDescriptors())}
}

func descriptorsFromProto(pbs []*ratelimitconfv3.RateLimitDescriptor) []*Descriptor {
	if len(pbs) == 0 {
		return nil
	}
	ds := make([]*Descriptor, len(pbs))
	for i, pb := range pbs {
		ds[i] = &Descriptor{
			Key:            pb.GetKey(),
			Value:          pb.GetValue(),
			RateLimit:      rateLimitFromProto(pb.GetRateLimit()),
			Descriptors:    descriptorsFromProto(pb.GetDescriptors()),
			ShadowMode:     pb.GetShadowMode(),
			DetailedMetric: pb.GetDetailedMetric(),
			QuotaMode:      unknownBool(pb.ProtoReflect().GetUnknown(), quotaModeField),
		}
	}
	return ds
}

func rateLimitFromProto(pb *ratelimitconfv3.RateLimitPolicy) *RateLimit {
	if pb == nil {
		return nil
	}
	rl := &RateLimit{
		Unit:            protoUnits[int32(pb.GetUnit())],
		RequestsPerUnit: pb.GetRequestsPerUnit(),
		Unlimited:       pb.GetUnlimited(),
		Name:            pb.GetName(),
	}
	if _, ok := protoUnits[int32(pb.GetUnit())]; !ok {
		rl.Unit = strconv.Itoa(int(pb.GetUnit()))
	}
	for _, r := range pb.GetReplaces() {
		rl.Replaces = append(rl.Replaces, r.GetName())
	}
	return rl
}

// protoUnits are the RateLimitUnit enum's numbers, those the Go types name and those
// later versions add (WEEK, MONTH, YEAR), as Units names them.
var protoUnits = map[int32]string{
	int32(ratelimitconfv3.RateLimitUnit_UNKNOWN): "",
	int32(ratelimitconfv3.RateLimitUnit_SECOND):  "SECOND",
	int32(ratelimitconfv3.RateLimitUnit_MINUTE):  "MINUTE",
	int32(ratelimitconfv3.RateLimitUnit_HOUR):    "HOUR",
	int32(ratelimitconfv3.RateLimitUnit_DAY):     "DAY",
	5:                                            "MONTH",
	6:                                            "YEAR",
	7:                                            "WEEK",
}

// quotaModeField is RateLimitDescriptor's quota_mode in the versions of the proto that
// have it.
const quotaModeField protowire.Number = 7

// unknownBool is the value of the bool field num among a message's unknown fields: the
// last one given wins, as the proto decoder has it; false when absent or unreadable.
func unknownBool(b []byte, num protowire.Number) bool {
	v := false
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return v
		}
		b = b[l:]
		if n == num && typ == protowire.VarintType {
			x, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return v
			}
			v, b = x != 0, b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return v
		}
		b = b[l:]
	}
	return v
}
