package verify

import (
	"testing"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
)

// TestSettleProperty: the settle property holds on every algorithm that carries a debt,
// and catches an overdraft that is not owed, a window that forgets a debt at its end (as
// aligned and as calendar periods), and a debt's retry-after told early.
func TestSettleProperty(t *testing.T) {
	cfg := load(t, "testdata/settle/settle.hcl")
	bugs := []scriptBug{
		{"an overdraft not owed", "        c.owe(KEYS[r], now, cost, c[3])\n", "\n"},
		{"an aligned window forgets a debt at its end", "n = d - (win - io - 1) * l\n", "n = 0\n"},
		{"a calendar period forgets a debt at its end", "  local left = d - (index(win, p) - io - 1) * l\n", "  local left = 0\n"},
		{"a debt's retry-after a window early", "local after = io + 1 + ceil(nonneg(d + cost - LIMIT) / l)\n", "local after = io + ceil(nonneg(d + cost - LIMIT) / l)\n"},
	}
	checkMutants(t, cfg, func(c *checker, p *dsl.Policy, ru *dsl.Rule, w []int64, i int) (Result, error) {
		if !settles(ru) {
			t.Fatalf("%s: verify does not check its settlements", ru.Name)
		}
		return c.settleProp(p, ru, w, i, "")
	}, bugs)
}

// TestSettleCatchesAnUncappedRefund: a refund of the whole difference, however late, gives
// back capacity later requests used; the settle property fails on it.
func TestSettleCatchesAnUncappedRefund(t *testing.T) {
	defer func(f func(*algorithms.Rule, int64, int64, int64) int64) { refundable = f }(refundable)
	refundable = func(_ *algorithms.Rule, want, _, _ int64) int64 { return want }
	cfg := load(t, "testdata/settle/settle.hcl")
	c, err := newChecker(cfg, options{seed: DefaultSeed, budget: 3000, clients: DefaultClients})
	if err != nil {
		t.Fatal(err)
	}
	caught := 0
	for _, p := range cfg.Policies {
		for i, ru := range p.Rules {
			w, err := ru.Wire(nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := c.settleProp(p, ru, w, i, "")
			if err != nil {
				t.Fatal(err)
			}
			if r.Status == Fail {
				caught++
				t.Logf("%s: %s", ru.Name, r.Detail)
			}
		}
	}
	if caught == 0 {
		t.Error("no rule's settle property failed with refunds uncapped")
	}
}
