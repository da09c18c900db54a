package engine_test

import (
	"context"
	"slices"
	"testing"

	"github.com/rlctl/rlctl/engine"
	"github.com/rlctl/rlctl/internal/redistest"
)

// The README's program with a Redis address: its client options work on a real server,
// and the decisions are the Example's.
func TestExampleEmbedOnRedis(t *testing.T) {
	e, closeEngine := newEngine("../policies/uploads.hcl", redistest.Shared(t).Addr())
	defer closeEngine()
	ctx := context.Background()
	upload := engine.Attrs{"method": "POST", "path": "/upload", "user": t.Name(), "content_length": "5242880"}
	var got []bool
	var held []*engine.Decision
	defer func() {
		for _, d := range held {
			e.Release(ctx, d)
		}
	}()
	allow := func() {
		d, err := e.Allow(ctx, upload)
		if err != nil {
			t.Fatal(err)
		}
		if d.Source != engine.FromBackend {
			t.Fatalf("decided by %v (%v), not by Redis", d.Source, d.Err)
		}
		got = append(got, d.Allowed)
		held = append(held, d)
	}
	for range 4 {
		allow()
	}
	e.Release(ctx, held[0])
	allow()
	if want := []bool{true, true, true, false, true}; !slices.Equal(got, want) {
		t.Errorf("on Redis: %v; want %v (the Example's)", got, want)
	}
}
