package dsl

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/rogpeppe/go-internal/txtar"
)

// fuzzPlugin is the Lua file FuzzLoad's policies can name as "plugin.lua".
const fuzzPlugin = `params = {'pos', 'pos'}

function check(key, now, cost, p)
  local n = tonumber(call('GET', key)) or 0
  if n + cost <= p[1] then
    return 1, p[1] - n - cost, 0, p[2], p[1], n + cost
  end
  return 0, p[1] - n, p[2], p[2], p[1]
end

function commit(key, n)
  call('SET', key, n)
  expire_us(key, 1000)
end
`

// FuzzLoad checks that Parse never panics on any policy (native or JSON syntax) and
// plugin source; that every diagnostic has a subject inside its file's bytes; and that a
// Config that loads without errors evaluates on hostile requests without panicking.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`policy "p" {
  rule "r" {
    algorithm = "quota"
    key       = request.ip
    limit     = 10
    window    = "1s"
  }
}
algorithm "quota" {
  source   = "plugin.lua"
  params   = { limit = "count", window = "duration" }
  commands = ["GET", "SET", "PEXPIRE"]
  guarantee "window" {
    amount = param.limit
    window = param.window
  }
}
`), []byte(fuzzPlugin), false)
	f.Fuzz(func(t *testing.T, src, lua []byte, jsonSyntax bool) {
		name := "fuzz.hcl"
		if jsonSyntax {
			name = "fuzz.hcl.json"
		}
		files := map[string][]byte{name: src, "plugin.lua": lua}
		cfg, diags := Parse(files)
		for _, d := range diags {
			if d.Subject == nil {
				t.Fatalf("diagnostic %q has no subject", d.Summary)
			}
			b, ok := files[d.Subject.Filename]
			if !ok {
				t.Fatalf("diagnostic %q is about %q, not an input", d.Summary, d.Subject.Filename)
			}
			s, e := d.Subject.Start, d.Subject.End
			if s.Byte < 0 || s.Byte > e.Byte || e.Byte > len(b) || s.Line < 1 || s.Column < 1 {
				t.Fatalf("diagnostic %q: subject %+v outside the file's %d bytes", d.Summary, *d.Subject, len(b))
			}
		}
		if cfg == nil || cfg.Files == nil {
			t.Fatal("no Config")
		}
		if !diags.HasErrors() {
			exercise(t, cfg)
		}
		var sink bytes.Buffer
		if err := WriteDiagnostics(&sink, cfg.Files, diags, 80, true); err != nil {
			t.Fatal(err)
		}
	})
}

// hostile are requests the engine may be given: empty, binary, huge, NaN-like.
var hostile = []Request{
	attrs{},
	attrs{"ip": "\x00\xff{}", "user": strings.Repeat("u", 1<<12), "plan": "NaN", "cost": "-1", "n": "1e400", "method": "POST", "path": "/v1/"},
}

// exercise evaluates every expression of cfg on hostile requests: errors are fine,
// panics are not.
func exercise(t *testing.T, cfg *Config) {
	for _, p := range cfg.Policies {
		for _, r := range hostile {
			if p.Match != nil {
				p.Match.Bool(r)
			}
			if p.Shard != nil {
				p.Shard.String(r)
			}
			for _, ru := range p.Rules {
				if ru.Key == nil || ru.Algorithm == nil || len(ru.Params) != len(ru.Algorithm.Params) {
					t.Fatalf("rule %q is incomplete", ru.Name)
				}
				ru.Key.String(r)
				if ru.When != nil {
					ru.When.Bool(r)
				}
				if ru.Cost != nil {
					ru.Cost.Int(r)
				}
				if w, err := ru.Wire(r); err == nil {
					if err := ru.Algorithm.Validate(w); err != nil {
						t.Fatalf("rule %q: Wire returned invalid values %v: %v", ru.Name, w, err)
					}
				}
			}
		}
	}
	for _, s := range cfg.Scenarios {
		for _, tr := range s.Traffic {
			tr.Render(0)
			tr.Render(tr.Clients - 1)
		}
		for _, x := range s.Expect {
			x.Check(fakeOutcome{})
		}
	}
}

type fakeOutcome struct{}

func (fakeOutcome) Requests(string) int64                    { return 10 }
func (fakeOutcome) Allowed(string) int64                     { return 7 }
func (fakeOutcome) Granted(string) int64                     { return 9 }
func (fakeOutcome) Waited(string) int64                      { return 2 }
func (fakeOutcome) MaxWait(string) time.Duration             { return time.Second }
func (fakeOutcome) Settled(string) int64                     { return 500 }
func (fakeOutcome) Owed(string) int64                        { return 50 }
func (fakeOutcome) DeniedBy(string, string) int64            { return 3 }
func (fakeOutcome) MaxAllowedIn(string, time.Duration) int64 { return 5 }
func (fakeOutcome) DuringFault(string) (int64, int64)        { return 4, 1 }
func (fakeOutcome) DecidedBy(string, string) int64           { return 2 }
func (fakeOutcome) TimedOut(string) int64                    { return 1 }
func (fakeOutcome) BreakerOpen(string) int64                 { return 1 }
func (fakeOutcome) Recovery(string) time.Duration            { return time.Second }
func (fakeOutcome) PhantomCharges() int64                    { return 0 }

var luaName = regexp.MustCompile(`"[^"]*\.lua"`)

