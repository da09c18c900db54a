package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
)

// carelessAt is where testdata/careless_window.lua fails: its peek's arithmetic on nil.
const carelessAt = "testdata/careless_window.lua:17: "

// A plugin's runtime error is a finding: the request that raised it, shrunk, at the
// plugin's own file and line; the run goes on, and the other policy's findings are
// reported.
func TestPluginRuntimeErrorIsAFinding(t *testing.T) {
	t.Parallel()
	f := check(t, "testdata/careless_window.hcl", "testdata/fixed_window.hcl")
	r := find(t, f, "careless", "per_user", PropErrors)
	if r.Status != Fail || !strings.HasPrefix(r.Error, carelessAt) || !strings.HasPrefix(r.Detail, r.Error+", raised by a request of cost 0 at +") {
		t.Fatalf("errors: %s %q %s", r.Status, r.Error, r.Detail)
	}
	ce := r.Counterexample
	if ce == nil || len(ce.Steps) == 0 || len(ce.Steps) > 2 {
		t.Fatalf("counterexample %+v", ce)
	}
	last := ce.Steps[len(ce.Steps)-1]
	if !last.Mark || last.Request != "cost 0" || last.Result != "ERROR "+r.Error {
		t.Fatalf("counterexample %+v", ce.Steps)
	}
	// The whole policy's checks meet the error too, with their own shrunk trace.
	if r := find(t, f, "careless", "", PropAtomicity); r.Status != Fail || r.Error == "" || !strings.HasPrefix(r.Error, carelessAt) || r.Counterexample == nil {
		t.Errorf("atomicity: %s %q %s", r.Status, r.Error, r.Detail)
	}
	// The plugin's other properties are still checked.
	if r := find(t, f, "careless", "per_user", PropRetryAfter); r.Status != Pass {
		t.Errorf("retry-after: %s %s", r.Status, r.Detail)
	}
	// And so is the other policy.
	if r := find(t, f, "api", "per_user", PropLimit); r.Status != Warn || r.Counterexample == nil {
		t.Errorf("api limit: %s %s", r.Status, r.Detail)
	}
	if r := find(t, f, "api", "per_user", PropErrors); r.Status != Pass {
		t.Errorf("api errors: %s %s", r.Status, r.Detail)
	}
	var b bytes.Buffer
	if err := f.WriteText(&b, false); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	if strings.Contains(text, "user_script") || !strings.Contains(text, "ERROR "+carelessAt) || !strings.Contains(text, `policy "api"`) {
		t.Fatalf("text:\n%s", text)
	}
}

// The JSON has the documented shape, schema 1, when a plugin errors too.
func TestFindingsJSONSchema(t *testing.T) {
	t.Parallel()
	f, err := Check(load(t, "testdata/careless_window.hcl", "testdata/fixed_window.hcl"), WithBudget(200))
	if err != nil {
		t.Fatal(err)
	}
	js, err := f.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	if got := keys(doc); !slices.Equal(got, []string{"budget", "calls", "results", "schema", "seed"}) {
		t.Fatalf("top-level keys %v", got)
	}
	if doc["schema"] != float64(Schema) || Schema != 1 {
		t.Fatalf("schema %v", doc["schema"])
	}
	results, _ := doc["results"].([]any)
	if len(results) == 0 {
		t.Fatal("no results")
	}
	required := []string{"calls", "detail", "policy", "property", "statement", "status"}
	optional := []string{"algorithm", "counterexample", "error", "limit", "params", "rule"}
	statuses := []string{"pass", "skip", "note", "warn", "fail"}
	var errored int
	for _, x := range results {
		r := x.(map[string]any)
		for _, k := range keys(r) {
			if !slices.Contains(required, k) && !slices.Contains(optional, k) {
				t.Errorf("result key %q not in the schema", k)
			}
		}
		for _, k := range required {
			if _, ok := r[k]; !ok {
				t.Errorf("result %v lacks %q", r, k)
			}
		}
		if s, _ := r["status"].(string); !slices.Contains(statuses, s) {
			t.Errorf("status %v", r["status"])
		}
		if e, ok := r["error"]; ok {
			errored++
			if s, _ := e.(string); !strings.HasPrefix(s, carelessAt) {
				t.Errorf("error %v", e)
			}
		}
		ce, ok := r["counterexample"].(map[string]any)
		if !ok {
			continue
		}
		if got := keys(ce); !slices.Equal(got, []string{"original", "steps", "unit"}) {
			t.Errorf("counterexample keys %v", got)
		}
		for _, x := range ce["steps"].([]any) {
			st := x.(map[string]any)
			for _, k := range keys(st) {
				if !slices.Contains([]string{"at_ns", "client", "mark", "request", "result"}, k) {
					t.Errorf("step key %q not in the schema", k)
				}
			}
			if _, ok := st["at_ns"].(float64); !ok {
				t.Errorf("step %v: at_ns", st)
			}
		}
	}
	if errored == 0 {
		t.Error("no result carries the plugin's error")
	}
	// A run that cannot start says why in the same schema.
	js, err = (&Findings{Schema: Schema, Results: []Result{}, Error: "no script"}).JSON()
	if err != nil {
		t.Fatal(err)
	}
	doc = nil
	if err := json.Unmarshal(js, &doc); err != nil || doc["schema"] != float64(1) || doc["error"] != "no script" {
		t.Fatalf("%s: %v", js, err)
	}
}

