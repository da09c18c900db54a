package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/luahost"
)

// replyError is a Redis error reply, as go-redis returns one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// fakeBackend is a network backend (the decision deadline applies to it) that runs calls on
// an in-process host unless fail returns an error for them, and counts calls.
type fakeBackend struct {
	inner *Local
	calls atomic.Int64
	mu    sync.Mutex
	fail  func(ctx context.Context, argv []string) error
}

func (f *fakeBackend) Eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error) {
	f.calls.Add(1)
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail != nil {
		if err := fail(ctx, argv); err != nil {
			return nil, err
		}
	}
	return f.inner.Eval(context.WithoutCancel(ctx), s, keys, argv)
}

func (f *fakeBackend) Del(ctx context.Context, keys ...string) error {
	return f.inner.Del(ctx, keys...)
}

func (f *fakeBackend) failWith(fn func(ctx context.Context, argv []string) error) {
	f.mu.Lock()
	f.fail = fn
	f.mu.Unlock()
}

// load loads the script into the inner host, as New does for a Local.
func (f *fakeBackend) load(s *algorithms.Script) { f.inner.load(s) }

func newFake(clock *frozen) *fakeBackend {
	return &fakeBackend{inner: NewLocal(luahost.New(luahost.WithClock(clockFunc(clock.now))))}
}

func modePolicy(mode, rule string) string {
	return fmt.Sprintf(`
policy "p" {
  on_error = %q
  rule "r" {
    key = request.user
    %s
  }
}`, mode, rule)
}

const gcraRule = `algorithm = "gcra"
    rate      = "1/h"
    burst     = 100`

const leaseRule = `algorithm = "concurrency"
    max       = 3
    ttl       = "10m"`

// wantByMode is what a degraded decision looks like under each on_error mode.
var wantByMode = map[string]struct {
	src     Source
	allowed bool
}{
	"allow": {FromFailOpen, true},
	"deny":  {FromFailDeny, false},
	"local": {FromLocal, true},
}

// TestEveryBackendErrorIsDecidedByOnError: whatever a backend call ends with (each error
// reply of the classification table, a reply no row knows, a script runtime error, a
// network error, a timeout, a malformed reply), no error reaches the caller: the policy's
// on_error decides, the Degraded hook hears of it, and Decision.Err holds the failure.
// (An OOM reply used to come back as engine.ErrScript and an HTTP 500.)
func TestEveryBackendErrorIsDecidedByOnError(t *testing.T) {
	failures := map[string]error{
		"unknown reply": replyError("ERR something new"),
		"script error":  &luahost.ErrorReply{Msg: "ERR user_script:3: attempt to index a nil value script: 1234, on @user_script:3."},
		"refused":       &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED},
		"reset":         &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET},
		"timeout":       context.DeadlineExceeded,
		"eof":           io.EOF,
		"closed client": redis.ErrClosed,
	}
	for _, r := range ReplyClasses {
		failures[r.Prefix] = replyError(r.Prefix + " something")
	}
	for mode, want := range wantByMode {
		for name, ferr := range failures {
			t.Run(mode+"/"+name, func(t *testing.T) {
				clock := newFrozen()
				b := newFake(clock)
				b.failWith(func(context.Context, []string) error { return ferr })
				var degraded []error
				e := New(b, compile(t, modePolicy(mode, gcraRule)), WithClock(clock.now),
					WithHooks(Hooks{Degraded: func(_, m string, err error) {
						if m != mode {
							t.Errorf("Degraded hook mode %q, want %q", m, mode)
						}
						degraded = append(degraded, err)
					}}))
				d, err := e.Allow(context.Background(), Attrs{"user": "u"})
				if err != nil {
					t.Fatalf("the caller got an error: %v", err)
				}
				if d.Source != want.src || d.Allowed != want.allowed {
					t.Fatalf("decision source %d allowed %v, want %d %v", d.Source, d.Allowed, want.src, want.allowed)
				}
				if len(degraded) != 1 || !errors.Is(degraded[0], ferr) || !errors.Is(d.Err, ferr) {
					t.Fatalf("Degraded hook got %v, Decision.Err %v; want %v", degraded, d.Err, ferr)
				}
			})
		}
	}
}