// FuzzFormat checks that Format is idempotent, that its output parses, and that it
// changes no meaning: the formatted file loads with the same diagnostics.
func FuzzFormat(f *testing.F) {
	f.Add([]byte("policy \"p\" {\n\n\n  match=true\n  rule \"r\" {\n  algorithm=\"gcra\" # c\n  key = request.ip\n\n  }\n\n}\n\n\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		out, diags := Format("f.hcl", src)
		_, perr := hclsyntax.ParseConfig(src, "f.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			if out != nil {
				t.Fatal("output despite errors")
			}
			if !perr.HasErrors() {
				t.Fatalf("a file that parses does not format: %v", diags)
			}
			return
		}
		if _, d := hclsyntax.ParseConfig(out, "f.hcl", hcl.InitialPos); d.HasErrors() {
			t.Fatalf("formatted output does not parse: %v\n%s", d, out)
		}
		again, d := Format("f.hcl", out)
		if d.HasErrors() || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent:\n%q\nthen\n%q", out, again)
		}
		_, before := Parse(map[string][]byte{"f.hcl": src})
		_, after := Parse(map[string][]byte{"f.hcl": out})
		if b, a := summaries(before), summaries(after); b != a {
			t.Fatalf("formatting changed the diagnostics:\n%s\nto\n%s\n%q\n%q", b, a, src, out)
		}
	})
}

// summaries lists diagnostics by severity and summary, sorted: what they say, not where.
func summaries(diags hcl.Diagnostics) string {
	var s []string
	for _, d := range diags {
		s = append(s, fmt.Sprintf("%d %s", d.Severity, d.Summary))
	}
	slices.Sort(s)
	return strings.Join(s, "\n")
}

// TestFuzzSeeds keeps the seed corpora in testdata/fuzz in step with the example policies
// and the golden archives (-update rewrites them).
func TestFuzzSeeds(t *testing.T) {
	want := map[string]string{} // path → content
	seed := func(target, name string, args ...any) {
		var b strings.Builder
		b.WriteString("go test fuzz v1\n")
		for _, a := range args {
			switch a := a.(type) {
			case []byte:
				fmt.Fprintf(&b, "[]byte(%q)\n", a)
			case bool:
				fmt.Fprintf(&b, "bool(%v)\n", a)
			}
		}
		want[filepath.Join("testdata", "fuzz", target, name)] = b.String()
	}
	policies, _ := filepath.Glob("../policies/*.hcl")
	for _, p := range policies {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(p), ".hcl")
		seed("FuzzLoad", "policy_"+name, src, []byte(fuzzPlugin), false)
		seed("FuzzFormat", "policy_"+name, src)
	}
	archives, _ := filepath.Glob("testdata/diagnostics/*.txtar")
	for _, path := range archives {
		a, err := txtar.ParseFile(path)
		if err != nil {
			t.Fatal(err)
		}
		base := strings.TrimSuffix(filepath.Base(path), ".txtar")
		var lua []byte
		for _, f := range a.Files {
			if strings.HasSuffix(f.Name, ".lua") {
				lua = f.Data
			}
		}
		for i, f := range a.Files {
			name := fmt.Sprintf("golden_%s_%d", base, i)
			switch {
			case strings.HasSuffix(f.Name, ".hcl"):
				src := luaName.ReplaceAll(f.Data, []byte(`"plugin.lua"`))
				seed("FuzzLoad", name, src, lua, false)
				seed("FuzzFormat", name, f.Data)
			case strings.HasSuffix(f.Name, ".json"):
				seed("FuzzLoad", name, f.Data, lua, true)
			}
		}
	}
	if len(want) < 40 {
		t.Errorf("only %d seeds", len(want))
	}
	for _, target := range []string{"FuzzLoad", "FuzzFormat"} {
		dir := filepath.Join("testdata", "fuzz", target)
		if *update {
			os.RemoveAll(dir)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if _, ok := want[filepath.Join(dir, e.Name())]; !ok {
				t.Errorf("stale seed %s; run go test -run TestFuzzSeeds -update", filepath.Join(dir, e.Name()))
			}
		}
	}
	for _, path := range sortedKeys(want) {
		content := want[path]
		if *update {
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Errorf("seed %s is missing or stale; run go test -run TestFuzzSeeds -update", path)
		}
	}
}
