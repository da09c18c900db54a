package engine

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/internal/redistest"
)

// The fault suite's leased rows: the callers decide a fixed_window rule served from quota
// leases (lease_size, engine/lease.go) on one key, through quotaEngines engines of clients
// of their own, as the instances of a service would. Each engine takes slices of quotaLease
// units in one call (charged on Redis as they are taken) and spends them with no call; the
// demand (8 callers an engine) empties a slice in a few tens of milliseconds, so the fault
// lands on the takes of slices that ran dry, and on the callers waiting for them. What the
// leases promise, checked on the key after every row (checkQuota):
//
//   - no unit is admitted beyond what Redis counted: the units admitted by every engine
//     (decisions from a lease, or by Redis) plus those they hold unspent are at most the
//     key's count on Redis (plus, after a kill, the count the restarted server forgot);
//   - what Redis counts beyond them (units lost: taken and never spent, as a slice whose
//     take's reply was lost) is at most what the calls that got no answer may have taken:
//     lease_size for each unanswered take or failed refund, the cost for each unanswered
//     call of a request decided on Redis after its take failed. It is reported, with that
//     bound; a late take charges nothing (the deadline travels with it, as with any call);
//   - a take of every engine failed during a stall or a kill (the fault met the takes), and
//     ReturnLeases gives back to Redis what the engines hold.

const (
	quotaEngines = 4  // engines deciding the leased rows' key, each on a client of its own
	quotaLease   = 10 // their rule's lease_size
)

// quotaWindow is the leased rule's window: a run that crosses one (every 100 hours) is
// not checked, as its counts are split between two windows.
const quotaWindow = 100 * time.Hour

// quotaPolicy is the leased rows' policy: one key of a fixed_window rule served from quota
// leases, with a limit nobody reaches, so that the key's count is what the engines took.
func quotaPolicy(mode string) string {
	return fmt.Sprintf(`
policy "quota" {
  match    = request.kind == "quota"
  on_error = %[1]q
  rule "global" {
    algorithm  = "fixed_window"
    key        = request.user
    limit      = %[2]d
    window     = "%[3]dh"
    lease_size = %[4]d
  }
}`, mode, faultBurst, int(quotaWindow.Hours()), quotaLease)
}

// quotaRun is a leased row's engines and what they sent.
type quotaRun struct {
	engines []*Engine
	clients []redis.UniversalClient
	req     Attrs  // every caller's request: one key
	key     string // its rule key (RuleResult.Key), as Engine.Leased and Redis name it
	window  int64  // the window the run began in
	calls   quotaCalls
}

// quotaCalls counts the calls the engines sent while the load ran, by op ("most" is a
// take; "check" a request decided on Redis after its take failed; "refund" a slice's
// leftover given back), from their Called hooks.
type quotaCalls struct {
	counting  atomic.Bool
	faultedAt atomic.Int64 // unix nanoseconds: when the fault began; 0 before
	mu        sync.Mutex
	byOp      map[string]*opCounts
	takesInto [quotaEngines]int64 // by engine: takes that failed once the fault had begun
	takeErrs  errCounts           // the failures of takes, by kind (a take's failure is not a degraded decision's)
}

// opCounts are the calls of one op: sent; failed (any error); unanswered (sent, no answer:
// each may have run, see unanswered); late, those of unanswered that timed out rather than
// lost their connection; lateInFlight, those of late that were sent before the fault began
// (Redis may have run them before a stall).
type opCounts struct{ sent, failed, unanswered, late, lateInFlight int64 }

func (c *quotaCalls) called(engine int) func(CallStats) {
	return func(cs CallStats) {
		if !c.counting.Load() {
			return
		}
		start := time.Now().Add(-cs.Duration).UnixNano()
		fa := c.faultedAt.Load()
		c.mu.Lock()
		defer c.mu.Unlock()
		o := c.byOp[cs.Op]
		if o == nil {
			o = &opCounts{}
			c.byOp[cs.Op] = o
		}
		o.sent++
		if cs.Err == nil {
			return
		}
		o.failed++
		if cs.Op == "most" {
			c.takeErrs.add(cs.Err)
			if fa != 0 {
				c.takesInto[engine]++
			}
		}
		if !unanswered(cs.Err) {
			return
		}
		o.unanswered++
		if timedOut(cs.Err) {
			o.late++
			if fa == 0 || start < fa {
				o.lateInFlight++
			}
		}
	}
}