// TestClassify pins the classes that decide whether a failure counts towards the breaker.
func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want Class
	}{
		{replyError("OOM command not allowed when used memory > 'maxmemory'."), ClassBackend},
		{replyError("READONLY You can't write against a read only replica."), ClassBackend},
		{replyError("RLCTL deadline passed: nothing was charged"), ClassBackend},
		{replyError("RLCTL protocol mismatch"), ClassScript},
		{replyError("ERR user_script:1: oops"), ClassScript},
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), ClassScript},
		{fmt.Errorf("%w: 2 values", algorithms.ErrReply), ClassScript},
		{fmt.Errorf("%w: cost", ErrRequest), ClassCaller},
		// A Decision.Err: the engine wraps a script's error reply, keeping its class.
		{fmt.Errorf("%w: %w", ErrScript, replyError("WRONGTYPE Operation against a key holding the wrong kind of value")), ClassScript},
		{ErrBreakerOpen, ClassBackend},
		{context.DeadlineExceeded, ClassBackend},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, ClassBackend},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := classify(ctx, context.Canceled); got != ClassCaller {
		t.Errorf("a cancelled caller's error is %v, want caller", got)
	}
}

// TestScriptErrorProbeClosesTheBreaker: a half-open probe that gets a script error (the
// server answered) closes the breaker. (It used to leave the breaker probing forever, and
// every later decision said "backend circuit open".)
func TestScriptErrorProbeClosesTheBreaker(t *testing.T) {
	clock := newFrozen()
	b := newFake(clock)
	e := New(b, compile(t, modePolicy("allow", gcraRule)), WithClock(clock.now), WithBreaker(2, time.Second))
	ctx := context.Background()
	b.failWith(func(context.Context, []string) error { return &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED} })
	for range 2 {
		e.Allow(ctx, Attrs{"user": "u"})
	}
	if s := e.br.current(); s != Open {
		t.Fatalf("breaker %v after two failures", s)
	}
	d, _ := e.Allow(ctx, Attrs{"user": "u"})
	if !errors.Is(d.Err, ErrBreakerOpen) {
		t.Fatalf("open breaker: Decision.Err %v", d.Err)
	}
	clock.advance(time.Second)
	b.failWith(func(context.Context, []string) error { return replyError("ERR user_script:1: boom") })
	d, _ = e.Allow(ctx, Attrs{"user": "u"})
	if !errors.Is(d.Err, ErrScript) {
		t.Fatalf("probe: Decision.Err %v, want a script error", d.Err)
	}
	if s := e.br.current(); s != Closed {
		t.Fatalf("breaker %v after a probe the server answered", s)
	}
	b.failWith(nil)
	if d, _ = e.Allow(ctx, Attrs{"user": "u"}); d.Source != FromBackend {
		t.Fatalf("after the probe: source %d, err %v", d.Source, d.Err)
	}
}

