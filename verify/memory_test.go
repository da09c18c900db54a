package verify

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// botnetPolicy limits logins per address (gcra, 5 an hour); the scenario's botnet sends
// from 20,000 addresses, each a few times, while the simulated Redis holds what engine
// sets (none, or a maxmemory and an eviction policy).
func botnetPolicy(engineBlock string) string {
	return fmt.Sprintf(`
policy "login" {
  rule "per_ip" {
    algorithm = "gcra"
    key       = request.ip
    rate      = "5/h"
    burst     = 5
  }
}

scenario "botnet" {
  policy   = "login"
  duration = "10m"
  %s
  traffic "botnet" {
    clients = 20000
    request = { ip = "10.${floor(client / 256)}.${client %% 256}.1" }
    rate    = "1/m"
  }
  expect {
    held = allowed_fraction("botnet") < 0.9
  }
}
`, engineBlock)
}

// TestSimulateMemoryCap: a scenario's engine block gives the simulated Redis a maxmemory.
// With allkeys-lru, keys are evicted and the clients they belonged to start over, so more
// of the botnet gets through than without a cap; with noeviction, writes past the cap are
// refused and the policy decides by on_error. The report says which happened.
func TestSimulateMemoryCap(t *testing.T) {
	if raceEnabled {
		t.Skip("three simulations of a botnet, one goroutine each, forty seconds under the race detector: run by make test's proofs stage without it")
	}
	run := func(engineBlock string) *Report {
		t.Helper()
		cfg := parse(t, map[string]string{"p.hcl": botnetPolicy(engineBlock)})
		r, err := Simulate(cfg, cfg.Scenarios[0], WithSeed(1))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	free := run("")
	lru := run(`engine {
    max_memory = "256KiB"
    eviction   = "allkeys-lru"
  }`)
	full := run(`engine {
    max_memory = "256KiB"
  }`)
	botnet := func(r *Report) *TrafficReport { return r.traffic("botnet") }
	if free.Engine != nil {
		t.Fatalf("no engine block, yet an engine report: %+v", free.Engine)
	}
	if e := lru.Engine; e == nil || e.MaxMemory != 256<<10 || e.Eviction != "allkeys-lru" || e.Evicted == 0 || e.Memory > 256<<10+4<<10 { // as Redis, the last write may pass the cap by a key
		t.Fatalf("allkeys-lru: %+v", lru.Engine)
	}
	if botnet(lru).Allowed <= botnet(free).Allowed {
		t.Errorf("evicting keys let %d botnet requests through, no more than %d without a cap", botnet(lru).Allowed, botnet(free).Allowed)
	}
	if e := full.Engine; e == nil || e.Eviction != "noeviction" || e.Evicted != 0 {
		t.Fatalf("noeviction: %+v", full.Engine)
	}
	if botnet(full).Decided.FailOpen == 0 {
		t.Errorf("noeviction refused no write: %+v", botnet(full).Decided)
	}
	var text bytes.Buffer
	if err := lru.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "redis: maxmemory 256 KiB (allkeys-lru)") || !strings.Contains(text.String(), "keys evicted: each a client whose history the limiter forgot") {
		t.Errorf("the report does not say what the cap did:\n%s", text.String())
	}
}