func (c *quotaCalls) op(name string) opCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.byOp[name]; o != nil {
		return *o
	}
	return opCounts{}
}

// newQuotaRun makes a leased row's engines, with the options of the row's engines and a
// Called hook each, and reads the key's name from Redis through a long-deadline engine.
func newQuotaRun(t *testing.T, plan *Plan, f fault, run string, newClient func(tuned bool) redis.UniversalClient,
	bopts []RedisOption, timeout time.Duration, hooks Hooks) *quotaRun {
	q := &quotaRun{req: Attrs{"kind": "quota", "user": run + "quota"}}
	q.calls.byOp = map[string]*opCounts{}
	for i := range quotaEngines {
		c := newClient(f.tuned)
		h := hooks
		h.Called = q.calls.called(i)
		q.clients = append(q.clients, c)
		q.engines = append(q.engines, New(NewRedis(c, bopts...), plan, WithTimeout(timeout), WithBreaker(faultFailures, faultCooldown), WithHooks(h)))
	}
	// A peek charges nothing and takes no slice.
	warm := New(NewRedis(q.clients[0]), plan, WithTimeout(time.Minute))
	d, err := warm.Peek(context.Background(), q.req)
	if err != nil || d.Source != FromBackend || len(d.Rules) != 1 {
		t.Fatalf("warm-up peek of the quota key on a healthy server: %+v, %v", d, err)
	}
	q.key = d.Rules[0].Key
	q.window = time.Now().UnixMicro() / quotaWindow.Microseconds()
	return q
}

func (q *quotaRun) close() {
	if q == nil {
		return
	}
	for _, c := range q.clients {
		c.Close()
	}
}

// count starts or stops counting the engines' calls.
func (q *quotaRun) count(on bool) {
	if q != nil {
		q.calls.counting.Store(on)
	}
}

// faulted marks the fault's beginning.
func (q *quotaRun) faulted() {
	if q != nil {
		q.calls.faultedAt.Store(time.Now().UnixNano())
	}
}

// leaseRow is what a leased row measured on its key.
type leaseRow struct {
	Engines int
	// FromLease counts the decisions made from a lease with no call.
	FromLease int
	// Takes, TakesFailed and TakesUnanswered count the takes sent, those that failed and
	// those of them that got no answer (each may have taken up to lease_size units).
	Takes, TakesFailed, TakesUnanswered int64
	// Admitted counts the units the engines admitted (from leases, or decided by Redis),
	// Held those they hold unspent after the load, Count the key's count on Redis, and
	// Forgotten the count a killed server forgot (-1: no kill).
	Admitted, Held, Count, Forgotten int64
	// Over is what was admitted and held beyond what Redis counted (0 is the promise);
	// Lost what Redis counts beyond what was admitted and held, and Bound what the
	// unanswered calls may have taken.
	Over, Lost, Bound int64
	// TakeErrs counts the takes' failures by kind.
	TakeErrs map[string]int
}

