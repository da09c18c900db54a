package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/rlctl/rlctl/algorithms"
)

// TestSlotMapTransitions walks every transition of slotMap on a virtual clock: the first
// stale call refreshes, the ones within the interval do not, the first one at the end of
// it does, a call that waits reloads in its own time, and a clock behind the last
// refresh (another engine's) refreshes at once.
func TestSlotMapTransitions(t *testing.T) {
	var refreshes, reloads int
	var reloadErr error
	m := &slotMap{
		every:   250 * time.Millisecond,
		refresh: func(context.Context) { refreshes++ },
		reload:  func(context.Context) error { reloads++; return reloadErr },
	}
	t0 := time.Unix(1_000, 0)
	ctx := context.Background()
	steps := []struct {
		name                    string
		at                      time.Duration
		wait                    bool
		reloadErr               error
		refreshed               bool
		wantRefresh, wantReload int
	}{
		{"Fresh: the first stale call refreshes", 0, false, nil, true, 1, 0},
		{"Refreshing: within the interval, nothing", 100 * time.Millisecond, false, nil, false, 1, 0},
		{"Refreshing: a call to resend within the interval does not reload either", 249 * time.Millisecond, true, nil, false, 1, 0},
		{"Refreshing: at the interval's end, a refresh", 250 * time.Millisecond, false, nil, true, 2, 0},
		{"Refreshing: a call to resend reloads in its time", 600 * time.Millisecond, true, nil, true, 2, 1},
		{"a reload that fails falls back to a refresh", 900 * time.Millisecond, true, errors.New("down"), true, 3, 2},
		{"a clock behind the last refresh refreshes at once", 10 * time.Millisecond, false, nil, true, 4, 2},
	}
	for _, s := range steps {
		reloadErr = s.reloadErr
		if got := m.stale(ctx, t0.Add(s.at), s.wait); got != s.refreshed || refreshes != s.wantRefresh || reloads != s.wantReload {
			t.Fatalf("%s: stale = %v, refreshes %d reloads %d; want %v, %d, %d", s.name, got, refreshes, reloads, s.refreshed, s.wantRefresh, s.wantReload)
		}
	}
	if m.sent.Load() != 5 {
		t.Errorf("sent = %d, want 5", m.sent.Load())
	}
	var none *slotMap // not a cluster
	if none.stale(ctx, t0, true) {
		t.Error("a nil slotMap refreshed")
	}
}

// TestLoadsSingleFlight: one load per server at a time, shared by every caller that
// waits for it; a caller whose deadline ends stops waiting but not the load; a load that
// succeeded since a call was sent is not repeated; a failed load reaches its waiters.
func TestLoadsSingleFlight(t *testing.T) {
	var l loads
	release := make(chan error)
	started := make(chan string, 8)
	load := func(server string) func(context.Context) error {
		return func(ctx context.Context) error {
			started <- server
			select {
			case err := <-release:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	epoch := l.epoch()
	results := make(chan error, 4)
	for range 3 {
		go func() { results <- l.await(context.Background(), "a:1", epoch, load("a:1")) }()
	}
	if s := <-started; s != "a:1" {
		t.Fatalf("load started on %q", s)
	}
	// A caller that gives up while the load runs.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.await(ctx, "a:1", epoch, load("a:1")); !errors.Is(err, errLoadWait) || !errors.Is(err, context.Canceled) {
		t.Fatalf("a caller that left got %v, want errLoadWait", err)
	}
	// Another server loads at the same time.
	go func() { results <- l.await(context.Background(), "b:1", epoch, load("b:1")) }()
	if s := <-started; s != "b:1" {
		t.Fatalf("load started on %q, want b:1", s)
	}
	release <- nil
	release <- nil
	for range 4 {
		if err := <-results; err != nil {
			t.Fatalf("a waiter got %v", err)
		}
	}
	if n := l.sent.Load(); n != 2 {
		t.Fatalf("%d loads for two servers", n)
	}
	select {
	case s := <-started:
		t.Fatalf("a second load started on %s", s)
	default:
	}
	// A call sent before those loads ended asks again rather than loading.
	if err := l.await(context.Background(), "a:1", epoch, load("a:1")); err != nil || l.sent.Load() != 2 {
		t.Fatalf("a stale miss: %v, %d loads", err, l.sent.Load())
	}
	// A failed load reaches its waiters, and does not count as done.
	epoch = l.epoch()
	go func() { results <- l.await(context.Background(), "a:1", epoch, load("a:1")) }()
	<-started
	release <- errors.New("OOM")
	if err := <-results; err == nil || err.Error() != "OOM" {
		t.Fatalf("the waiter of a failed load got %v", err)
	}
	if l.epoch() != epoch {
		t.Fatal("a failed load counted as done")
	}
}

// TestOutcomeOf pins how each failure resolves the breaker: a missing script and a wait
// for a load never count towards it.
func TestOutcomeOf(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want outcome
	}{
		{"missing library", replyError("ERR Function not found"), succeeded},
		{"missing script", replyError("NOSCRIPT No matching script."), succeeded},
		{"waited for a load", fmt.Errorf("%w: %w", errLoadWait, context.DeadlineExceeded), abandoned},
		{"a load that failed: OOM", replyError("OOM command not allowed"), failed},
		{"refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, failed},
		{"moved", replyError("MOVED 3999 127.0.0.1:6381"), failed},
		{"clusterdown", replyError("CLUSTERDOWN The cluster is down"), failed},
		{"deadline", context.DeadlineExceeded, failed},
		{"script error", fmt.Errorf("%w: x", algorithms.ErrReply), succeeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := outcomeOf(classify(context.Background(), c.err), c.err); got != c.want {
				t.Errorf("outcomeOf(%v) = %d, want %d", c.err, got, c.want)
			}
		})
	}
}

// TestRemedies: the replies that say a node did not run the call are resent, a missing
// script is loaded, and nothing else is either (a reply after the script ran, a network
// error: the call may have been charged).
func TestRemedies(t *testing.T) {
	want := map[string]remedy{
		"MOVED 1 127.0.0.1:1": resend, "ASK 1 127.0.0.1:1": resend, "CLUSTERDOWN The cluster is down": resend,
		"TRYAGAIN Multiple keys request during rehashing of slot": resend, "READONLY You can't write against a read only replica.": resend,
		"NOSCRIPT No matching script.": reload, "ERR Function not found": reload,
		"OOM command not allowed": noRemedy, "RLCTL deadline passed": noRemedy, "BUSY Redis is busy": noRemedy, "ERR other": noRemedy,
	}
	for msg, r := range want {
		if got := remedyOf(replyError(msg)); got != r {
			t.Errorf("remedyOf(%q) = %d, want %d", msg, got, r)
		}
	}
	for _, err := range []error{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, context.DeadlineExceeded, errors.New("MOVED 1 127.0.0.1:1")} {
		if got := remedyOf(err); got != noRemedy {
			t.Errorf("remedyOf(%v), not a reply, = %d", err, got)
		}
	}
}
