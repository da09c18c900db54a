package dsl

import (
	"strings"
	"testing"
)

// TestLeaseAttributes: lease_size and lease_for load on a fixed_window rule of constant
// parameters, and every rule a lease cannot serve exactly is refused with the reason.
func TestLeaseAttributes(t *testing.T) {
	rule := func(body string) string {
		return "policy \"p\" {\n  rule \"r\" {\n    key = \"all\"\n" + body + "\n  }\n}\n"
	}
	cfg, diags := Parse(map[string][]byte{"p.hcl": []byte(rule(`algorithm = "fixed_window"
    limit = 1000
    window = "1m"
    lease_size = 50
    lease_for = "5s"`))})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if r := cfg.Policies[0].Rules[0]; r.LeaseSize != 50 || r.LeaseFor != 5_000_000 {
		t.Fatalf("lease %d for %dµs, want 50 for 5s", r.LeaseSize, r.LeaseFor)
	}
	for name, c := range map[string]struct{ body, want string }{
		"a bucket": {`algorithm = "gcra"
    rate = "10/s"
    burst = 10
    lease_size = 5`, "p.hcl:7,18-19: Rule cannot be leased"},
		"above the limit": {`algorithm = "fixed_window"
    limit = 10
    window = "1m"
    lease_size = 11`, "is above the rule's limit"},
		"shadow": {`algorithm = "fixed_window"
    limit = 10
    window = "1m"
    shadow = true
    lease_size = 5`, "is a shadow rule"},
		"a penalty box": {`algorithm = "fixed_window"
    limit = 10
    window = "1m"
    block_for = "1m"
    lease_size = 5`, "has a penalty box"},
		"a limit per request": {`algorithm = "fixed_window"
    limit = request.plan == "pro" ? 100 : 10
    window = "1m"
    lease_size = 5`, "parameters known only per request"},
		"no lease": {`algorithm = "fixed_window"
    limit = 10
    window = "1m"
    lease_for = "5s"`, "lease_for without lease"},
		"zero": {`algorithm = "fixed_window"
    limit = 10
    window = "1m"
    lease_size = 0`, "Invalid lease_size"},
		"concurrency": {`algorithm = "concurrency"
    max = 10
    ttl = "1m"
    lease_size = 5`, "uses concurrency"},
	} {
		_, diags := Parse(map[string][]byte{"p.hcl": []byte(rule(c.body))})
		if !diags.HasErrors() || !strings.Contains(diags.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, diags, c.want)
		}
	}
}