// TestCancelledCallersDoNotOpenTheBreaker: callers whose contexts end while their call is
// in flight get their context's error, and however many there are, the breaker stays
// closed for everyone else. (Five cancelled calls used to open it for every caller.)
func TestCancelledCallersDoNotOpenTheBreaker(t *testing.T) {
	for mode := range wantByMode {
		t.Run(mode, func(t *testing.T) {
			clock := newFrozen()
			b := newFake(clock)
			e := New(b, compile(t, modePolicy(mode, gcraRule)), WithClock(clock.now), WithBreaker(2, time.Minute), WithTimeout(time.Minute))
			// Calls of the user "slow" hang until their context ends.
			b.failWith(func(ctx context.Context, argv []string) error {
				if ctxIsSlow(ctx) {
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			})
			for i := range 20 {
				ctx, cancel := context.WithCancel(context.WithValue(context.Background(), slowKey{}, true))
				if i%2 == 0 {
					cancel() // before the call
				} else {
					time.AfterFunc(time.Millisecond, cancel) // during it
				}
				d, err := e.Allow(ctx, Attrs{"user": "attacker"})
				cancel()
				if !errors.Is(err, context.Canceled) || d != nil {
					t.Fatalf("call %d: decision %v, error %v; want context.Canceled", i, d, err)
				}
			}
			if s := e.br.current(); s != Closed {
				t.Fatalf("breaker %v after cancelled callers", s)
			}
			d, err := e.Allow(context.Background(), Attrs{"user": "someone else"})
			if err != nil || d.Source != FromBackend || !d.Allowed {
				t.Fatalf("a healthy caller: %+v, %v", d, err)
			}
		})
	}
}

// A caller whose context ends sooner than the engine's deadline: that is the caller's
// deadline, not a backend failure.
func TestCallerDeadlineIsNotABackendFailure(t *testing.T) {
	clock := newFrozen()
	b := newFake(clock)
	e := New(b, compile(t, modePolicy("deny", gcraRule)), WithClock(clock.now), WithBreaker(1, time.Minute), WithTimeout(time.Minute))
	b.failWith(func(ctx context.Context, _ []string) error {
		if ctxIsSlow(ctx) {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), slowKey{}, true), time.Millisecond)
	defer cancel()
	if _, err := e.Allow(ctx, Attrs{"user": "u"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the caller's context.DeadlineExceeded", err)
	}
	if s := e.br.current(); s != Closed {
		t.Fatalf("breaker %v after a caller's own deadline", s)
	}
}

type slowKey struct{}

func ctxIsSlow(ctx context.Context) bool { v, _ := ctx.Value(slowKey{}).(bool); return v }

// stallingBackend stands for a Redis that stops answering: while stalled, calls wait until
// the caller gives up and stay queued; resume runs them on the server, later, as a Redis
// does when it wakes.
type stallingBackend struct {
	inner   *Local
	clock   *frozen
	mu      sync.Mutex
	stalled bool
	queued  []func() error
}

func (s *stallingBackend) Eval(ctx context.Context, sc *algorithms.Script, keys, argv []string) (any, error) {
	s.mu.Lock()
	if !s.stalled {
		s.mu.Unlock()
		return s.inner.Eval(context.WithoutCancel(ctx), sc, keys, argv)
	}
	s.queued = append(s.queued, func() error {
		_, err := s.inner.Eval(context.Background(), sc, keys, argv)
		return err
	})
	s.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *stallingBackend) Del(ctx context.Context, keys ...string) error {
	return s.inner.Del(ctx, keys...)
}

func (s *stallingBackend) stall() { s.mu.Lock(); s.stalled = true; s.mu.Unlock() }

// resume wakes the server after d and runs the queued calls; it returns their errors.
func (s *stallingBackend) resume(d time.Duration) []error {
	s.clock.advance(d)
	s.mu.Lock()
	q := s.queued
	s.queued, s.stalled = nil, false
	s.mu.Unlock()
	var errs []error
	for _, f := range q {
		errs = append(errs, f())
	}
	return errs
}

// TestNoPhantomChargeAfterAStall: calls abandoned at the deadline while Redis was stalled
// run when it wakes, and charge nothing: a concurrency rule holds no lease nobody will
// release, a counter counts only what callers saw allowed. (A 0.6 s stall used to leave 3
// leases held for ten minutes.)
func TestNoPhantomChargeAfterAStall(t *testing.T) {
	for _, rule := range []string{leaseRule, gcraRule} {
		t.Run(strings.Fields(rule)[2], func(t *testing.T) {
			clock := newFrozen()
			b := &stallingBackend{inner: NewLocal(luahost.New(luahost.WithClock(clockFunc(clock.now)))), clock: clock}
			e := New(b, compile(t, modePolicy("allow", rule)), WithClock(clock.now), WithTimeout(20*time.Millisecond))
			ctx := context.Background()
			before, err := e.Peek(ctx, Attrs{"user": "u"})
			if err != nil || before.Source != FromBackend {
				t.Fatalf("peek: %+v %v", before, err)
			}
			b.stall()
			for range 3 {
				d, err := e.Allow(ctx, Attrs{"user": "u"})
				if err != nil || d.Source != FromFailOpen {
					t.Fatalf("stalled: %+v %v", d, err)
				}
				if err := e.Release(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
			errs := b.resume(600 * time.Millisecond)
			if len(errs) != 3 {
				t.Fatalf("%d calls ran after the stall, want 3", len(errs))
			}
			for _, err := range errs {
				if !algorithms.IsDeadlineError(err) {
					t.Fatalf("a late call ran and answered %v; it must be refused", err)
				}
			}
			after, err := e.Peek(ctx, Attrs{"user": "u"})
			if err != nil || after.Source != FromBackend {
				t.Fatalf("peek: %+v %v", after, err)
			}
			if after.Rules[0].Remaining != before.Rules[0].Remaining {
				t.Fatalf("remaining %d after the stall, %d before: phantom charges", after.Rules[0].Remaining, before.Rules[0].Remaining)
			}
		})
	}
}

// TestReleaseSkipsLeasesNeverTaken: releasing a decision made without the backend sends
// nothing to it; a lease the local fallback took goes back to the local fallback. (Release
// of a fail-open decision used to call the stalled Redis, past breaker and deadline.)
func TestReleaseSkipsLeasesNeverTaken(t *testing.T) {
	for _, mode := range []string{"allow", "local"} {
		t.Run(mode, func(t *testing.T) {
			clock := newFrozen()
			b := newFake(clock)
			b.failWith(func(context.Context, []string) error { return &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED} })
			e := New(b, compile(t, modePolicy(mode, leaseRule)), WithClock(clock.now), WithBreaker(1000, time.Second))
			ctx := context.Background()
			for i := range 10 {
				d, err := e.Allow(ctx, Attrs{"user": "u"})
				if err != nil || !d.Allowed {
					t.Fatalf("request %d: %+v %v (a released lease must free its slot)", i, d, err)
				}
				calls := b.calls.Load()
				if err := e.Release(ctx, d); err != nil {
					t.Fatal(err)
				}
				if b.calls.Load() != calls {
					t.Fatal("Release of a degraded decision called the backend")
				}
			}
		})
	}
}

// TestReleaseOutlivesTheCallersContext: a request whose context was cancelled (its client
// went away) still gives its lease back.
func TestReleaseOutlivesTheCallersContext(t *testing.T) {
	clock := newFrozen()
	b := newFake(clock)
	e := New(b, compile(t, modePolicy("deny", leaseRule)), WithClock(clock.now))
	for i := range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		d, err := e.Allow(ctx, Attrs{"user": "u"})
		if err != nil || !d.Allowed || d.Source != FromBackend {
			t.Fatalf("request %d: %+v %v", i, d, err)
		}
		cancel()
		e.Release(ctx, d)
	}
}

// TestDeadlineHoldsOnADefaultClient: a server that accepts connections and never answers,
// reached with go-redis's default options (ContextTimeoutEnabled false, ReadTimeout 3s):
// decisions return at the engine's deadline, decided by on_error, and the engine warns
// once that the client ignores deadlines. (They used to take the client's 3-5 s.)
func TestDeadlineHoldsOnADefaultClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); ln.Close(); conns.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				go io.Copy(io.Discard, c)
				<-stop
				c.Close()
			})
		}
	}()
	for _, honour := range []bool{false, true} {
		t.Run(fmt.Sprint("ContextTimeoutEnabled=", honour), func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ContextTimeoutEnabled: honour, MaxRetries: -1})
			defer rdb.Close()
			var logs bytes.Buffer
			backend := NewRedis(rdb)
			if backend.HonoursDeadline() != honour {
				t.Fatalf("HonoursDeadline() = %v", backend.HonoursDeadline())
			}
			e := New(backend, compile(t, modePolicy("deny", gcraRule)), WithTimeout(50*time.Millisecond),
				WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if warned := strings.Contains(logs.String(), "ContextTimeoutEnabled"); warned == honour {
				t.Fatalf("warning logged: %v, want %v: %s", warned, !honour, logs.String())
			}
			for range 3 {
				start := time.Now()
				d, err := e.Allow(context.Background(), Attrs{"user": "u"})
				took := time.Since(start)
				if err != nil || d.Source != FromFailDeny {
					t.Fatalf("decision %+v, err %v", d, err)
				}
				// The bound is generous for a shared machine; the failure it catches is
				// the client's 3 s read timeout.
				if took > 1500*time.Millisecond {
					t.Fatalf("decision took %v with a 50ms deadline", took)
				}
			}
		})
	}
}

