package verify

import (
	"os"
	"strings"
	"testing"
)

// clientPolicy puts every built-in under clock = "client".
func clientPolicy(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("testdata/builtins.hcl")
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(src), "policy \"", "policy \"c_")
}

// Built-ins hold their limits for clients whose clocks disagree by the policy's skew
// (within their declared bound): a caller whose clock runs behind never moves a key's
// state back, and keys outlive the skew.
func TestBuiltinsHoldUnderClockSkew(t *testing.T) {
	t.Parallel()
	src := clientPolicy(t)
	src = strings.ReplaceAll(src, "{\n  rule", "{\n  clock = \"client\"\n  rule")
	cfg := parse(t, map[string]string{"p.hcl": src})
	f, err := Check(cfg, WithBudget(testBudget))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range f.Results {
		if r.Property != PropSkew {
			continue
		}
		n++
		if r.Status == Fail {
			t.Errorf("%s %s: %s %s %+v", r.Policy, r.Algorithm, r.Status, r.Detail, r.Counterexample)
		}
		if !strings.HasPrefix(r.Statement, "with client clocks up to 250ms apart") {
			t.Errorf("%s: statement %q", r.Policy, r.Statement)
		}
	}
	if n < 7 {
		t.Fatalf("%d client-clock results, want one per built-in:\n%+v", n, f.Results)
	}
}

// skewedBucket is lua/token_bucket.lua's refill with the classic client-clock bug: a
// caller whose clock is behind moves the bucket's time back, so callers that alternate
// earn the skew's tokens again on every switch.
const skewedBucket = `params = {'pos', 'pos', 'pos'}
local function level(key, now, full, rate)
  local st = call('HMGET', key, 'l', 't')
  local l, t = tonumber(st[1]), tonumber(st[2])
  if l == nil or t == nil then
    return full, now
  end
  if now > t then
    return math.min(full, l + (now - t) * rate), now
  end
  return l, now
end
function check(key, now, cost, p)
  local capacity, rate, period = p[1], p[2], p[3]
  local full = capacity * period
  local l, t = level(key, now, full, rate)
  if cost > capacity then
    return 0, idiv(l, period), -1, cdiv(full - l, rate), capacity
  end
  local c = cost * period
  if l >= c then
    local l2 = l - c
    local reset = cdiv(full - l2, rate)
    return 1, idiv(l2, period), 0, reset, capacity, {l2, t, reset}
  end
  return 0, idiv(l, period), cdiv(c - l, rate), cdiv(full - l, rate), capacity
end
function commit(key, w)
  call('HSET', key, 'l', w[1], 't', w[2])
  expire_us(key, w[3])
end`

const skewedPolicy = `algorithm "skewed_bucket" {
  source   = "p.lua"
  params   = { capacity = "count", rate = "rate" }
  commands = ["HMGET", "HSET", "PEXPIRE"]
  guarantee "rate" {
    burst = param.capacity
    rate  = param.rate
  }
}
policy "p" {
  clock      = "client"
  clock_skew = "1s"
  rule "r" {
    algorithm = "skewed_bucket"
    key       = "k"
    capacity  = 3
    rate      = "1/s"
  }
}`

// A bucket whose time moves back for a clock running behind passes every single-clock
// property and fails the client-clock one, with the clients' clocks in the
// counterexample; on a server-clock policy the property is not run.
func TestClientClocksCatchStateMovedBack(t *testing.T) {
	t.Parallel()
	cfg := parse(t, map[string]string{"p.hcl": skewedPolicy, "p.lua": skewedBucket})
	f, err := Check(cfg, WithBudget(testBudget))
	if err != nil {
		t.Fatal(err)
	}
	for _, prop := range []string{PropLimit, PropRetryAfter, PropAtomicity} {
		if r := find(t, f, "p", "r", prop); r.Status != Pass {
			t.Errorf("%s: %s %s", prop, r.Status, r.Detail)
		}
	}
	r := find(t, f, "p", "r", PropSkew)
	if r.Status != Fail || r.Counterexample == nil || !strings.Contains(r.Statement, "up to 1s apart") {
		t.Fatalf("client clocks: %s %s", r.Status, r.Detail)
	}
	clocks := map[string]bool{}
	for _, s := range r.Counterexample.Steps {
		if i := strings.Index(s.Request, "(client clock "); i >= 0 {
			clocks[s.Request[i:]] = true
		}
	}
	if len(clocks) < 2 || len(r.Counterexample.Steps) > 12 {
		t.Errorf("counterexample %+v", r.Counterexample.Steps)
	}

	server := parse(t, map[string]string{"p.hcl": strings.Replace(strings.Replace(skewedPolicy, `clock      = "client"`, "", 1), `clock_skew = "1s"`, "", 1), "p.lua": skewedBucket})
	f, err = Check(server, WithBudget(testBudget))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Results {
		if r.Property == PropSkew {
			t.Errorf("server clock policy has %s", r.Property)
		}
	}
}
