package verify

import (
	"context"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// A simulation decides exactly as the same requests, at the same instants, decided by the
// engine on a real redis-server: same verdicts, same remaining, retry-after and
// reset-after for every rule. The policy reads the client's clock, so Redis decides on the
// virtual time too; its keys are made persistent by every call (see persisting), since
// Redis expires them in real time, which runs slower or faster than the simulation's.
func TestSimulationMatchesRedis(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	cfg := parse(t, map[string]string{"p.hcl": `
policy "every" {
  clock = "client"
  rule "log" {
    algorithm = "sliding_log"
    key       = request.user
    limit     = 6
    window    = "10s"
  }
  rule "window" {
    algorithm = "sliding_window"
    key       = request.user
    limit     = 5
    window    = "7s"
  }
  rule "fixed" {
    algorithm = "fixed_window"
    key       = request.team
    limit     = 40
    window    = "5s"
  }
  rule "bucket" {
    algorithm = "token_bucket"
    key       = request.team
    capacity  = 30
    rate      = "15/s"
    cost      = 2
  }
  rule "leaky" {
    algorithm = "leaky_bucket"
    key       = request.user
    capacity  = 4
    rate      = "3/2s"
  }
  rule "gcra" {
    algorithm = "gcra"
    key       = request.team
    rate      = "2/s"
    burst     = 5
    shadow    = true
  }
  rule "slots" {
    algorithm = "concurrency"
    key       = "all"
    max       = 30
    ttl       = "3s"
  }
}

scenario "mix" {
  policy   = "every"
  duration = "2m"
  seed     = 3
  traffic "steady" {
    clients = 4
    request = { user = "s${client}", team = "t${client % 2}" }
    rate    = "1/s"
  }
  traffic "bursty" {
    clients = 3
    request = { user = "b${client}", team = "t${client % 2}" }
    rate    = "3/s"
    pattern = "burst"
    burst   = 6
  }
  traffic "random" {
    clients = 5
    request = { user = "r${client}", team = "t${client % 3}" }
    rate    = "2/s"
    pattern = "poisson"
  }
  traffic "edge" {
    request = { user = "e", team = "t9" }
    rate    = "10/5s"
    pattern = "edge"
  }
  expect {
    some_denied = denied("bursty") > 0
  }
}`})
	type rec struct {
		at    time.Time
		attrs map[string]string
		d     *engine.Decision
	}
	var recs []rec
	if _, err := Simulate(cfg, cfg.Scenarios[0], WithObserver(func(at time.Time, _ string, attrs map[string]string, d *engine.Decision) {
		recs = append(recs, rec{at, attrs, d})
	})); err != nil {
		t.Fatal(err)
	}
	plan, err := engine.Compile(cfg)
	if err != nil {
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
		if d.Allowed {
			if err := eng.Release(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(recs) < 1000 || denied == 0 {
		t.Fatalf("%d requests, %d denied: the scenario tests too little", len(recs), denied)
	}
	t.Logf("%d requests, %d denied, identical on luahost and redis-server", len(recs), denied)
}

// persisting runs each EVALSHA in MULTI/EXEC followed by a PERSIST of its keys, so no key
// expires by Redis's real-time clock: the transaction runs at one frozen instant, with
// nothing in between.
type persisting struct{ *redis.Client }

func (p persisting) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	var cmd *redis.Cmd
	_, err := p.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		cmd = pipe.EvalSha(ctx, sha, keys, args...)
		for _, k := range keys {
			pipe.Persist(ctx, k)
		}
		return nil
	})
	if err != nil && cmd.Err() == nil {
		cmd.SetErr(err)
	}
	return cmd
}

// sameDecision compares everything but the keys' lease ids.
func sameDecision(a, b *engine.Decision) bool {
	if a.Allowed != b.Allowed || a.Decider != b.Decider || a.RetryAfter != b.RetryAfter || len(a.Rules) != len(b.Rules) {
		return false
	}
	for i := range a.Rules {
		if !reflect.DeepEqual(a.Rules[i], b.Rules[i]) {
			return false
		}
	}
	return true
}