// checkQuota checks the leases' promises on the key of a leased row once the load ended
// (see the top of this file), and writes the row's figures: Lost is the calls sent
// unanswered, Phantom what Redis counts beyond the bound, LateCharged (for a stall) what
// it counts beyond the calls it may have run in time.
func (q *quotaRun) check(t *testing.T, f fault, l *faultLoad, env *faultEnv, row *faultRow) {
	t.Helper()
	lr := &leaseRow{Engines: len(q.engines), Forgotten: env.forgotten}
	row.Lease = lr
	for i := range l.callers {
		lr.Admitted += l.callers[i].allowedByRedis
	}
	for _, e := range q.engines {
		lr.Held += e.Leased(q.key)
	}
	take, check, refund := q.calls.op("most"), q.calls.op("check"), q.calls.op("refund")
	lr.Takes, lr.TakesFailed, lr.TakesUnanswered = take.sent, take.failed, take.unanswered
	lr.TakeErrs = q.calls.takeErrs.counts()
	row.Lost = take.unanswered + check.unanswered + refund.unanswered
	d := peekFromRedis(t, q.engines[0], q.req)
	if d == nil {
		return
	}
	lr.Count = d.Rules[0].Limit - d.Rules[0].Remaining
	forgotten := max(lr.Forgotten, 0)
	lr.Over = max(0, lr.Admitted+lr.Held-lr.Count-forgotten)
	lr.Lost = lr.Count + forgotten - lr.Admitted - lr.Held
	lr.Bound = quotaLease*(take.unanswered+refund.failed) + check.unanswered
	if w := time.Now().UnixMicro() / quotaWindow.Microseconds(); w != q.window {
		t.Logf("the run crossed a window boundary of the quota key: its counts are not checked")
		return
	}
	if lr.Over > 0 {
		t.Errorf("%s: the engines admitted %d units and hold %d, %d beyond what Redis counted (%d, and %d forgotten by a restart)",
			q.key, lr.Admitted, lr.Held, lr.Over, lr.Count, forgotten)
	}
	if row.Phantom = max(0, lr.Lost-lr.Bound); row.Phantom > 0 {
		t.Errorf("phantom charge: %s counts %d units beyond the %d admitted and %d held; the unanswered calls may have taken %d (%d takes, %d refunds failed, %d calls)",
			q.key, lr.Lost, lr.Admitted, lr.Held, lr.Bound, take.unanswered, refund.failed, check.unanswered)
	}
	if f.stalls {
		// A late take or call must charge nothing: only those whose connection failed,
		// and those in flight when the stall began, are excused.
		excused := quotaLease*(take.unanswered-take.late+take.lateInFlight+refund.failed) + check.unanswered - check.late + check.lateInFlight
		row.LateCharged = max(0, lr.Lost-excused)
	}
	if f.stalls || lr.Forgotten >= 0 {
		for i, n := range q.calls.takesInto {
			if n == 0 {
				t.Errorf("no take of engine %d failed during the fault: the row did not test a take during the fault", i)
			}
		}
	}
	// What the engines hold goes back.
	var rerr error
	for _, e := range q.engines {
		if err := e.ReturnLeases(context.Background()); err != nil && rerr == nil {
			rerr = err
		}
	}
	if rerr != nil {
		t.Logf("ReturnLeases after the fault: %v", rerr)
		return
	}
	if d := peekFromRedis(t, q.engines[0], q.req); d != nil {
		if n := d.Rules[0].Limit - d.Rules[0].Remaining; n != lr.Count-lr.Held {
			t.Errorf("after ReturnLeases Redis counts %d on %s, want %d: %d counted less the %d held", n, q.key, lr.Count-lr.Held, lr.Count, lr.Held)
		}
	}
}

// windowCount is a read-only script that returns the count a fixed_window key holds, in
// either of its forms (see lua/fixed_window.lua's Forms): 0 for no key.
const windowCount = `local t = redis.call('HGETALL', KEYS[1])
if #t == 2 then
  return tonumber(t[2])
end
for i = 1, #t - 1, 2 do
  if t[i] == 'n' then
    return tonumber(t[i + 1])
  end
end
return 0`

// killCounted is kill for the leased rows. It first reads the quota key's count, which the
// restarted server will have forgotten (env.forgotten), with the server's writes paused
// (CLIENT PAUSE WRITE holds every script call) so that no charge lands between the read
// and the kill: the calls it holds are in flight when the server dies.
func killCounted(t *testing.T, env *faultEnv) func() {
	do(t, env.target, "CLIENT", "PAUSE", "10000", "WRITE")
	n, err := env.target.Do("EVAL_RO", windowCount, "1", env.quotaKey)
	if err != nil {
		t.Errorf("the count of %s: %v", env.quotaKey, err)
	} else {
		v, perr := strconv.ParseInt(n, 10, 64)
		if perr != nil {
			t.Errorf("the count of %s: %q", env.quotaKey, n)
		}
		env.forgotten = v
	}
	return kill(t, env)
}

