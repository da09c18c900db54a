package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/luahost"
)

func TestRenderKey(t *testing.T) {
	long := strings.Repeat("x", 200)
	cases := []struct {
		name, shard, key string
		sharded          bool
		want             string
	}{
		{"plain", "", "203.0.113.7", false, "rl:api:per_ip:gcra:203.0.113.7"},
		{"sharded", "acme", "u1", true, "rl:{acme}:api:per_ip:gcra:u1"},
		{"empty shard", "", "u1", true, "rl:{-}:api:per_ip:gcra:u1"},
		{"braces in key", "", "a}{b", false, "rl:api:per_ip:gcra:a%7D%7Bb"},
		{"braces in shard", "x}y", "k", true, "rl:{x%7Dy}:api:per_ip:gcra:k"},
		{"percent and space", "", "50% off", false, "rl:api:per_ip:gcra:50%25%20off"},
		{"binary", "", "\x00\xff", false, "rl:api:per_ip:gcra:%00%FF"},
		{"hash sign", "#1", "#k", true, "rl:{%231}:api:per_ip:gcra:%23k"},
		{"dash shard", "-", "u1", true, "rl:{%2D}:api:per_ip:gcra:u1"},
		{"dashes and colons kept", "a-b", "t:u-1", true, "rl:{a-b}:api:per_ip:gcra:t:u-1"},
		{"long", "", long, false, "rl:api:per_ip:gcra:#aa20c23e3201834050679e1d88941b9a6fed0557c9a705cb2c315e2e63fd486d"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := string(renderKey(nil, "api", "per_ip", "gcra", c.sharded, c.shard, c.key, false))
			if got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestAlgorithmTag: a built-in's keys name it; a plugin's name it and a hash of its source,
// so an edited plugin, or an algorithm that only borrows a built-in's name, never reads
// the keys of another; and the engine writes the tag where the layout says.
func TestAlgorithmTag(t *testing.T) {
	ident := regexp.MustCompile(`^[a-z][a-z0-9_]*(-[0-9a-f]{12})?$`)
	for _, b := range algorithms.Builtin() {
		if got := AlgorithmTag(b); got != b.Name {
			t.Errorf("built-in %s: tag %q", b.Name, got)
		}
	}
	cfg, diags := dsl.Load("../policies/simple_gcra.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	plugin := cfg.Plugins[0]
	sum := sha256.Sum256([]byte(plugin.Source))
	if got, want := AlgorithmTag(plugin), "simple_gcra-"+hex.EncodeToString(sum[:])[:12]; got != want {
		t.Fatalf("plugin tag %q, want %q", got, want)
	}
	edited := *plugin
	edited.Source += "\n-- a comment is an edit too\n"
	gcra, _ := algorithms.Lookup("gcra")
	borrowed := *gcra // same name, not the built-in
	tags := map[string]string{}
	for _, a := range []*algorithms.Algorithm{plugin, &edited, gcra, &borrowed} {
		tag := AlgorithmTag(a)
		if !ident.MatchString(tag) {
			t.Errorf("%s: tag %q is not a name the key layout can recover", a.Name, tag)
		}
		if prev, ok := tags[tag]; ok {
			t.Errorf("%s and %s share the tag %q", prev, a.Name, tag)
		}
		tags[tag] = a.Name
	}

	plan, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(NewLocal(luahost.New()), plan).Allow(context.Background(), Attrs{"path": "/v1/export", "user": "alice"})
	if err != nil || len(d.Rules) != 1 {
		t.Fatalf("%+v %v", d, err)
	}
	if want := "rl:exports:per_user:" + AlgorithmTag(plugin) + ":alice"; d.Rules[0].Key != want {
		t.Fatalf("key %q, want %q", d.Rules[0].Key, want)
	}
}

// TestHostileKeysKeepTheirSlot: whatever a request's values hold, a sharded policy's keys
// all hash to the slot of the shard value, and an unsharded key never gains a hash tag.
func TestHostileKeysKeepTheirSlot(t *testing.T) {
	hostile := []string{"", "{", "}", "{}", "}{", "a{b}c", "{x}", "%7B", "\x00{\xff}", strings.Repeat("{", 300)}
	for _, shard := range hostile {
		want := Slot(string(renderKey(nil, "p", "r1", "gcra", true, shard, "k", false)))
		for _, key := range hostile {
			k := string(renderKey(nil, "p", "r2", "gcra", true, shard, key, false))
			if got := Slot(k); got != want {
				t.Fatalf("shard %q key %q: slot %d, want %d (%q)", shard, key, got, want, k)
			}
			plain := string(renderKey(nil, "p", "r", "gcra", false, "", key, false))
			if strings.ContainsAny(plain, "{}") {
				t.Fatalf("unsharded key %q gained a brace: %q", key, plain)
			}
			// A rule with further keys: they share its slot, sharded or not.
			for _, sharded := range []bool{false, true} {
				own := string(renderKey(nil, "p", "r3", "w-0123456789ab", sharded, shard, key, true))
				if got, want := Slot(own+":prev"), Slot(own); got != want {
					t.Fatalf("sharded %v, key %q: further key %q in slot %d, the rule's %q in %d", sharded, key, own+":prev", got, own, want)
				}
			}
		}
	}
}

// TestFurtherKeysCannotBeForged: no value of a rule's key renders to the further key of
// another value, such as a penalty box's "<key>:!box" or a plugin's "<key>:prev", whether
// the policy is sharded or not: a client cannot reach, reset or overwrite another client's
// block, or its own, by what it sends.
func TestFurtherKeysCannotBeForged(t *testing.T) {
	for _, sharded := range []bool{false, true} {
		for _, v := range []string{"a", "", "a}", "{a}"} {
			for _, name := range []string{"!box", "prev"} {
				further := string(renderKey(nil, "p", "r", "gcra", sharded, "s", v, true)) + ":" + name
				for _, forged := range []string{v + ":" + name, v + "}:" + name, v + "%7D:" + name} {
					if k := string(renderKey(nil, "p", "r", "gcra", sharded, "s", forged, true)); k == further {
						t.Fatalf("sharded %v: the value %q renders to %q, the further key %q of the value %q", sharded, forged, k, name, v)
					}
				}
			}
		}
	}
	if got, want := string(renderKey(nil, "api", "per_ip", "gcra", true, "acme", "u1", true)), "rl:{acme}:{api:per_ip:gcra:u1}"; got != want {
		t.Fatalf("a sharded rule with further keys: %q, want %q", got, want)
	}
}

// TestHashFormCannotBeForged: a short value that spells the hash form of a long one does
// not share its key, nor does any value starting with '#'.
func TestHashFormCannotBeForged(t *testing.T) {
	long := strings.Repeat("x", 200)
	sum := sha256.Sum256([]byte(long))
	forged := "#" + hex.EncodeToString(sum[:])
	for _, sharded := range []bool{false, true} {
		victim := string(renderKey(nil, "p", "r", "gcra", sharded, long, long, false))
		attacker := string(renderKey(nil, "p", "r", "gcra", sharded, forged, forged, false))
		if victim == attacker {
			t.Fatalf("sharded %v: %q renders as the hash of a long value: %q", sharded, forged, victim)
		}
	}
	for _, v := range []string{forged, "#", "#x", strings.Repeat("#", 42)} {
		if got := string(appendPart(nil, v)); strings.HasPrefix(got, "#") {
			t.Errorf("%q renders as %q, which starts like a hash", v, got)
		}
	}
}

// TestShardDashIsNotTheEmptyShard: the empty shard is written "-", so the shard "-" must be
// written otherwise.
func TestShardDashIsNotTheEmptyShard(t *testing.T) {
	empty := string(renderKey(nil, "p", "r", "gcra", true, "", "k", false))
	dash := string(renderKey(nil, "p", "r", "gcra", true, "-", "k", false))
	if empty == dash {
		t.Fatalf("shards \"\" and \"-\" share the key %q", empty)
	}
}

// FuzzRenderKey: rendering is injective in (shard, key), every rendered key parses back to
// its values (the escapes decode, the hash form is the SHA-256 of a value too long to
// escape), no brace comes from a value, and a sharded key lands in the slot of its tag.
// The seed corpus is in testdata/fuzz/FuzzRenderKey.
func FuzzRenderKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, shard1, key1, shard2, key2 string) {
		for _, sharded := range []bool{false, true} {
			a := string(renderKey(nil, "pol", "rule", "gcra", sharded, shard1, key1, false))
			b := string(renderKey(nil, "pol", "rule", "gcra", sharded, shard2, key2, false))
			checkKey(t, a, sharded, shard1, key1)
			checkKey(t, b, sharded, shard2, key2)
			same := key1 == key2 && (!sharded || shard1 == shard2)
			if (a == b) != same {
				t.Fatalf("sharded %v: (%q, %q) renders %q, (%q, %q) renders %q", sharded, shard1, key1, a, shard2, key2, b)
			}
		}
	})
}

// checkKey parses k, the key rendered for shard and key in policy "pol" rule "rule" of gcra, and
// fails t unless it holds exactly those values.
func checkKey(t *testing.T, k string, sharded bool, shard, key string) {
	t.Helper()
	rest, ok := strings.CutPrefix(k, keyPrefix)
	if !ok {
		t.Fatalf("%q lacks the prefix %q", k, keyPrefix)
	}
	braces := 0
	if sharded {
		braces = 1
		tag, after, ok := strings.Cut(strings.TrimPrefix(rest, "{"), "}")
		if !ok || !strings.HasPrefix(rest, "{") || !strings.HasPrefix(after, ":") {
			t.Fatalf("%q: no hash tag after the prefix", k)
		}
		switch {
		case shard == "" && tag != emptyShard:
			t.Fatalf("%q: empty shard written %q, want %q", k, tag, emptyShard)
		case shard != "":
			checkPart(t, k, tag, shard)
		}
		if got, want := Slot(k), Slot(tag); tag == "" || got != want {
			t.Fatalf("%q: slot %d, want %d, the slot of {%s}", k, got, want, tag)
		}
		rest = after[1:]
	}
	if n, m := strings.Count(k, "{"), strings.Count(k, "}"); n != braces || m != braces {
		t.Fatalf("%q holds %d '{' and %d '}', want %d of each", k, n, m, braces)
	}
	part, ok := strings.CutPrefix(rest, "pol:rule:gcra:")
	if !ok {
		t.Fatalf("%q: policy, rule and algorithm not where expected", k)
	}
	checkPart(t, k, part, key)
}

// checkPart fails t unless part, from key k, is the rendering of v: its escapes decode to
// v, or it is the hash form and v is too long to escape.
func checkPart(t *testing.T, k, part, v string) {
	t.Helper()
	if len(part) > maxKeyPart {
		t.Fatalf("%q: part %q longer than %d bytes", k, part, maxKeyPart)
	}
	if strings.HasPrefix(part, "#") {
		sum := sha256.Sum256([]byte(v))
		if part != "#"+hex.EncodeToString(sum[:]) || len(escapeAll(v)) <= maxKeyPart {
			t.Fatalf("%q: %q is not the hash form of %q", k, part, v)
		}
		return
	}
	var raw []byte
	for i := 0; i < len(part); i++ {
		c := part[i]
		switch {
		case c == '%':
			if i+2 >= len(part) || !isUpperHex(part[i+1]) || !isUpperHex(part[i+2]) {
				t.Fatalf("%q: bad escape in %q", k, part)
			}
			b, _ := hex.DecodeString(part[i+1 : i+3])
			raw = append(raw, b[0])
			i += 2
		case needsEscape(c):
			t.Fatalf("%q: unescaped %q in %q", k, c, part)
		default:
			raw = append(raw, c)
		}
	}
	if string(raw) != v {
		t.Fatalf("%q: part %q decodes to %q, want %q", k, part, raw, v)
	}
}

func isUpperHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }

