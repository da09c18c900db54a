package algorithms

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/rlctl/rlctl/lua"
	"github.com/rlctl/rlctl/luahost"
)

// carelessSource is a plugin whose peek is arithmetic on nil for a key that does not
// exist: line 4 raises the error.
const carelessSource = `params = {'pos', 'pos'}
function check(key, now, cost, p)
  local st = call('HMGET', key, 'n')
  if cost == 0 then return 1, p[1] - tonumber(st[1]), 0, 0, p[1] end
  return 1, p[1], 0, 0, p[1], false
end
function commit(key, w) end`

func withCareless(t *testing.T) *Script {
	t.Helper()
	plugin := &Algorithm{Name: "careless", Params: []Param{{Name: "limit", Kind: Count}, {Name: "window", Kind: Duration}},
		Commands: []string{"HMGET"}, Source: carelessSource}
	s, err := Assemble(append(append([]*Algorithm(nil), Builtin()...), plugin))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every line the map places comes from the file it names, at the line it names; the
// prelude, each algorithm and the dispatcher are all placed.
func TestPositionMapsEveryLine(t *testing.T) {
	s := withCareless(t)
	files := map[string][]string{
		"prelude.lua":  strings.Split(lua.Source("prelude.lua"), "\n"),
		"dispatch.lua": strings.Split(lua.Source("dispatch.lua"), "\n"),
		"careless.lua": strings.Split(carelessSource, "\n"),
	}
	for _, a := range Builtin() {
		files[a.Name+".lua"] = strings.Split(a.Source, "\n")
	}
	placed := map[string]int{}
	for i, text := range strings.Split(s.Source, "\n") {
		file, line, ok := s.Position(i + 1)
		if !ok {
			continue
		}
		lines, known := files[file]
		if !known || line < 1 || line > len(lines) || lines[line-1] != text {
			t.Fatalf("line %d %q placed at %s:%d", i+1, text, file, line)
		}
		placed[file]++
	}
	for file, lines := range files {
		if placed[file] < len(lines)-1 {
			t.Errorf("%s: %d of %d lines placed", file, placed[file], len(lines))
		}
	}
	if _, _, ok := s.Position(0); ok {
		t.Error("line 0 placed")
	}
	if _, _, ok := s.Position(1 + strings.Count(s.Source, "\n") + 1); ok {
		t.Error("a line past the end placed")
	}
}

// A plugin's runtime error, as luahost (and Redis 7) report it, names the plugin's file
// and line after Locate; WithFiles names the file the policy gave, and leaves the script
// as it was.
func TestLocateRuntimeError(t *testing.T) {
	s := withCareless(t)
	h := luahost.New(luahost.WithTimeout(0), luahost.WithInstructionLimit(1e9), luahost.WithCommands(s.Commands()...))
	if _, err := h.Load(s.Source); err != nil {
		t.Fatal(err)
	}
	c := Call{Op: OpCheck, Now: 1_000_000, Rules: []Rule{{Key: "k", Algorithm: s.Algorithms[len(s.Algorithms)-1], Cost: 0, Params: []int64{5, 1_000_000}}}}
	argv, err := c.Argv()
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.EvalSHA(context.Background(), s.SHA1, c.Keys(), argv)
	if err == nil || !strings.Contains(err.Error(), "user_script:") {
		t.Fatalf("error %v", err)
	}
	got := s.Locate(err.Error())
	if !strings.HasPrefix(got, "ERR careless.lua:4: ") || !strings.HasSuffix(got, "on @careless.lua:4.") || strings.Contains(got, "user_script") {
		t.Fatalf("Locate(%q) = %q", err, got)
	}
	named := s.WithFiles(map[string]string{"careless": "plugins/careless.lua", "gcra": "elsewhere.lua"})
	if got := named.Locate(err.Error()); !strings.HasPrefix(got, "ERR plugins/careless.lua:4: ") {
		t.Fatalf("WithFiles: %q", got)
	}
	if named.SHA1 != s.SHA1 || named.Source != s.Source {
		t.Fatal("WithFiles changed the script")
	}
	if got := s.Locate(err.Error()); !strings.HasPrefix(got, "ERR careless.lua:4: ") {
		t.Fatalf("WithFiles changed the original's map: %q", got)
	}
}

func TestLocate(t *testing.T) {
	s := Default()
	gcra, _ := s.Algorithm("gcra")
	first := 0
	for i, text := range strings.Split(s.Source, "\n") {
		if text == strings.Split(gcra.Source, "\n")[0] {
			first = i + 1
			break
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"no position", "no position"},
		{"ERR user_script:1: x", "ERR prelude.lua:1: x"},
		{"ERR user_script:" + strconv.Itoa(first+2) + ": y script: abc, on @user_script:" + strconv.Itoa(first+2) + ".", "ERR gcra.lua:3: y script: abc, on @gcra.lua:3."},
		{"user_script:999999: far", "user_script:999999: far"},
		{"my_user_script:1", "my_user_script:1"},
		{"ERR user_function:" + strconv.Itoa(first+3) + ": z", "ERR gcra.lua:3: z"},
	} {
		if got := s.Locate(tc.in); got != tc.want {
			t.Errorf("Locate(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	last := strings.Count(s.Body, "\n") // the dispatcher's last line ("end" of main)
	if file, _, ok := s.Position(last); !ok || file != "dispatch.lua" {
		t.Errorf("line %d: %s %v", last, file, ok)
	}
}