// leaseHolderPolicy is TestFaultsLeaseHolderKilled's policy: one key served from slices of
// 10, a limit of 100 in windows of 10 s on the engines' clock (a virtual one, so that a
// window ends when the test moves it); holdFor is lease_for ("": the window).
func leaseHolderPolicy(holdFor string) string {
	hold := ""
	if holdFor != "" {
		hold = fmt.Sprintf("lease_for  = %q", holdFor)
	}
	return fmt.Sprintf(`
policy "quota" {
  clock = "client"
  rule "global" {
    algorithm  = "fixed_window"
    key        = "all"
    limit      = %d
    window     = "10s"
    lease_size = %d
    %s
  }
}`, holderLimit, holderLease, hold)
}

const (
	holderEngines = 4 // instances leasing the key; the first is the holder that dies
	holderCallers = 4 // concurrent callers of each surviving instance
	holderLimit   = 100
	holderLease   = 10
	holderSpent   = 3 // what the holder spends of its slice before it dies
)

var holderWindow = 10 * time.Second

// holderRow is what TestFaultsLeaseHolderKilled measured with one lease_for.
type holderRow struct {
	Hold string
	// Dead is what the holder held when it died; Admitted what every instance admitted in
	// that window (the holder's included), Count Redis's count of it, Lost the limit less
	// Admitted.
	Dead, Admitted, Count, Lost int64
	// AfterHold is what the survivors admitted once the holder's hold had ended, in the
	// same window (-1: lease_for is the window).
	AfterHold int64
	// Next is what the survivors admitted in the next window, and NextCount Redis's count.
	Next, NextCount int64
	// Decisions counts the survivors' decisions, Errors those that failed or did not come
	// from Redis or a lease; MostHeld is the most another instance held when one was
	// denied.
	Decisions, Errors int
	MostHeld          int64
}

// TestFaultsLeaseHolderKilled drops an instance that holds a slice of a leased key without
// ReturnLeases, as a crashed process is dropped, while the other instances (engines on
// clients of their own, on a real redis-server) keep deciding the key, 16 callers at once,
// until each is denied. The limit is never exceeded, and the capacity the holder took to
// its death is lost, exactly its slice's unspent units and at most lease_size, until its
// window ends: past its lease_for nobody is left to return it, and in the next window the
// survivors admit the whole limit again. The clock is virtual (a client-clock policy), so
// that the windows end when the test says.
func TestFaultsLeaseHolderKilled(t *testing.T) {
	srv := redistest.Start(t)
	var rows []holderRow
	for _, hold := range []string{"", "3s"} {
		t.Run(fmt.Sprintf("lease_for=%q", hold), func(t *testing.T) {
			rows = append(rows, runHolderKilled(t, srv, hold))
		})
	}
	reportHolder(t, rows)
}