// escapeAll is v with every byte that needs it escaped, whatever its length.
func escapeAll(v string) string {
	var b []byte
	for i := 0; i < len(v); i++ {
		if needsEscape(v[i]) {
			b = appendEscape(b, v[i])
		} else {
			b = append(b, v[i])
		}
	}
	return string(b)
}

func TestSlotMatchesRedisCluster(t *testing.T) {
	// Values from the Redis Cluster specification; TestClusterCompensation also compares
	// Slot with a real node's CLUSTER KEYSLOT on hostile keys.
	for key, want := range map[string]int{
		"123456789":              12739,
		"foo":                    12182,
		"{user1000}.a":           Slot("user1000"),
		"rl:{acme}:api:r:gcra:k": Slot("acme"),
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestWindow(t *testing.T) {
	cases := map[string]struct {
		params []int64
		want   time.Duration
	}{
		"fixed_window": {[]int64{100, 60_000_000}, time.Minute},
		"token_bucket": {[]int64{600, 10, 1_000_000}, time.Minute},
		"gcra":         {[]int64{10, 1_000_000, 100}, 10 * time.Second},
		"concurrency":  {[]int64{10, 30_000_000, 0}, 0},
	}
	for name, c := range cases {
		a, _ := algorithms.Lookup(name)
		if got := window(&algorithms.Rule{Algorithm: a, Params: c.params}); got != c.want {
			t.Errorf("%s%v: window %v, want %v", name, c.params, got, c.want)
		}
	}
}

// A plan keeps the window of every rule whose parameters are constant, the same as a
// decision would derive, so decisions do not evaluate guarantees per request; a rule with
// a per-request parameter has none kept.
func TestPlanKeepsConstantWindows(t *testing.T) {
	cfg, diags := dsl.Parse(map[string][]byte{"p.hcl": []byte(`policy "p" {
  rule "c" {
    algorithm = "gcra"
    key       = "k"
    rate      = "20/h"
    burst     = 5
  }
  rule "v" {
    algorithm = "sliding_log"
    key       = "k2"
    limit     = request.plan == "pro" ? 50 : 5
    window    = "1m"
  }
}`)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	plan, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, v := cfg.Policies[0].Rules[0], cfg.Policies[0].Rules[1]
	if got := plan.windows[c]; got != 15*time.Minute {
		t.Errorf("constant rule's window %v, want 15m (5 cells at 20/h)", got)
	}
	if _, kept := plan.windows[v]; kept {
		t.Error("a window was kept for a rule with a per-request limit")
	}
}
