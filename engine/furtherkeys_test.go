package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// twoKeysPlan compiles the catalogue's two_keys plugin, whose rule keeps a key per window
// (keys = ["cur", "prev"]).
func twoKeysPlan(t *testing.T) *Plan {
	t.Helper()
	files := map[string][]byte{}
	for _, name := range []string{"two_keys.hcl", "two_keys.lua"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "plugins", "correct", name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	cfg, diags := dsl.Parse(files)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A rule with further keys: its key is its own hash tag, its further keys live beside it,
// and Reset deletes them all.
func TestFurtherKeysInProcess(t *testing.T) {
	clock := newFrozen()
	h := luahost.New(luahost.WithClock(clockFunc(clock.now)))
	e := New(NewLocal(h), twoKeysPlan(t), WithClock(clock.now))
	ctx := context.Background()
	var key string
	for i := range 5 {
		d, err := e.Allow(ctx, Attrs{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != (i < 4) {
			t.Fatalf("request %d: allowed %v, want %v (limit 4)", i+1, d.Allowed, i < 4)
		}
		key = d.Rules[0].Key
	}
	if !strings.HasPrefix(key, "rl:{") || !strings.HasSuffix(key, "}") {
		t.Fatalf("the rule's key %q is not its own hash tag", key)
	}
	if got := h.Keys(); len(got) != 1 || got[0] != key+":cur" {
		t.Fatalf("keys %v, want only %s:cur", got, key)
	}
	// The next window renames cur to prev.
	clock.advance(10 * time.Second)
	if d, err := e.Allow(ctx, Attrs{}); err != nil {
		t.Fatal(err)
	} else if d.Allowed {
		t.Fatalf("at the start of the next window the previous one still weighs 4: %+v", d)
	}
	clock.advance(5 * time.Second)
	if d, err := e.Allow(ctx, Attrs{}); err != nil || !d.Allowed {
		t.Fatalf("half way through the next window: %+v %v, want allowed", d, err)
	}
	if got := h.Keys(); len(got) != 2 {
		t.Fatalf("keys %v, want cur and prev", got)
	}
	if err := e.Reset(ctx, Attrs{}); err != nil {
		t.Fatal(err)
	}
	if got := h.Keys(); len(got) != 0 {
		t.Fatalf("after Reset, keys %v are left", got)
	}
}

// On a real Redis Cluster the further keys hash to the rule key's slot: one call reaches
// them all (a key of another slot fails the call), and Reset deletes them.
func TestFurtherKeysOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	ctx := context.Background()
	e := New(NewRedis(cl.Client(t)), twoKeysPlan(t), WithTimeout(time.Minute))
	for i := range 5 {
		d, err := e.Allow(ctx, Attrs{})
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		// Whatever window boundary falls between them, the estimate admits 4 of 5.
		if d.Allowed != (i < 4) {
			t.Fatalf("request %d: allowed %v, want %v (limit 4)", i+1, d.Allowed, i < 4)
		}
	}
	if err := e.Reset(ctx, Attrs{}); err != nil {
		t.Fatal(err)
	}
	if d, err := e.Peek(ctx, Attrs{}); err != nil || d.Rules[0].Remaining != 4 {
		t.Fatalf("after Reset: %+v %v, want a fresh key", d, err)
	}
}
