package verify

import (
	"testing"
)

// TestSimulateLeases: eight instances serving tenants' quotas from leases decide almost
// every request in process, call Redis at most once in 20 decisions, and admit no more
// than a tenant's quota in any of its windows.
func TestSimulateLeases(t *testing.T) {
	t.Parallel()
	cfg := load(t, "../policies/hot_key.hcl")
	r, err := Simulate(cfg, cfg.Scenarios[0])
	if err != nil {
		t.Fatal(err)
	}
	l := r.Leases
	if l == nil || l.Decisions != r.Requests || l.InProcess*10 < l.Decisions*9 || l.Calls*20 > l.Decisions {
		t.Fatalf("leases %+v for %d requests: want nearly all in process, a call per 20 decisions at most", l, r.Requests)
	}
	minute := int64(60_000_000)
	per := map[int64]int64{}
	for _, at := range r.allowedAt["globex"] {
		per[(at-Epoch.UnixMicro())/minute]++
	}
	if len(per) < 2 {
		t.Fatalf("globex was allowed in %d windows: the scenario should span two", len(per))
	}
	for w, n := range per {
		if n > 15000 {
			t.Errorf("globex was allowed %d in minute %d, above its quota of 15000", n, w)
		}
	}
}

// TestCheckLeases: verify's lease property holds the example's leased rule.
func TestCheckLeases(t *testing.T) {
	t.Parallel()
	f, err := Check(load(t, "../policies/hot_key.hcl"), WithBudget(1500))
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range f.Results {
		if res.Property == PropLease {
			if res.Status != Pass {
				t.Fatalf("lease: %s %s", res.Status, res.Detail)
			}
			return
		}
	}
	t.Fatal("verify checked no lease property")
}