// waitFor polls cond until it holds, for at most 5 s (the release runs on a goroutine).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not after 5s", what)
}

// TestLostReplyLeaseIsReleased: a lease acquisition that ran on the server but whose reply
// was lost (its connection killed) is decided by on_error, and the engine releases the
// lease once the backend answers again, so it does not hold the key for its ttl.
func TestLostReplyLeaseIsReleased(t *testing.T) {
	clock := newFrozen()
	b := newFake(clock)
	e := New(b, compile(t, modePolicy("allow", leaseRule)), WithClock(clock.now))
	ctx := context.Background()
	b.failWith(func(ctx context.Context, argv []string) error {
		if argv[1] == "check" {
			// Run the call, then lose its reply.
			_, err := b.inner.Eval(ctx, e.plan.script, []string{"rl:p:r:concurrency:u"}, argv)
			if err != nil {
				t.Errorf("the call itself failed: %v", err)
			}
			return io.EOF
		}
		return nil
	})
	d, err := e.Allow(ctx, Attrs{"user": "u"})
	if err != nil || d.Source != FromFailOpen {
		t.Fatalf("lost reply: %+v %v", d, err)
	}
	b.failWith(nil)
	waitFor(t, "the orphaned lease is released", func() bool {
		p, err := e.Peek(ctx, Attrs{"user": "u"})
		return err == nil && p.Source == FromBackend && p.Rules[0].Remaining == 3
	})
}

