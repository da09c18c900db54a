package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/internal/syncbuf"
	"github.com/rlctl/rlctl/luahost"
)

// reloadFixture is a Server on one policy file, with what it logged and the results its
// Reloaded hook was told.
type reloadFixture struct {
	srv     *Server
	path    string
	backend engine.Backend
	clock   *luahost.ManualClock
	logs    *syncbuf.Buffer
	results []bool
}

// newBackend is the named backend ("redis": the shared redis-server; "embedded"), on clock.
func newBackend(t *testing.T, name string, clock *luahost.ManualClock) engine.Backend {
	t.Helper()
	if name == "redis" {
		return engine.NewRedis(redistest.Shared(t).Client(t))
	}
	return engine.NewLocal(luahost.New(luahost.WithClock(clock)))
}

// startReload writes src to a policy file and serves it on the named backend; c's Paths,
// Backend, Logger, Reloaded, Engine and Clock are filled in.
func startReload(t *testing.T, backend, src string, c Config) (*reloadFixture, error) {
	t.Helper()
	f := &reloadFixture{path: filepath.Join(t.TempDir(), "p.hcl"), clock: luahost.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)), logs: &syncbuf.Buffer{}}
	f.backend = newBackend(t, backend, f.clock)
	f.write(t, src)
	srv, err := New(f.config(c))
	f.srv = srv
	return f, err
}

// config is c on the fixture's file, backend, logger, hook and clock.
func (f *reloadFixture) config(c Config) Config {
	c.Paths = []string{f.path}
	c.Backend = f.backend
	c.Logger = slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c.Reloaded = func(ok bool, _, _ int) { f.results = append(f.results, ok) }
	c.Engine = []engine.Option{engine.WithClock(f.clock.Now), engine.WithTimeout(time.Minute)}
	c.Clock = f.clock.Now
	if c.pause == nil {
		c.pause = func() {}
	}
	return c
}