func runHolderKilled(t *testing.T, srv *redistest.Server, hold string) holderRow {
	row := holderRow{Hold: hold, AfterHold: -1}
	if hold == "" {
		row.Hold = "the window"
	}
	clock := newFrozen()
	plan := compile(t, leaseHolderPolicy(hold))
	ctx := context.Background()
	if _, err := srv.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	engines := make([]*Engine, holderEngines)
	clients := make([]*redis.Client, holderEngines)
	for i := range engines {
		clients[i] = redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { clients[i].Close() })
		// A healthy server: a deadline no loaded machine misses.
		engines[i] = New(NewRedis(clients[i]), plan, WithClock(clock.now), WithTimeout(10*faultTimeout))
	}
	var key string
	decide := func(e *Engine) *Decision {
		d, err := e.Allow(ctx, Attrs{})
		if err != nil || (d.Source != FromLease && d.Source != FromBackend) {
			t.Fatalf("a decision of a healthy server: %+v, %v", d, err)
		}
		key = d.Rules[0].Key
		if e != engines[0] {
			row.Decisions++ // no drain runs meanwhile
		}
		return d
	}
	count := func() int64 {
		d, err := engines[1].Peek(ctx, Attrs{})
		if err != nil || d.Source != FromBackend {
			t.Fatalf("peek: %+v, %v", d, err)
		}
		return d.Rules[0].Limit - d.Rules[0].Remaining
	}

	// Every instance takes a slice; the holder spends holderSpent units of its own.
	admitted := int64(0)
	for _, e := range engines {
		if decide(e).Allowed {
			admitted++
		}
	}
	for range holderSpent - 1 {
		if decide(engines[0]).Allowed {
			admitted++
		}
	}
	row.Dead = engines[0].Leased(key)
	if row.Dead != holderLease-holderSpent {
		t.Fatalf("the holder holds %d units, want %d: a slice of %d less the %d it spent", row.Dead, holderLease-holderSpent, holderLease, holderSpent)
	}
	// The holder dies: no ReturnLeases, its connections close, nobody asks it again.
	clients[0].Close()
	survivors := engines[1:]

	// drain has the survivors decide, holderCallers each at once, each caller until it is
	// denied (at most twice the limit, for at most a minute), and returns what they admitted.
	drain := func() int64 {
		var admitted atomic.Int64
		var mu sync.Mutex
		var wg sync.WaitGroup
		deadline := time.Now().Add(time.Minute)
		for i, e := range survivors {
			for range holderCallers {
				wg.Go(func() {
					for n := 0; n < 2*holderLimit && time.Now().Before(deadline); n++ {
						d, err := e.Allow(ctx, Attrs{})
						mu.Lock()
						row.Decisions++
						if err != nil || (d.Source != FromLease && d.Source != FromBackend) {
							row.Errors++
							t.Errorf("a survivor's decision: %+v, %v", d, err)
							mu.Unlock()
							return
						}
						mu.Unlock()
						if d.Allowed {
							admitted.Add(1)
							continue
						}
						for j, o := range survivors {
							if h := o.Leased(key); j != i {
								mu.Lock()
								row.MostHeld = max(row.MostHeld, h)
								mu.Unlock()
							}
						}
						return
					}
					t.Errorf("a survivor's caller was never denied in %d decisions", 2*holderLimit)
				})
			}
		}
		wg.Wait()
		// A denied instance holds nothing: its slice ran dry and Redis had no more.
		for i, e := range survivors {
			if h := e.Leased(key); h != 0 {
				t.Errorf("survivor %d holds %d units after it was denied", i+1, h)
			}
		}
		return admitted.Load()
	}

	admitted += drain()
	row.Admitted, row.Count, row.Lost = admitted, count(), holderLimit-admitted
	if row.Count > holderLimit || row.Admitted+row.Dead != row.Count {
		t.Errorf("Redis counts %d of a limit of %d; the instances admitted %d and the dead holder held %d", row.Count, holderLimit, row.Admitted, row.Dead)
	}
	if row.Lost != row.Dead || row.Lost > holderLease {
		t.Errorf("%d of the window's %d lost, want the dead holder's %d (at most lease_size %d)", row.Lost, holderLimit, row.Dead, holderLease)
	}
	if row.MostHeld > holderLease {
		t.Errorf("an instance was denied while another held %d units, above lease_size %d", row.MostHeld, holderLease)
	}

	if hold != "" {
		// Past the holder's hold, in the same window: nobody returns its slice.
		d, err := time.ParseDuration(hold)
		if err != nil {
			t.Fatal(err)
		}
		clock.advance(d + time.Second)
		if clock.now().UnixMicro()/holderWindow.Microseconds() != newFrozen().now().UnixMicro()/holderWindow.Microseconds() {
			t.Fatalf("lease_for %s does not end within the first window", hold)
		}
		row.AfterHold = drain()
		if row.AfterHold != 0 || count() != row.Count {
			t.Errorf("past the dead holder's hold the survivors admitted %d and Redis counts %d, want 0 and %d: its slice is lost until the window ends", row.AfterHold, count(), row.Count)
		}
	}

	// The window ends: the holder's units stopped counting with it.
	now := clock.now().UnixMicro()
	w := holderWindow.Microseconds()
	clock.advance(time.Duration((now/w+1)*w-now) * time.Microsecond)
	// What leasing costs: the first survivor takes a slice and holds what it does not
	// spend while the others spend the rest of the window and are denied.
	row.Next = 0
	if decide(survivors[0]).Allowed {
		row.Next++
	}
	for _, e := range survivors[1:] {
		for n := 0; n <= 2*holderLimit; n++ {
			if n == 2*holderLimit {
				t.Fatalf("a survivor was never denied in %d decisions", n)
			}
			if decide(e).Allowed {
				row.Next++
				continue
			}
			row.MostHeld = max(row.MostHeld, survivors[0].Leased(key))
			break
		}
	}
	row.Next += drain()
	row.NextCount = count()
	if row.Next != holderLimit || row.NextCount != holderLimit {
		t.Errorf("in the next window the survivors admitted %d and Redis counts %d, want the limit, %d", row.Next, row.NextCount, holderLimit)
	}
	for _, e := range survivors {
		if err := e.ReturnLeases(ctx); err != nil {
			t.Errorf("ReturnLeases: %v", err)
		}
	}
	t.Logf("lease_for %s: the dead holder held %d; the window admitted %d, Redis counts %d, %d lost; after its hold %d admitted; the next window admitted %d (Redis %d); %d survivor decisions, %d failed; the most another held while one was denied: %d",
		row.Hold, row.Dead, row.Admitted, row.Count, row.Lost, row.AfterHold, row.Next, row.NextCount, row.Decisions, row.Errors, row.MostHeld)
	return row
}