// TestReleaseRetriedAfterAnOutage: a release that cannot reach the backend goes out once
// the backend answers again.
func TestReleaseRetriedAfterAnOutage(t *testing.T) {
	clock := newFrozen()
	b := newFake(clock)
	e := New(b, compile(t, modePolicy("deny", leaseRule)), WithClock(clock.now))
	ctx := context.Background()
	d, err := e.Allow(ctx, Attrs{"user": "u"})
	if err != nil || d.Source != FromBackend || !d.Allowed {
		t.Fatalf("allow: %+v %v", d, err)
	}
	b.failWith(func(context.Context, []string) error { return &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED} })
	e.Release(ctx, d)
	b.failWith(nil)
	waitFor(t, "the lease is released after the outage", func() bool {
		p, err := e.Peek(ctx, Attrs{"user": "u"})
		return err == nil && p.Source == FromBackend && p.Rules[0].Remaining == 3
	})
}

// TestServerClockJump: when the server's clock jumps ahead of the engine's estimate, the
// first call is refused as late (and decided by on_error), its reply corrects the
// estimate, and the next call succeeds.
func TestServerClockJump(t *testing.T) {
	client, server := newFrozen(), newFrozen()
	b := &fakeBackend{inner: NewLocal(luahost.New(luahost.WithClock(clockFunc(server.now))))}
	e := New(b, compile(t, modePolicy("allow", gcraRule)), WithClock(client.now))
	ctx := context.Background()
	if d, err := e.Peek(ctx, Attrs{"user": "u"}); err != nil || d.Source != FromBackend {
		t.Fatalf("first call: %+v %v", d, err)
	}
	server.advance(time.Hour)
	d, err := e.Allow(ctx, Attrs{"user": "u"})
	if err != nil || d.Source != FromFailOpen || !algorithms.IsDeadlineError(d.Err) {
		t.Fatalf("after the jump: %+v %v", d, err)
	}
	if d, err := e.Allow(ctx, Attrs{"user": "u"}); err != nil || d.Source != FromBackend {
		t.Fatalf("after the correction: %+v %v", d, err)
	}
}

// TestServerClockDeadline: the deadline is the give-up instant moved by the lower bound of
// the offset from the recent call with the shortest round trip.
func TestServerClockDeadline(t *testing.T) {
	var c serverClock
	if d := c.deadline(1000, 50); d != 0 {
		t.Fatalf("no sample: deadline %d, want none", d)
	}
	c.observe(1000, 1400, 5400) // rtt 400, offset >= 4000
	c.observe(2000, 2100, 6050) // rtt 100, offset >= 3950
	c.observe(3000, 3900, 7950) // rtt 900, offset >= 4050
	if d := c.deadline(10_000, 50); d != 10_000+50+3950 {
		t.Fatalf("deadline %d, want %d", d, 10_000+50+3950)
	}
	for i := range 8 { // the fastest sample ages out
		c.observe(int64(i), int64(i)+200, int64(i)+200+4000)
	}
	if d := c.deadline(10_000, 50); d != 10_000+50+4000 {
		t.Fatalf("deadline %d, want %d", d, 10_000+50+4000)
	}
}

// TestDeadlineErrorCarriesServerTime pins the parse of the script's deadline reply.
func TestDeadlineErrorCarriesServerTime(t *testing.T) {
	us, ok := algorithms.DeadlineServerTime(replyError("RLCTL deadline passed at 1764460800 000123: the caller stopped waiting"))
	if !ok || us != 1764460800_000123 {
		t.Fatalf("got %d %v", us, ok)
	}
	if _, ok := algorithms.DeadlineServerTime(replyError("RLCTL protocol mismatch")); ok {
		t.Fatal("another RLCTL error read as a deadline error")
	}
}

// TestScriptErrorLogNamesTheFile: a script error is logged with the file and line of the
// algorithm's own source, not the assembled script's line.
func TestScriptErrorLogNamesTheFile(t *testing.T) {
	clock := newFrozen()
	b := newFake(clock)
	plan := compile(t, modePolicy("allow", gcraRule))
	line := 0
	for n := 1; n < 10_000 && line == 0; n++ {
		if f, _, ok := plan.Script().Position(n); ok && f == "gcra.lua" {
			line = n
		}
	}
	if line == 0 {
		t.Fatal("no line of the script comes from gcra.lua")
	}
	b.failWith(func(context.Context, []string) error {
		return replyError(fmt.Sprintf("ERR user_script:%d: attempt to perform arithmetic on a nil value", line))
	})
	var logs bytes.Buffer
	e := New(b, plan, WithClock(clock.now), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if d, err := e.Allow(context.Background(), Attrs{"user": "u"}); err != nil || !errors.Is(d.Err, ErrScript) {
		t.Fatalf("%+v %v", d, err)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "gcra.lua:") {
		t.Fatalf("the log does not name gcra.lua at error level:\n%s", logs.String())
	}
}