func (f *reloadFixture) write(t *testing.T, src string) {
	t.Helper()
	if err := os.WriteFile(f.path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// allow decides one request for user on the running engine; it fails t unless the backend
// decided it.
func (f *reloadFixture) allow(t *testing.T, user string) *engine.Decision {
	t.Helper()
	d, err := f.srv.Engine().Allow(context.Background(), engine.Attrs{"user": user})
	if err != nil || d.Source != engine.FromBackend {
		t.Fatalf("user %s: %+v %v", user, d, err)
	}
	return d
}

// policy is a policy file: policy name with the given rule blocks, each rule's key the
// request's user.
func policy(name string, rules ...string) string {
	return fmt.Sprintf("policy %q {\n%s}\n", name, strings.Join(rules, ""))
}

// rule is a rule block of algorithm alg limiting each user to 5 per minute.
func rule(name, alg string) string {
	params := map[string]string{
		"fixed_window":   "limit = 5\n    window = \"1m\"",
		"sliding_window": "limit = 5\n    window = \"1m\"",
		"gcra":           "rate = \"5/m\"\n    burst = 5",
		"token_bucket":   "rate = \"5/m\"\n    capacity = 5",
		"leaky_bucket":   "rate = \"5/m\"\n    capacity = 5",
	}[alg]
	return fmt.Sprintf("  rule %q {\n    algorithm = %q\n    when = request.user != \"\"\n    key = request.user\n    %s\n  }\n", name, alg, params)
}

// TestReloadAlgorithmChangeInTwoSteps: remove a rule, reload, add it back under another
// algorithm, reload: the new algorithm never reads the old one's state (no WRONGTYPE, no
// fail_deny, no misread count): the rule starts empty. So does a restart on new files. On
// a real redis-server and on the embedded backend.
func TestReloadAlgorithmChangeInTwoSteps(t *testing.T) {
	for _, backend := range backendNames {
		for _, swap := range [][2]string{{"gcra", "fixed_window"}, {"token_bucket", "leaky_bucket"}, {"fixed_window", "sliding_window"}} {
			t.Run(backend+"/"+swap[0]+"→"+swap[1], func(t *testing.T) {
				name := "twostep_" + swap[0]
				keep := strings.Replace(rule("keep", "fixed_window"), "limit = 5", "limit = 100", 1)
				f, err := startReload(t, backend, policy(name, keep, rule("r", swap[0])), Config{AllowRemoval: true})
				if err != nil {
					t.Fatal(err)
				}
				for range 3 {
					f.allow(t, "u")
				}
				f.write(t, policy(name, keep))
				if _, err := f.srv.Reload(); err != nil {
					t.Fatal(err)
				}
				f.write(t, policy(name, keep, rule("r", swap[1])))
				changes, err := f.srv.Reload()
				if err != nil || len(changes) != 2 || changes[1].Rule != "r" || changes[1].Kind != Added {
					t.Fatalf("re-adding r: %+v %v", changes, err)
				}
				d := f.allow(t, "u")
				if !d.Allowed || d.Rules[1].Remaining != 4 || !strings.Contains(d.Rules[1].Key, ":"+swap[1]+":") {
					t.Fatalf("r as %s after %s: %+v; want a fresh counter (4 left of 5) under %s's keys", swap[1], swap[0], d.Rules[1], swap[1])
				}

				// Restarts on the same backend: each algorithm finds its own counter, 3 taken
				// under the first (now 4: 1 left) and 1 under the second (now 2: 3 left).
				for _, step := range []struct {
					alg  string
					left int64
				}{{swap[0], 1}, {swap[1], 3}} {
					f.write(t, policy(name, keep, rule("r", step.alg)))
					if f.srv, err = New(f.config(Config{})); err != nil {
						t.Fatal(err)
					}
					if d := f.allow(t, "u"); !d.Allowed || d.Rules[1].Remaining != step.left {
						t.Fatalf("restarted on %s: %+v, want %d left", step.alg, d.Rules[1], step.left)
					}
				}
			})
		}
	}
}

// TestReloadRefusesNoPolicies: an empty file, or one holding only comments, is refused at
// start and on reload, with AllowRemoval too: the running policies keep deciding, and the
// refusal is logged and reported as a failed reload.
func TestReloadRefusesNoPolicies(t *testing.T) {
	for _, src := range []string{"", "# every policy is gone\n", "// nothing\n/* here */\n", "\n\n  \n"} {
		t.Run(fmt.Sprintf("%q", src), func(t *testing.T) {
			if _, err := startReload(t, "embedded", src, Config{}); !errors.Is(err, ErrNoPolicies) {
				t.Fatalf("start: %v, want ErrNoPolicies", err)
			}
			f, err := startReload(t, "embedded", policy("p", rule("r", "fixed_window")), Config{AllowRemoval: true})
			if err != nil {
				t.Fatal(err)
			}
			before := f.srv.Engine()
			f.write(t, src)
			if _, err := f.srv.Reload(); !errors.Is(err, ErrNoPolicies) || !strings.Contains(err.Error(), "every request would be allowed") {
				t.Fatalf("reload: %v, want ErrNoPolicies", err)
			}
			if f.srv.Engine() != before || len(f.results) != 2 || f.results[1] {
				t.Fatalf("engine replaced %v, reload results %v", f.srv.Engine() != before, f.results)
			}
			if log := f.logs.String(); !strings.Contains(log, "reload refused") || !strings.Contains(log, "declare no policy") {
				t.Fatalf("the refusal is not logged:\n%s", log)
			}
			for i := range 6 {
				if d := f.allow(t, "u"); d.Allowed != (i < 5) {
					t.Fatalf("request %d: allowed %v: the old policy must keep deciding", i+1, d.Allowed)
				}
			}
		})
	}
}

// TestReloadWaitsForStableFiles: the files are loaded only once two reads in a row agree.
// A file still being written at the first read is loaded whole once the write ends; one
// that changes between every two reads is refused, at start and on reload.
func TestReloadWaitsForStableFiles(t *testing.T) {
	good := policy("p", rule("r", "fixed_window"))
	raised := strings.Replace(good, "limit = 5", "limit = 7", 1)

	t.Run("a write ends between two reads", func(t *testing.T) {
		f, err := startReload(t, "embedded", good, Config{})
		if err != nil {
			t.Fatal(err)
		}
		pauses := 0
		f.srv.pause = func() {
			if pauses++; pauses == 1 {
				f.write(t, raised) // the write in progress at the first read ends
			}
		}
		f.write(t, good[:len(good)/2]) // half written: it does not parse
		if _, err := f.srv.Reload(); err != nil {
			t.Fatalf("the whole file should load once stable: %v", err)
		}
		if d := f.allow(t, "u"); d.Rules[0].Limit != 7 || pauses != 2 {
			t.Fatalf("limit %d after %d pauses, want the finished file's 7 after 2", d.Rules[0].Limit, pauses)
		}
	})

	t.Run("never stable", func(t *testing.T) {
		f, err := startReload(t, "embedded", good, Config{})
		if err != nil {
			t.Fatal(err)
		}
		before := f.srv.Engine()
		reads := 0
		flip := func() {
			reads++
			f.write(t, strings.Replace(good, "limit = 5", fmt.Sprintf("limit = %d", 100+reads), 1))
		}
		f.srv.pause = flip
		f.write(t, raised)
		if _, err := f.srv.Reload(); !errors.Is(err, ErrUnstable) {
			t.Fatalf("reload: %v, want ErrUnstable", err)
		}
		if f.srv.Engine() != before || reads != maxReads-1 || f.results[len(f.results)-1] {
			t.Fatalf("engine replaced %v, %d pauses, results %v", f.srv.Engine() != before, reads, f.results)
		}
		if d := f.allow(t, "u"); d.Rules[0].Limit != 5 {
			t.Fatalf("limit %d: the running policies must stay", d.Rules[0].Limit)
		}
		if _, err := New(f.config(Config{pause: flip})); !errors.Is(err, ErrUnstable) {
			t.Fatalf("start: %v, want ErrUnstable", err)
		}
	})
}

// TestReloadRefusesRemoval: a reload that drops a policy, or a rule of a policy it keeps,
// is refused unless AllowRemoval is set, naming what would go and how to allow it; with
// it, the removal is applied and logged at warn level.
func TestReloadRefusesRemoval(t *testing.T) {
	both := policy("a", rule("r", "fixed_window"), rule("s", "gcra")) + policy("b", rule("r", "fixed_window"))
	cases := []struct {
		name, src, gone string
	}{
		{"a policy", policy("a", rule("r", "fixed_window"), rule("s", "gcra")), `policy "b"`},
		{"a rule", policy("a", rule("r", "fixed_window")) + policy("b", rule("r", "fixed_window")), `rule "s" of policy "a"`},
		{"a file cut short", both[:strings.Index(both, `policy "b"`)], `policy "b"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := startReload(t, "embedded", both, Config{})
			if err != nil {
				t.Fatal(err)
			}
			before := f.srv.Engine()
			f.write(t, c.src)
			_, err = f.srv.Reload()
			if !errors.Is(err, ErrRemoval) || !strings.Contains(err.Error(), c.gone) || !strings.Contains(err.Error(), "-allow-removal") {
				t.Fatalf("reload: %v, want ErrRemoval naming %s", err, c.gone)
			}
			if f.srv.Engine() != before || f.results[len(f.results)-1] {
				t.Fatalf("engine replaced %v, results %v", f.srv.Engine() != before, f.results)
			}
			if log := f.logs.String(); !strings.Contains(log, "level=ERROR") || !strings.Contains(log, c.gone) && !strings.Contains(log, strings.ReplaceAll(c.gone, `"`, `\"`)) {
				t.Fatalf("the refusal is not logged:\n%s", log)
			}
			if d := f.allow(t, "u"); len(d.Rules) != 3 {
				t.Fatalf("the old policies stopped deciding: %+v", d.Rules)
			}

			g, err := startReload(t, "embedded", both, Config{AllowRemoval: true})
			if err != nil {
				t.Fatal(err)
			}
			g.write(t, c.src)
			changes, err := g.srv.Reload()
			if err != nil || !g.results[len(g.results)-1] {
				t.Fatalf("with AllowRemoval: %v", err)
			}
			removed := 0
			for _, ch := range changes {
				if ch.Kind == Removed {
					removed++
				}
			}
			if log := g.logs.String(); removed == 0 || !strings.Contains(log, "level=WARN") || !strings.Contains(log, "rule removed") {
				t.Fatalf("%d removed, a removal applied is not logged at warn:\n%s", removed, log)
			}
		})
	}
}