// A limit warning states how far past the limit it went and the bound it is held to,
// exactly: 2× the limit is within the bound, and a plugin is not called an estimate.
func TestWarnStatesTheBound(t *testing.T) {
	t.Parallel()
	f := check(t, "testdata/careless_window.hcl", "testdata/fixed_window.hcl")
	for _, policy := range []string{"careless", "api"} {
		r := find(t, f, policy, "per_user", PropLimit)
		if r.Status != Warn || !strings.Contains(r.Detail, ": 2× the limit, within the declared bound of 2×, by design") || strings.Contains(r.Detail, "less than 2") {
			t.Errorf("%s: %s %s", policy, r.Status, r.Detail)
		}
	}
	if r := find(t, f, "careless", "per_user", PropLimit); strings.Contains(r.Statement, "estimate") || !strings.Contains(r.Statement, "(by design at most 2× that: a fixed window lets a burst straddle the window boundary)") {
		t.Errorf("plugin: %s", r.Statement)
	}
	for _, tc := range []struct {
		n, limit int64
		want     string
	}{{8, 4, "2×"}, {5, 4, "1.25×"}, {5, 3, "1.67×"}, {3, 2, "1.5×"}, {21, 10, "2.1×"}} {
		if got := times(tc.n, tc.limit); got != tc.want {
			t.Errorf("times(%d, %d) = %s, want %s", tc.n, tc.limit, got, tc.want)
		}
	}
}

// A plugin that writes its state in two commands is fine in one script call; run as
// separate commands, a client can read the half-written state and fail. The error is a
// note of the race at redis.call granularity, at the plugin's file and line.
func TestInterleavingRaisesError(t *testing.T) {
	t.Parallel()
	cfg := parse(t, map[string]string{
		"p.hcl": `algorithm "two_writes" {
  source   = "p.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["HMGET", "HSET", "PEXPIRE"]
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
}
policy "p" {
  rule "r" {
    algorithm = "two_writes"
    key       = "k"
    limit     = 3
    window    = "10s"
  }
}`,
		"p.lua": `params = {'pos', 'pos'}
function check(key, now, cost, p)
  local win = idiv(now, p[2])
  local st = call('HMGET', key, 'w', 'n')
  local n = 0
  if tonumber(st[1]) == win then
    n = tonumber(st[2]) + 0
  end
  local to_end = (win + 1) * p[2] - now
  if cost > p[1] then return 0, 0, -1, to_end, p[1] end
  if n + cost <= p[1] then return 1, p[1] - n - cost, 0, to_end, p[1], {win, n + cost, to_end} end
  return 0, p[1] - n, to_end, to_end, p[1]
end
function commit(key, w)
  call('HSET', key, 'w', w[1])
  call('HSET', key, 'n', w[2])
  expire_us(key, w[3])
end`,
	})
	f, err := Check(cfg, WithBudget(testBudget))
	if err != nil {
		t.Fatal(err)
	}
	if r := find(t, f, "p", "r", PropErrors); r.Status != Pass {
		t.Fatalf("errors: %s %s", r.Status, r.Detail)
	}
	r := find(t, f, "p", "r", PropRaceCommand)
	if r.Status != Note || !strings.HasPrefix(r.Error, "p.lua:7: ") || r.Counterexample == nil {
		t.Fatalf("race (redis.call): %s %q %s", r.Status, r.Error, r.Detail)
	}
	var failed int
	for _, s := range r.Counterexample.Steps {
		if s.Client > 2 {
			t.Errorf("step %+v: two clients show it", s)
		}
		if s.Mark {
			failed++
			if s.Result != "ERROR "+r.Error {
				t.Errorf("step %+v", s)
			}
		}
	}
	if failed != 1 {
		t.Fatalf("counterexample %+v", r.Counterexample.Steps)
	}
}

