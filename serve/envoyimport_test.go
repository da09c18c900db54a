package serve

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/envoyconf"
	"github.com/rlctl/rlctl/luahost"
)

// engineFor compiles a policy file's text onto a fresh embedded backend.
func engineFor(t *testing.T, src []byte) *engine.Engine {
	t.Helper()
	cfg, diags := dsl.Parse(map[string][]byte{"p.hcl": src})
	if diags.HasErrors() {
		t.Fatalf("%v\n%s", diags, src)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return engine.New(engine.NewLocal(luahost.New(luahost.WithClock(luahost.NewManualClock(testEpoch)))), plan)
}

// TestImportEnvoyDecidesAsTheTranslation: the docs' configuration, imported, decides every
// descriptor as the policy translated by hand (edge.hcl) does, on the same random
// sequence of Envoy requests.
func TestImportEnvoyDecidesAsTheTranslation(t *testing.T) {
	src, err := os.ReadFile("testdata/envoy/ratelimit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := ImportEnvoy("ratelimit.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	hand, err := os.ReadFile("testdata/envoy/edge.hcl")
	if err != nil {
		t.Fatal(err)
	}
	imported, byHand := engineFor(t, out), engineFor(t, hand)
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	for i := range 400 {
		var ds []envoyconf.Request
		for range 1 + rng.IntN(3) {
			switch rng.IntN(5) {
			case 0:
				ds = append(ds, envoyDesc("edge", "remote_address", fmt.Sprint("10.0.0.", rng.IntN(4))))
			case 1:
				ds = append(ds, envoyDesc("edge", "generic_key", "api", "path", fmt.Sprint("/p", rng.IntN(3))))
			case 2:
				ds = append(ds, envoyDesc("edge", "generic_key", "web", "path", "/p0"))
			case 3:
				ds = append(ds, envoyDesc("edge", "tenant", fmt.Sprint("t", rng.IntN(2))))
			default:
				ds = append(ds, envoyDesc("other", "remote_address", "10.0.0.1"))
			}
		}
		rs := make([]dsl.Request, len(ds))
		for j := range ds {
			rs[j] = &ds[j]
		}
		a, err := imported.AllowAll(ctx, rs, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := byHand.AllowAll(ctx, rs, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a.Allowed != b.Allowed || len(a.Rules) != len(b.Rules) {
			t.Fatalf("request %d %v: imported %+v, by hand %+v\n%s", i, ds, a, b, out)
		}
		for k := range a.Rules {
			x, y := a.Rules[k], b.Rules[k]
			if x.Allowed != y.Allowed || x.Remaining != y.Remaining || x.Limit != y.Limit || x.Shadow != y.Shadow || x.Request != y.Request {
				t.Fatalf("request %d rule %d: imported %+v, by hand %+v", i, k, x, y)
			}
		}
	}
}

func envoyDesc(domain string, kv ...string) envoyconf.Request {
	return envoyconf.NewRequest(domain, desc(kv...))
}

// TestImportEnvoyPrecedence: envoyproxy/ratelimit matches a key's value first, then a
// wildcard of it, then the key alone; a descriptor applies only at the end of its path;
// unlimited is no limit but still takes its value from the others.
func TestImportEnvoyPrecedence(t *testing.T) {
	src := `
domain: api
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: remote_address
    value: 10.0.0.1
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: remote_address
    value: "192.168.*"
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: remote_address
    value: 127.0.0.1
    rate_limit: {unlimited: true}
  - key: user
    descriptors:
      - key: path
        value: /upload
        rate_limit: {unit: hour, requests_per_unit: 1}
`
	out, err := ImportEnvoy("api.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	e := engineFor(t, out)
	ctx := context.Background()
	allowed := func(ds ...envoyconf.Request) int {
		n := 0
		for range 10 {
			rs := make([]dsl.Request, len(ds))
			for j := range ds {
				rs[j] = &ds[j]
			}
			d, err := e.AllowAll(ctx, rs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		name string
		ds   []envoyconf.Request
		want int
	}{
		{"any address", []envoyconf.Request{envoyDesc("api", "remote_address", "10.9.9.9")}, 2},
		{"its own value", []envoyconf.Request{envoyDesc("api", "remote_address", "10.0.0.1")}, 5},
		{"a wildcard", []envoyconf.Request{envoyDesc("api", "remote_address", "192.168.4.4")}, 3},
		{"another under the same wildcard counts apart", []envoyconf.Request{envoyDesc("api", "remote_address", "192.168.4.5")}, 3},
		{"unlimited", []envoyconf.Request{envoyDesc("api", "remote_address", "127.0.0.1")}, 10},
		{"the end of a path", []envoyconf.Request{envoyDesc("api", "user", "u1", "path", "/upload")}, 1},
		{"a path's first entry alone has no limit", []envoyconf.Request{envoyDesc("api", "user", "u1")}, 10},
		{"another path value", []envoyconf.Request{envoyDesc("api", "user", "u1", "path", "/download")}, 10},
		{"another domain", []envoyconf.Request{envoyDesc("web", "remote_address", "10.9.9.8")}, 10},
	} {
		if got := allowed(c.ds...); got != c.want {
			t.Errorf("%s: %d of 10 allowed, want %d\n%s", c.name, got, c.want, out)
		}
	}
	for name, bad := range map[string]string{
		"no domain":        "descriptors: []\n",
		"an unknown field": "domain: a\ndescriptors:\n  - key: k\n    rate_limits: {}\n",
		"a unit":           "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n",
		"quota mode":       "domain: a\ndescriptors:\n  - key: k\n    quota_mode: true\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
		"not yaml":         "domain: [",
		"a key-less entry": "domain: a\ndescriptors:\n  - value: v\n",
	} {
		if _, err := ImportEnvoy("bad.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
			t.Errorf("%s: %v, want an error naming the file", name, err)
		}
	}
}

// testEpoch is the embedded backend's clock in these tests: it never moves, so fixed
// windows never roll over mid-test.
var testEpoch = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
