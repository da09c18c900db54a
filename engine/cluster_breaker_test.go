package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rlctl/rlctl/internal/redistest"
)

// TestClusterBreakerPerNode: on a Redis Cluster with one primary stopped, the breaker of
// that primary opens after its failures while keys on the other primaries are decided by
// Redis throughout; once the primary is back, its breaker closes again. (With one breaker
// for the engine, the other primaries' successes kept it closed, and every request for a
// key on the stopped node waited the full deadline.)
func TestClusterBreakerPerNode(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	rdb := cluster.Client(t)
	ctx := context.Background()
	var mu sync.Mutex
	var changes []string
	e := New(NewRedis(rdb), compile(t, modePolicy("allow", gcraRule)),
		WithTimeout(100*time.Millisecond), WithBreaker(3, 200*time.Millisecond),
		WithHooks(Hooks{Breaker: func(node string, from, to BreakerState) {
			mu.Lock()
			changes = append(changes, fmt.Sprintf("%s %v>%v", node, from, to))
			mu.Unlock()
		}}))

	// Two users whose keys live on different primaries.
	owner := func(user string) string {
		d, err := e.Peek(ctx, Attrs{"user": user})
		if err != nil || d.Source != FromBackend {
			t.Fatalf("peek %s: %+v %v", user, d, err)
		}
		c, err := rdb.MasterForKey(ctx, d.Rules[0].Key)
		if err != nil {
			t.Fatal(err)
		}
		return c.Options().Addr
	}
	down, up := "a", ""
	downAddr := owner(down)
	for i := range 100 {
		if u := fmt.Sprint("b", i); owner(u) != downAddr {
			up = u
			break
		}
	}
	if up == "" {
		t.Fatal("no key on another primary")
	}
	var node *redistest.Server
	for i := range 3 {
		if cluster.Node(i).Addr() == downAddr {
			node = cluster.Node(i)
		}
	}
	node.Pause(t)
	sawOpen := false
	for i := range 8 {
		d, err := e.Allow(ctx, Attrs{"user": down})
		if err != nil || d.Source != FromFailOpen {
			t.Fatalf("call %d on the stopped primary: %+v %v", i, d, err)
		}
		sawOpen = sawOpen || errors.Is(d.Err, ErrBreakerOpen)
		if d, err := e.Allow(ctx, Attrs{"user": up}); err != nil || d.Source != FromBackend {
			t.Fatalf("call %d on a healthy primary: %+v %v", i, d, err)
		}
	}
	if !sawOpen {
		t.Fatal("the stopped primary's breaker never opened")
	}
	node.Resume()
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if d, err := e.Allow(ctx, Attrs{"user": down}); err == nil && d.Source == FromBackend {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("the primary's breaker did not close within 5s of its return")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{downAddr + " closed>open", downAddr + " open>half-open", downAddr + " half-open>closed"}
	if len(changes) < 3 || changes[0] != want[0] || changes[len(changes)-1] != want[2] {
		t.Fatalf("breaker changes %v, want %v (the healthy primaries' breakers never change)", changes, want)
	}
}
