package verify

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// Every example policy with a plugin algorithm (docs/plugins.md writes one) decides on a
// real redis-server exactly as in simulation: its scenarios' requests, replayed at the
// same instants, get the same verdicts, remaining, retry-after and reset-after. The
// policies read the client's clock here, so that Redis decides on the virtual time too,
// and persisting keeps Redis's real-time expiry out of it (see TestSimulationMatchesRedis).
func TestPluginPoliciesMatchRedis(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	paths, _ := filepath.Glob("../policies/*.hcl")
	checked := 0
	for _, path := range paths {
		cfg := load(t, path)
		if len(cfg.Plugins) == 0 {
			continue
		}
		for _, p := range cfg.Policies {
			p.Clock = dsl.ClockClient
		}
		plan, err := engine.Compile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range cfg.Scenarios {
			t.Run(filepath.Base(path)+"/"+s.Name, func(t *testing.T) {
				type rec struct {
					at    time.Time
					attrs map[string]string
					d     *engine.Decision
				}
				var recs []rec
				if _, err := Simulate(cfg, s, WithObserver(func(at time.Time, _ string, attrs map[string]string, d *engine.Decision) {
					recs = append(recs, rec{at, attrs, d})
				})); err != nil {
					t.Fatal(err)
				}
				if err := rdb.FlushDB(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				clock := luahost.NewManualClock(Epoch)
				eng := engine.New(engine.NewRedis(persisting{rdb}), plan, engine.WithClock(clock.Now), engine.WithTimeout(5*time.Second))
				denied := 0
				for i, rc := range recs {
					clock.Set(rc.at)
					d, err := eng.Allow(ctx, engine.Attrs(rc.attrs))
					if err != nil {
						t.Fatal(err)
					}
					if d.Source != engine.FromBackend {
						t.Fatalf("request %d: source %v: %v", i+1, d.Source, d.Err)
					}
					if !sameDecision(rc.d, d) {
						t.Fatalf("request %d at %s %v: simulation %+v, redis %+v", i+1, rc.at.Sub(Epoch), rc.attrs, rc.d, d)
					}
					if !d.Allowed {
						denied++
					}
				}
				if len(recs) < 100 || denied == 0 {
					t.Fatalf("%d requests, %d denied: the scenario tests too little", len(recs), denied)
				}
				checked++
				t.Logf("%d requests, %d denied, identical on luahost and redis-server", len(recs), denied)
			})
		}
	}
	if checked == 0 {
		t.Fatal("no example policy with a plugin")
	}
}