// reportHolder logs TestFaultsLeaseHolderKilled's table and appends it to RLCTL_RELIABILITY's file.
func reportHolder(t *testing.T, rows []holderRow) {
	var b strings.Builder
	fmt.Fprintf(&b, "| lease_for | dead holder's slice | admitted in its window (all instances) | Redis's count | capacity lost | admitted past its hold, same window | admitted in the next window | survivors' decisions | failed | most held by another while one was denied |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		after := "—"
		if r.AfterHold >= 0 {
			after = fmt.Sprint(r.AfterHold)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %d | %d | %d | %d |\n",
			r.Hold, r.Dead, r.Admitted, r.Count, r.Lost, after, r.Next, r.Decisions, r.Errors, r.MostHeld)
	}
	title := "TestFaultsLeaseHolderKilled: a lease holder dropped without ReturnLeases"
	t.Logf("%s\n%s", title, b.String())
	path := os.Getenv(reliabilityEnv)
	if path == "" {
		return
	}
	head := fmt.Sprintf("### %s\n\n%d instances on a real redis-server, limit %d a %v window, lease_size %d; the holder spent %d of its slice and died, the %d others decided on, %d callers each.\n\n",
		title, holderEngines, holderLimit, holderWindow, holderLease, holderSpent, holderEngines-1, holderCallers)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("%s: %v", reliabilityEnv, err)
		return
	}
	defer f.Close()
	if _, err := f.WriteString(head + b.String() + "\n"); err != nil {
		t.Errorf("%s: %v", reliabilityEnv, err)
	}
}

// leaseStallPolicy is one key served from slices of 10, on the server's clock, decided
// by on_error = "allow" when its take fails.
const leaseStallPolicy = `
policy "quota" {
  on_error = "allow"
  rule "global" {
    algorithm  = "fixed_window"
    key        = "all"
    limit      = 1000
    window     = "100h"
    lease_size = 10
  }
}`

// stalledTake returns an engine on a private redis-server, that server, and the number of
// takes the engine has sent. The engine's deadline is a minute and its breaker opens after
// 1,000 failures, so that a take sent into a stalled server waits for the test, and only
// the takes' own count limits how many it sends.
func stalledTake(t *testing.T) (*Engine, *redistest.Server, *atomic.Int64) {
	srv := redistest.Start(t)
	var takes atomic.Int64
	// Dial once per attempt: a call to a killed server fails at once.
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	e := New(NewRedis(c, Batched(1)), compile(t, leaseStallPolicy), WithTimeout(time.Minute), WithBreaker(1000, time.Second),
		WithLogger(slog.New(slog.DiscardHandler)),
		WithHooks(Hooks{Called: func(cs CallStats) {
			if cs.Op == "most" {
				takes.Add(1)
			}
		}}))
	// The engine's first answer places the deadlines of its calls on the server's clock.
	if d, err := e.Peek(context.Background(), Attrs{}); err != nil || d.Source != FromBackend {
		t.Fatalf("peek on a healthy server: %+v, %v", d, err)
	}
	return e, srv, &takes
}

