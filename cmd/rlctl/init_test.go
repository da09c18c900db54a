package main

import (
	"testing"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/verify"
)

// TestDocsStarterVerifies: the policy rlctl init writes, the first a new user reads, loads
// with no diagnostic and passes verify at its default budget with no failure and no
// warning, as the docs' policies do (the init scripts run it at a smaller budget). Named
// TestDocs… so that make proofs runs it where the race detector skips it.
func TestDocsStarterVerifies(t *testing.T) {
	if raceEnabled {
		t.Skip("runs verify at its default budget; checked without the race detector (make proofs)")
	}
	cfg, diags := dsl.Parse(map[string][]byte{starterName: starter})
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	f, err := verify.Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Results) == 0 {
		t.Fatal("verify checked nothing")
	}
	for _, r := range f.Results {
		if r.Status == verify.Fail || r.Status == verify.Warn {
			t.Errorf("%s %s %s: %s %s", r.Policy, r.Rule, r.Property, r.Status, r.Detail)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"policy.hcl", "policy.hcl"},
		{"conf/limits-v2.hcl", "conf/limits-v2.hcl"},
		{"my policy.hcl", "'my policy.hcl'"},
		{"it's.hcl", `'it'\''s.hcl'`},
		{"$HOME.hcl", "'$HOME.hcl'"},
	} {
		if got := shellQuote(tc.in); got != tc.want {
			t.Errorf("shellQuote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