// A plugin that fails on every request at or above a count: each property that meets it
// reports it, and the races of whole requests too.
func TestPluginErrorInRaces(t *testing.T) {
	t.Parallel()
	cfg := parse(t, map[string]string{
		"p.hcl": `algorithm "bonus" {
  source   = "bonus.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["HMGET", "HGET", "HSET", "PEXPIRE"]
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
}
policy "p" {
  rule "r" {
    algorithm = "bonus"
    key       = "k"
    limit     = 3
    window    = "10s"
  }
}`,
		// The bug: from the second request on, it reads a field it never writes.
		"bonus.lua": `params = {'pos', 'pos'}
function check(key, now, cost, p)
  local n = tonumber(call('HMGET', key, 'n')[1]) or 0
  if n >= 1 then
    n = n + tonumber(call('HGET', key, 'bonus'))
  end
  if n + cost <= p[1] then return 1, p[1] - n - cost, 0, p[2], p[1], {n + cost} end
  return 0, p[1] - n, p[2], p[2], p[1]
end
function commit(key, w)
  call('HSET', key, 'n', w[1])
  expire_us(key, 10000000)
end`,
	})
	f, err := Check(cfg, WithBudget(testBudget))
	if err != nil {
		t.Fatal(err)
	}
	const at = "bonus.lua:5: "
	if r := find(t, f, "p", "r", PropErrors); r.Status != Fail || !strings.HasPrefix(r.Error, at) || len(r.Counterexample.Steps) != 2 {
		t.Fatalf("errors: %s %q %+v", r.Status, r.Error, r.Counterexample)
	}
	if r := find(t, f, "p", "r", PropRaceCommand); r.Status != Skip {
		t.Errorf("race (redis.call): %s %s", r.Status, r.Detail)
	}
	r := find(t, f, "p", "", PropRace)
	if r.Status != Fail || !strings.HasPrefix(r.Error, at) || r.Counterexample == nil || len(r.Counterexample.Steps) > 3 {
		t.Fatalf("race: %s %q %s %+v", r.Status, r.Error, r.Detail, r.Counterexample)
	}
	if last := r.Counterexample.Steps[len(r.Counterexample.Steps)-1]; !last.Mark || last.Result != "ERROR "+r.Error {
		t.Fatalf("race counterexample %+v", r.Counterexample.Steps)
	}
}

// Simulate's error names the request that raised it and the plugin's file and line.
func TestSimulatePluginError(t *testing.T) {
	t.Parallel()
	cfg := load(t, "testdata/careless_window.hcl")
	cfg = parse(t, map[string]string{
		"p.hcl": `algorithm "careless_window" {
  source   = "careless_window.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["HMGET", "HSET", "PEXPIRE"]
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
}
policy "p" {
  rule "r" {
    algorithm = "careless_window"
    key       = request.user
    cost      = request.method == "HEAD" ? 0 : 1
    limit     = 4
    window    = "10s"
  }
}
scenario "s" {
  policy   = "p"
  duration = "10s"
  traffic "peeks" {
    request = { user = "u", method = "HEAD" }
    rate    = "1/s"
  }
}`,
		"careless_window.lua": string(cfg.Files["testdata/careless_window.lua"].Bytes),
	})
	_, err := Simulate(cfg, cfg.Scenarios[0])
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if !strings.Contains(msg, `traffic "peeks" client 1 request {method = "HEAD", user = "u"}: `) ||
		!strings.Contains(msg, "careless_window.lua:17: ") || strings.Contains(msg, "user_script") || !errors.Is(err, engine.ErrScript) {
		t.Fatalf("%v", err)
	}
}

// The README's verify examples are what verify prints: for the example login policy, and
// for the plugin runtime error of the testscript verify_plugin_error.
func TestReadmeVerifyExamples(t *testing.T) {
	if raceEnabled {
		t.Skip("runs the default budget; checked without the race detector")
	}
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range []struct{ command, dir, path string }{
		{"$ rlctl verify policies/login.hcl\n", filepath.Join(wd, ".."), "policies/login.hcl"},
		{"$ rlctl verify examples/mistakes/two.hcl\n", filepath.Join(wd, ".."), "examples/mistakes/two.hcl"},
	} {
		var excerpt string
		for _, b := range strings.Split(string(readme), "```")[1:] {
			if strings.HasPrefix(strings.TrimPrefix(b, "\n"), ex.command) {
				excerpt = strings.TrimPrefix(strings.TrimPrefix(b, "\n"), ex.command)
			}
		}
		if excerpt == "" {
			t.Fatalf("README lacks %q", ex.command)
		}
		cfg, diags := dsl.Load(filepath.Join(ex.dir, ex.path))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		// Diagnostics and findings name files as given: relative to the directory.
		for _, a := range cfg.Plugins {
			for name, f := range cfg.Files {
				if rel, err := filepath.Rel(ex.dir, name); err == nil && string(f.Bytes) == a.Source {
					delete(cfg.Files, name)
					cfg.Files[rel] = f
				}
			}
		}
		f, err := Check(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var text bytes.Buffer
		if err := f.WriteText(&text, false); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(excerpt), "\n") {
			if l := strings.TrimSpace(line); l == "..." || strings.HasSuffix(l, "...") {
				line = strings.TrimSuffix(line, "...")
			}
			if strings.TrimSpace(line) != "" && !strings.Contains(text.String(), line) {
				t.Errorf("README line %q is not in the output:\n%s", line, text.String())
			}
		}
	}
}