// untilTest waits, at most ten seconds, for cond, yielding the processor in between.
func untilTest(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
	}
}

// takeInFlight reports whether a slice of e has a take in flight.
func takeInFlight(e *Engine) bool {
	e.leases.mu.Lock()
	defer e.leases.mu.Unlock()
	for _, s := range e.leases.m {
		s.mu.Lock()
		in := s.refill != nil
		s.mu.Unlock()
		if in {
			return true
		}
	}
	return false
}

// waitingForTake counts the goroutines blocked in spend's wait for a take in flight.
func waitingForTake() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		// A blocked goroutine's trace starts at the function that blocked.
		head, rest, _ := strings.Cut(g, "\n")
		if strings.Contains(head, " [select") && strings.HasPrefix(rest, "github.com/rlctl/rlctl/engine.(*Engine).spend(") {
			n++
		}
	}
	return n
}

// collect receives n decisions from ch, for at most ten seconds.
func collect(t *testing.T, ch <-chan decided, n int) []decided {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []decided
	for range n {
		select {
		case r := <-ch:
			out = append(out, r)
		case <-ctx.Done():
			t.Fatalf("%d of %d decisions returned within 10s", len(out), n)
		}
	}
	return out
}

type decided struct {
	d   *Decision
	err error
}

// TestLeaseFailedTakeEndsItsWaiters: callers of a key whose slice ran dry wait for the one
// take in flight; when it fails on the backend (here its server dies under it), each of
// them is decided as the taker is (on the backend, where on_error decides), rather than
// take in turn, each waiting for the failure of the take before it: with a stalled Redis
// and a deadline of d, the k-th caller in line would return after k·d.
func TestLeaseFailedTakeEndsItsWaiters(t *testing.T) {
	const waiters = 7
	e, srv, takes := stalledTake(t)
	srv.Pause(t)
	out := make(chan decided, waiters+1)
	allow := func() {
		d, err := e.Allow(context.Background(), Attrs{})
		out <- decided{d, err}
	}
	go allow()
	untilTest(t, "the first caller's take is in flight", func() bool { return takeInFlight(e) })
	for range waiters {
		go allow()
	}
	untilTest(t, fmt.Sprint(waiters, " callers wait for the take"), func() bool { return waitingForTake() == waiters })
	srv.Kill(t) // the take in flight fails: its connection breaks
	for _, r := range collect(t, out, waiters+1) {
		if r.err != nil || r.d.Source != FromFailOpen || !r.d.Allowed {
			t.Errorf("a caller of a failed take: %+v, %v; want allowed by on_error", r.d, r.err)
		}
	}
	if n := takes.Load(); n != 1 {
		t.Errorf("%d takes for one slice that ran dry: its %d waiters took in turn after the take they waited for failed", n, waiters)
	}
}

// TestLeaseTakeInFlightAtReturnLeases: ReturnLeases runs while a take is in flight (Redis
// stalled, then resumed): what the take brings must go back too, since the engine no
// longer holds the slice it fills and nobody would spend or return those units.
func TestLeaseTakeInFlightAtReturnLeases(t *testing.T) {
	e, srv, _ := stalledTake(t)
	srv.Pause(t)
	out := make(chan decided, 1)
	go func() {
		d, err := e.Allow(context.Background(), Attrs{})
		out <- decided{d, err}
	}()
	untilTest(t, "the caller's take is in flight", func() bool { return takeInFlight(e) })
	if err := e.ReturnLeases(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Resume()
	r := collect(t, out, 1)[0]
	if r.err != nil || !r.d.Allowed {
		t.Fatalf("the caller: %+v, %v", r.d, r.err)
	}
	p, err := e.Peek(context.Background(), Attrs{})
	if err != nil || p.Source != FromBackend {
		t.Fatalf("peek: %+v, %v", p, err)
	}
	key := p.Rules[0].Key
	if count, held := p.Rules[0].Limit-p.Rules[0].Remaining, e.Leased(key); count != 1+held {
		t.Errorf("Redis counts %d on %s after ReturnLeases; the engine admitted 1 and holds %d: %d units taken by the take in flight are held by nobody until the window ends",
			count, key, held, count-1-held)
	}
}