// TestReloadReturnsLeases: a reload gives the old engine's quota leases back, so the new
// engine finds in Redis all that was not spent; so does ReturnLeases at a stop. On a real
// redis-server and on the embedded backend.
func TestReloadReturnsLeases(t *testing.T) {
	for _, backend := range backendNames {
		t.Run(backend, func(t *testing.T) {
			leased := func(limit int) string {
				return policy("leased", fmt.Sprintf("  rule \"r\" {\n    algorithm = \"fixed_window\"\n    when = request.user != \"\"\n    key = request.user\n    limit = %d\n    window = \"1h\"\n    lease_size = 50\n  }\n", limit))
			}
			f, err := startReload(t, backend, leased(1000), Config{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for range 3 {
				if d, err := f.srv.Engine().Allow(ctx, engine.Attrs{"user": "u"}); err != nil || !d.Allowed {
					t.Fatalf("%+v %v", d, err)
				}
			}
			counted := func() int64 {
				d, err := f.srv.Engine().Peek(ctx, engine.Attrs{"user": "u"})
				if err != nil {
					t.Fatal(err)
				}
				return d.Rules[0].Limit - d.Rules[0].Remaining
			}
			if n := counted(); n != 50 {
				t.Fatalf("Redis counts %d with a lease taken, want 50", n)
			}
			f.write(t, leased(2000))
			if _, err := f.srv.Reload(); err != nil {
				t.Fatal(err)
			}
			if n := counted(); n != 3 {
				t.Fatalf("Redis counts %d after the reload, want the 3 spent", n)
			}
			if d, err := f.srv.Engine().Allow(ctx, engine.Attrs{"user": "u"}); err != nil || !d.Allowed {
				t.Fatalf("%+v %v", d, err)
			}
			if err := f.srv.ReturnLeases(ctx); err != nil {
				t.Fatal(err)
			}
			if n := counted(); n != 4 {
				t.Fatalf("Redis counts %d after ReturnLeases, want the 4 spent", n)
			}
		})
	}
}
