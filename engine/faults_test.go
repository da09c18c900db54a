package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/internal/redistest"
)

// The fault suite runs the engine as a service would, on a real redis-server, and breaks
// the server under load. Whatever Redis does, the engine promises:
//
//   - no panic, and no error to a caller but its own context's;
//   - every degraded decision follows the policy's on_error;
//   - no decision takes longer than the deadline (plus slack for a shared machine);
//   - no goroutine outlives the calls;
//   - decisions come from Redis again within the breaker's cooldown and one probe once
//     the fault ends;
//   - nothing is charged on Redis that no caller saw allowed by Redis, and no
//     concurrency lease is held that nobody will release;
//   - a call that got no answer by its deadline while the server was stalled, and that the
//     server ran when it resumed, charges nothing (the deadline travels with the call).
//
// RELIABILITY.md states these promises and the figures this suite measures.

const (
	faultTimeout  = 100 * time.Millisecond // engine deadline
	faultFailures = 5                      // breaker threshold
	faultCooldown = 200 * time.Millisecond // breaker cooldown
	// faultSlack is what the latency and recovery bounds allow on top of the engine's own
	// timings: the machine may be a shared 2-core box under -race. What the bounds catch is a
	// caller held for go-redis's 3 s read timeout, or a breaker that never closes.
	faultSlack = time.Second

	faultCallers  = 32                     // concurrent callers of the rate policy
	faultMaxCalls = 20_000                 // per caller: the load loop ends at stop or here
	faultPace     = 10 * time.Millisecond  // a caller's mean pause between calls (5x under -race)
	faultWarmup   = 150 * time.Millisecond // load on a healthy server before the fault
	faultTail     = 100 * time.Millisecond // load after recovery
	faultBurst    = 100_000                // the rate rule's burst: no caller reaches it
	faultLeases   = 3                      // the lease rule's max
	leaseCallers  = faultLeases + 1        // lease acquisitions sent into each fault
	// clusterWritableDelay is how long a restarted Redis Cluster primary refuses writes
	// (CLUSTER_WRITABLE_DELAY in Redis's cluster.c).
	clusterWritableDelay = 2 * time.Second
)

// faultPolicy is the suite's plan: a gcra rule per caller with a burst nobody reaches and a
// rate so slow (1/h) that the charge on a key is exactly the number of requests allowed on
// it, and a concurrency rule whose leases live an hour.
func faultPolicy(mode string) string {
	return fmt.Sprintf(`
policy "rate" {
  match    = request.kind == "rate"
  on_error = %[1]q
  rule "per_caller" {
    algorithm = "gcra"
    key       = request.user
    rate      = "1/h"
    burst     = %[2]d
  }
}

policy "lease" {
  match    = request.kind == "lease"
  on_error = %[1]q
  rule "in_flight" {
    algorithm = "concurrency"
    key       = request.user
    max       = %[3]d
    ttl       = "1h"
  }
}`, mode, faultBurst, faultLeases)
}

var faultModes = []string{"allow", "deny", "local"}

// fault is one way Redis misbehaves. begin starts it on the target server and returns the
// function that ends it, called hold later.
type fault struct {
	name string
	hold time.Duration
	// tuned: the client has the settings the engine asks for (ContextTimeoutEnabled,
	// MaxRetries -1; see Redis); otherwise go-redis's defaults.
	tuned  bool
	cancel bool // half the callers cancel their contexts at random points
	// resends: the fault kills connections and the client retries (go-redis's default).
	// The backend marks every call not to be resent, so a call whose reply was lost is
	// not charged twice: phantom charges are asserted as for the tuned client. Held leases
	// are measured, not asserted, for such a client (one was once seen held with it, its
	// cause not established; the same fault with the tuned client asserts them).
	resends bool
	healthy bool // Redis stays healthy: callers that keep their contexts see only FromBackend
	// stalls: the server is stopped and resumed, and then runs every call queued meanwhile.
	// A call sent after the stop and unanswered at its deadline was not lost: the server ran
	// it late, and it must charge nothing. Only calls whose connection failed are excused a
	// charge, and the calls in flight when the stop landed (one per caller at most): Redis
	// may have run them before the stop, their answers still in its output buffers, which
	// it writes once per turn of its event loop, after every command of that turn.
	stalls  bool
	replica bool // needs a second server to replicate from
	// batched: the engines batch their concurrent calls (Batched, the default), so the
	// fault lands on batches in flight and calls queued behind them; otherwise each call
	// goes alone (Batched(1)).
	batched bool
	// leased: the callers decide a rule served from quota leases (lease_size) on one key,
	// through quotaEngines engines of their own clients, so the fault lands on the takes
	// of slices that ran dry; the charges are checked on that key (see checkQuota).
	leased bool
	// writable: the callers' one key is on a restarted cluster primary, which refuses
	// writes (CLUSTERDOWN) for its first 2 s (Redis's CLUSTER_WRITABLE_DELAY): the
	// recovery bound allows it.
	writable bool
	begin    func(t *testing.T, env *faultEnv) (end func())
}

// faultEnv is what a fault acts on.
type faultEnv struct {
	target *redistest.Server // the server (or cluster node) that misbehaves
	other  *redistest.Server // a second server, for faults with replica set
	// quotaKey is the leased rows' key; forgotten is the count of it that a kill made the
	// server forget (killCounted).
	quotaKey  string
	forgotten int64
}

func pause(t *testing.T, env *faultEnv) func() {
	env.target.Pause(t)
	return env.target.Resume
}

func kill(t *testing.T, env *faultEnv) func() {
	env.target.Kill(t)
	return func() { env.target.Restart(t) }
}

// do runs a command on the target for a fault; a failure is the test's.
func do(t *testing.T, s *redistest.Server, args ...string) {
	if _, err := s.Do(args...); err != nil {
		t.Errorf("%s: %v", strings.Join(args, " "), err)
	}
}

// storm repeats a command on the target every interval until the fault ends.
func storm(every time.Duration, args ...string) func(*testing.T, *faultEnv) func() {
	return func(t *testing.T, env *faultEnv) func() {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				do(t, env.target, args...)
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
		return func() { close(stop); <-done }
	}
}

// oom fills memory past a 1mb maxmemory under noeviction: every write is refused with OOM.
func oom(t *testing.T, env *faultEnv) func() {
	do(t, env.target, "SET", "fault:filler", strings.Repeat("x", 2<<20))
	do(t, env.target, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	do(t, env.target, "CONFIG", "SET", "maxmemory", "1mb")
	return func() {
		do(t, env.target, "CONFIG", "SET", "maxmemory", "0")
		do(t, env.target, "DEL", "fault:filler")
	}
}

// readOnly makes the primary a replica of another server: writes fail with READONLY.
func readOnly(t *testing.T, env *faultEnv) func() {
	host, port, _ := net.SplitHostPort(env.other.Addr())
	do(t, env.target, "REPLICAOF", host, port)
	return func() { do(t, env.target, "REPLICAOF", "NO", "ONE") }
}

func healthy(*testing.T, *faultEnv) func() { return func() {} }

var standaloneFaults = []fault{
	{name: "SIGSTOP 30ms", hold: 30 * time.Millisecond, stalls: true, begin: pause},
	{name: "SIGSTOP 1.5s", hold: 1500 * time.Millisecond, stalls: true, begin: pause},
	{name: "SIGSTOP 1.5s, tuned client", hold: 1500 * time.Millisecond, tuned: true, stalls: true, begin: pause},
	{name: "kill -9, restart on the same port", hold: 300 * time.Millisecond, begin: kill},
	{name: "OOM (maxmemory 1mb, noeviction)", hold: 300 * time.Millisecond, begin: oom},
	{name: "CLIENT KILL TYPE normal every 10ms", hold: 300 * time.Millisecond, resends: true, begin: storm(10*time.Millisecond, "CLIENT", "KILL", "TYPE", "normal")},
	{name: "CLIENT KILL TYPE normal every 10ms, tuned client", hold: 300 * time.Millisecond, tuned: true, begin: storm(10*time.Millisecond, "CLIENT", "KILL", "TYPE", "normal")},
	{name: "SCRIPT FLUSH every 10ms", hold: 300 * time.Millisecond, healthy: true, begin: storm(10*time.Millisecond, "SCRIPT", "FLUSH")},
	{name: "FLUSHALL every 20ms", hold: 300 * time.Millisecond, begin: storm(20*time.Millisecond, "FLUSHALL")},
	{name: "read-only (REPLICAOF another server)", hold: 300 * time.Millisecond, replica: true, begin: readOnly},
	{name: "half the callers cancel", hold: 300 * time.Millisecond, cancel: true, healthy: true, begin: healthy},
	{name: "half the callers cancel, tuned client", hold: 300 * time.Millisecond, cancel: true, healthy: true, tuned: true, begin: healthy},
	{name: "SIGSTOP 1.5s, batched", hold: 1500 * time.Millisecond, tuned: true, batched: true, stalls: true, begin: pause},
	{name: "kill -9, restart on the same port, batched", hold: 300 * time.Millisecond, tuned: true, batched: true, begin: kill},
	{name: "CLIENT KILL TYPE normal every 10ms, batched", hold: 300 * time.Millisecond, tuned: true, batched: true, begin: storm(10*time.Millisecond, "CLIENT", "KILL", "TYPE", "normal")},
	{name: "half the callers cancel, batched", hold: 300 * time.Millisecond, cancel: true, healthy: true, tuned: true, batched: true, begin: healthy},
	{name: "SIGSTOP 1.5s, leased", hold: 1500 * time.Millisecond, tuned: true, batched: true, stalls: true, leased: true, begin: pause},
	{name: "kill -9, restart on the same port, leased", hold: 300 * time.Millisecond, tuned: true, batched: true, leased: true, begin: killCounted},
	{name: "CLIENT KILL TYPE normal every 10ms, leased", hold: 300 * time.Millisecond, tuned: true, batched: true, leased: true, begin: storm(10*time.Millisecond, "CLIENT", "KILL", "TYPE", "normal")},
	{name: "CLIENT KILL TYPE normal every 10ms, leased, default client", hold: 300 * time.Millisecond, resends: true, batched: true, leased: true, begin: storm(10*time.Millisecond, "CLIENT", "KILL", "TYPE", "normal")},
}

// TestFaults breaks a real redis-server in each way of standaloneFaults under 32
// concurrent callers, for each on_error mode, and checks the engine's promises (see the
// top of this file). RLCTL_RELIABILITY=FILE appends the measured table to FILE.
func TestFaults(t *testing.T) {
	var rows []faultRow
	for _, f := range standaloneFaults {
		for _, mode := range faultModes {
			t.Run(f.name+"/"+mode, func(t *testing.T) {
				srv := redistest.Start(t)
				env := &faultEnv{target: srv}
				if f.replica {
					env.other = redistest.Start(t)
				}
				newClient := func(tuned bool) redis.UniversalClient {
					o := &redis.Options{Addr: srv.Addr()}
					if tuned {
						o.ContextTimeoutEnabled, o.MaxRetries = true, -1
					}
					return redis.NewClient(o)
				}
				rows = append(rows, runFault(t, f, mode, env, newClient, nil))
			})
		}
	}
	reportFaults(t, "TestFaults: a standalone redis-server", rows)
}

var clusterFaults = []fault{
	{name: "cluster: one node SIGSTOP 1.5s", hold: 1500 * time.Millisecond, stalls: true, begin: pause},
	{name: "cluster: one node kill -9, restart", hold: 300 * time.Millisecond, begin: kill},
	{name: "cluster: one node SIGSTOP 1.5s, batched", hold: 1500 * time.Millisecond, tuned: true, batched: true, stalls: true, begin: pause},
	{name: "cluster: one node SIGSTOP 1.5s, leased", hold: 1500 * time.Millisecond, tuned: true, batched: true, stalls: true, leased: true, begin: pause},
	{name: "cluster: one node kill -9, restart, leased", hold: 300 * time.Millisecond, tuned: true, batched: true, leased: true, writable: true, begin: killCounted},
}

// TestClusterNodeDown stops one node of a 3-node Redis Cluster (the node that holds the
// lease key; in the leased rows, the quota key) under load, for each on_error mode, with the checks of TestFaults.
func TestClusterNodeDown(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	var rows []faultRow
	for _, f := range clusterFaults {
		for _, mode := range faultModes {
			t.Run(f.name+"/"+mode, func(t *testing.T) {
				newClient := func(tuned bool) redis.UniversalClient {
					o := &redis.ClusterOptions{Addrs: cl.Addrs()}
					if tuned {
						o.ContextTimeoutEnabled, o.MaxRetries = true, -1
					}
					return redis.NewClusterClient(o)
				}
				nodeFor := func(key string) *redistest.Server {
					c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
					defer c.Close()
					m, err := c.MasterForKey(context.Background(), key)
					if err != nil {
						t.Fatalf("MasterForKey(%q): %v", key, err)
					}
					i := slices.Index(cl.Addrs(), m.Options().Addr)
					if i < 0 {
						t.Fatalf("key %q is on %s, not a node of the cluster %v", key, m.Options().Addr, cl.Addrs())
					}
					return cl.Node(i)
				}
				rows = append(rows, runFault(t, f, mode, &faultEnv{}, newClient, nodeFor))
			})
		}
	}
	reportFaults(t, "TestClusterNodeDown: a 3-node Redis Cluster", rows)
}

// runFault runs one fault under one on_error mode and checks every promise. nodeFor, when
// set, picks the target: the node of the lease key.
func runFault(t *testing.T, f fault, mode string, env *faultEnv,
	newClient func(tuned bool) redis.UniversalClient, nodeFor func(key string) *redistest.Server) faultRow {
	baseline := runtime.NumGoroutine()
	src := faultPolicy(mode)
	if f.leased {
		src += quotaPolicy(mode)
	}
	plan := compile(t, src)
	degradedBy := &errCounts{}
	hooks := Hooks{Degraded: func(_, _ string, err error) { degradedBy.add(err) }}
	// A fault that leaves Redis healthy checks that nothing degrades: its deadline is ten
	// times longer, so that a loaded machine's scheduling delays are not read as a slow
	// Redis (the other faults need the short deadline to be hit).
	timeout := faultTimeout
	if f.healthy {
		timeout = 10 * faultTimeout
	}
	opts := []Option{WithTimeout(timeout), WithBreaker(faultFailures, faultCooldown), WithHooks(hooks)}

	// The callers' engine, and a second engine on its own client for the lease
	// acquisitions: its idle connections are ready, so what it sends into a stalled server
	// is queued there rather than waiting for a connection the callers hold.
	rdb, ldb := newClient(f.tuned), newClient(f.tuned)
	bopts := []RedisOption{Batched(1)} // every call alone
	if f.batched {
		bopts = []RedisOption{Batched(0)}
	}
	e, le := New(NewRedis(rdb, bopts...), plan, opts...), New(NewRedis(ldb, bopts...), plan, opts...)
	// Keys of their own: the cluster serves every run of TestClusterNodeDown.
	run := fmt.Sprint("r", faultRuns.Add(1), "-")
	// The leased rows' engines, each on a client of its own as an instance of a service is.
	var quota *quotaRun
	if f.leased {
		quota = newQuotaRun(t, plan, f, run, newClient, bopts, timeout, hooks)
	}
	closed := false
	closeClients := func() {
		if !closed {
			closed = true
			rdb.Close()
			ldb.Close()
			quota.close()
		}
	}
	defer closeClients()

	leaseReq := Attrs{"kind": "lease", "user": run + "lease"}
	var leaseKey string
	{ // One call per connection the lease engine will need (the fourth is denied: max 3).
		var wg sync.WaitGroup
		ds := make([]*Decision, leaseCallers)
		// Through an engine on the same client with a deadline no loaded machine misses:
		// the warm-up opens connections, it tests nothing.
		warm := New(NewRedis(ldb), plan, WithTimeout(time.Minute))
		for i := range leaseCallers {
			wg.Go(func() { ds[i], _ = warm.Allow(context.Background(), leaseReq) })
		}
		wg.Wait()
		for _, d := range ds {
			if d == nil || d.Source != FromBackend {
				t.Fatalf("warm-up lease on a healthy server: %+v", d)
			}
			leaseKey = d.Rules[0].Key
			if err := warm.Release(context.Background(), d); err != nil {
				t.Fatalf("warm-up release: %v", err)
			}
		}
	}
	env.forgotten = -1
	if quota != nil {
		env.quotaKey = quota.key
	}
	if nodeFor != nil {
		if quota != nil {
			env.target = nodeFor(quota.key) // the takes are what the leased rows break
		} else {
			env.target = nodeFor(leaseKey)
		}
	}

	l := &faultLoad{f: f, mode: mode, e: e, run: run, quota: quota, stop: make(chan struct{})}
	quota.count(true)
	l.callers = make([]tally, faultCallers)
	for i := range faultCallers {
		l.wg.Go(func() { l.caller(i, f.cancel && i%2 == 1) })
	}
	halted := false
	halt := func() {
		if !halted {
			halted = true
			close(l.stop)
			l.wg.Wait()
		}
	}
	defer halt()

	time.Sleep(faultWarmup)
	l.phase.Store(1)
	end := f.begin(t, env)
	began := time.Now()
	l.faulted.Store(true) // after begin: the server is stopped (Pause waits for it)
	quota.faulted()

	// Lease acquisitions sent into the fault; their callers release them once it is over.
	leases := make([]tally, leaseCallers)
	released := make(chan struct{})
	var lwg sync.WaitGroup
	release := sync.OnceFunc(func() { close(released); lwg.Wait() })
	defer release() // a test that stops early leaves no lease caller waiting
	for i := range leaseCallers {
		lwg.Go(func() {
			s := &leases[i]
			start := time.Now()
			d, err := le.Allow(context.Background(), leaseReq)
			s.judge(l, d, err, time.Since(start), false, false, faultLeases)
			<-released
			if d != nil {
				if err := le.Release(context.Background(), d); err != nil {
					s.problem("Release: %v", err)
				}
			}
		})
	}

	time.Sleep(f.hold - time.Since(began))
	end()
	l.faultEnd.Store(time.Now().UnixNano())
	l.phase.Store(2)

	// Recovery: the first call started after the fault ended that Redis decides.
	bound := faultCooldown + timeout + faultSlack
	if f.writable {
		bound += clusterWritableDelay
	}
	for wait := time.Now().Add(bound + 2*time.Second); l.recovered.Load() == 0 && time.Now().Before(wait); {
		time.Sleep(5 * time.Millisecond)
	}
	release()
	time.Sleep(faultTail)
	halt()
	quota.count(false)

	row := faultRow{Fault: f.name, Mode: mode, Recovery: time.Duration(l.recovered.Load()), stalls: f.stalls}
	var all tally
	for i := range l.callers {
		all.merge(&l.callers[i])
	}
	for i := range leases {
		all.merge(&leases[i])
	}

	// Phantom charges: what Redis holds on each key beyond what its caller saw Redis allow.
	// A caller that cancels may have been charged for a call it gave up on: its keys are
	// not counted. The leased rows' callers share one key, whose charges checkQuota counts.
	if quota != nil {
		quota.check(t, f, l, env, &row)
	}
	for i := range l.callers {
		if quota != nil {
			break
		}
		if f.cancel && i%2 == 1 {
			continue
		}
		d := peekFromRedis(t, e, Attrs{"kind": "rate", "user": l.callerKey(i)})
		if d == nil {
			continue
		}
		// A call sent but unanswered (a connection killed after the server ran it, an
		// answer later than the deadline) may have been charged: the server cannot say,
		// and undoing a charge that may not have happened would let requests past the
		// limit. Only charges beyond those are phantom.
		consumed := faultBurst - d.Rules[0].Remaining
		c := &l.callers[i]
		row.Lost += c.lost
		if f.stalls {
			// Late calls ran after their deadline: what they charged is counted apart.
			row.LateCharged += max(0, consumed-c.allowedByRedis-(c.lost-c.late)-c.lateInFlight)
		}
		if extra := consumed - c.allowedByRedis - c.lost; extra > 0 {
			row.Phantom += extra
			t.Errorf("phantom charge: %s holds %d charges, its caller saw %d allowed by Redis and %d calls unanswered",
				d.Rules[0].Key, consumed, l.callers[i].allowedByRedis, l.callers[i].lost)
		}
	}
	// Leases: every caller released what it holds, and the lease engine releases what its
	// unanswered calls may have taken once Redis answers it again (one per answered call,
	// as a service that goes on serving would): within a few calls Redis must hold none,
	// and a new request for the key must be allowed by Redis.
	row.LeasesHeld = -1
	for wait := time.Now().Add(2 * time.Second); time.Now().Before(wait); time.Sleep(20 * time.Millisecond) {
		d, err := le.Peek(context.Background(), leaseReq)
		if err == nil && d.Source == FromBackend {
			if row.LeasesHeld = faultLeases - d.Rules[0].Remaining; row.LeasesHeld == 0 {
				break
			}
		}
	}
	if row.LateCharged > 0 {
		t.Errorf("%d charges by calls sent into the stall that got no answer by their deadline and that the server ran when it resumed; a late call must charge nothing",
			row.LateCharged)
	}
	if row.LeasesHeld != 0 && (!f.resends || f.tuned) {
		t.Errorf("%d leases held on %s after every caller released (-1: Redis never answered)", row.LeasesHeld, leaseKey)
	}
	if d := decideFromRedis(t, e, leaseReq, false); d != nil {
		// A client that resends may have taken leases nobody holds (measured above, not
		// asserted), and they can fill the key.
		if !d.Allowed && (!f.resends || f.tuned) {
			t.Errorf("a new lease after the fault: denied by Redis (retry-after %v): leases nobody will release are held", d.RetryAfter)
		}
		if err := e.Release(context.Background(), d); err != nil {
			t.Errorf("release of the new lease: %v", err)
		}
	}

	closeClients()
	row.Leaked = waitBaseline(baseline, 3*time.Second)

	row.Decisions, row.FromRedis, row.Degraded = all.decisions, all.fromRedis, all.degraded
	row.CallerErrors, row.Cancelled = all.callerErrs, all.cancelled
	row.P99, row.Max = percentile(all.lat, 0.99), slices.Max(append(all.lat, 0))
	row.DegradedBy = degradedBy.counts()
	if row.Lease != nil {
		row.Lease.FromLease = all.fromLease
	}
	t.Logf("%s / %s: %d decisions, %d from Redis, %d degraded (%s), %d caller errors, %d cancelled; latency p99 %v max %v; recovery %v; %d goroutines left; %d phantom charges; %d leases held",
		f.name, mode, row.Decisions, row.FromRedis, row.Degraded, failureList(row.DegradedBy), row.CallerErrors, row.Cancelled,
		row.P99, row.Max, row.Recovery, row.Leaked, row.Phantom, row.LeasesHeld)

	// The promises.
	if all.nproblems > 0 {
		t.Errorf("%d decisions broke a promise; the first:\n  %s", all.nproblems, strings.Join(all.problems, "\n  "))
	}
	if all.fromRedis == 0 {
		t.Errorf("no decision came from Redis: the load did not run against the server")
	}
	if limit := timeout + faultSlack; row.Max > limit {
		t.Errorf("a decision took %v, more than the deadline %v plus %v of slack (p99 %v)", row.Max, timeout, faultSlack, row.P99)
	}
	if row.Recovery == 0 {
		t.Errorf("decisions did not come from Redis again within %v of the fault's end", bound+2*time.Second)
	} else if row.Recovery > bound {
		t.Errorf("decisions came from Redis again %v after the fault ended, more than cooldown %v + one probe %v + %v of slack (+ %v for a restarted cluster primary: %v)",
			row.Recovery, faultCooldown, timeout, faultSlack, clusterWritableDelay, f.writable)
	}
	if row.Leaked > 0 {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines more than before the engine's calls (%d)\n%s", row.Leaked, baseline, buf[:runtime.Stack(buf, true)])
	}
	return row
}

// faultRuns numbers the runs of runFault in the test binary.
var faultRuns atomic.Int64

func (l *faultLoad) callerKey(i int) string { return fmt.Sprintf("%sc%02d", l.run, i) }

// faultLoad is the callers' side of a run.
type faultLoad struct {
	f     fault
	mode  string
	e     *Engine
	quota *quotaRun // the leased rows' engines: the callers decide its key through them
	run   string    // prefix of the run's keys
	stop  chan struct{}
	wg    sync.WaitGroup

	phase     atomic.Int32 // 0 before the fault, 1 during, 2 after
	faulted   atomic.Bool  // the fault has begun: a call sent from then on was sent into it
	faultEnd  atomic.Int64 // unix nanoseconds
	recovered atomic.Int64 // from the fault's end to the first decision by Redis after it; 0 before

	callers []tally // one per caller, written only by it
}

// caller sends requests on its own key until stop, each on a fresh context; a cancelling
// caller cancels it at a random point of the call (before, during or after).
func (l *faultLoad) caller(i int, cancels bool) {
	s := &l.callers[i]
	e, req := l.e, Attrs{"kind": "rate", "user": l.callerKey(i)}
	if l.quota != nil {
		e, req = l.quota.engines[i%len(l.quota.engines)], l.quota.req
	}
	for range faultMaxCalls {
		select {
		case <-l.stop:
			return
		default:
		}
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		var timer *time.Timer
		if cancels {
			ctx, cancel = context.WithCancel(context.Background())
			timer = time.AfterFunc(time.Duration(rand.IntN(500))*time.Microsecond, cancel)
		}
		phase, into := l.phase.Load(), l.faulted.Load()
		start := time.Now()
		d, err := e.Allow(ctx, req)
		took := time.Since(start)
		ctxDone := ctx.Err() != nil
		if timer != nil {
			timer.Stop()
		}
		cancel()
		s.judge(l, d, err, took, ctxDone, cancels, faultBurst)
		if !into && d != nil && d.Err != nil && unanswered(d.Err) && timedOut(d.Err) {
			s.lateInFlight++
		}
		if err == nil && d.Source == FromBackend && phase == 2 {
			l.recovered.CompareAndSwap(0, max(1, time.Now().UnixNano()-l.faultEnd.Load()))
		}
		time.Sleep(pace())
	}
}

// pace is a caller's pause between calls: random around faultPace, so that callers do not
// move in step, and longer under -race, whose calls cost several times the CPU. The load
// stays well below what the machine can serve: latency and the deadline measure the
// engine and the fault, not a saturated CPU.
func pace() time.Duration {
	p := faultPace
	if raceEnabled {
		p *= 5
	}
	return p/2 + rand.N(p)
}

// tally is what one caller saw.
type tally struct {
	decisions, fromRedis, degraded, callerErrs, cancelled int
	fromLease                                             int // of fromRedis, decided from a quota lease with no call
	allowedByRedis                                        int64
	lost                                                  int64 // degraded after the call was sent, unanswered
	late                                                  int64 // of lost, those unanswered by the deadline (not a broken connection)
	lateInFlight                                          int64 // of late, those sent before the fault began
	lat                                                   []time.Duration
	problems                                              []string // the first few
	nproblems                                             int
}

const keepProblems = 5

func (s *tally) problem(format string, args ...any) {
	s.nproblems++
	if len(s.problems) < keepProblems {
		s.problems = append(s.problems, fmt.Sprintf(format, args...))
	}
}

func (s *tally) merge(o *tally) {
	s.lost += o.lost
	s.late += o.late
	s.lateInFlight += o.lateInFlight
	s.decisions += o.decisions
	s.fromRedis += o.fromRedis
	s.fromLease += o.fromLease
	s.degraded += o.degraded
	s.callerErrs += o.callerErrs
	s.cancelled += o.cancelled
	s.lat = append(s.lat, o.lat...)
	s.nproblems += o.nproblems
	for _, p := range o.problems {
		if len(s.problems) < keepProblems {
			s.problems = append(s.problems, p)
		}
	}
}

// judge checks one decision against the promises: the only error a caller may see is its
// own context's; a degraded decision follows on_error (local: the fallback ran the rule,
// which reports its limit); while Redis is healthy a caller that keeps its context is
// decided by Redis. A decision from a quota lease counts as Redis's: Redis granted, and
// counts, the units it spent.
func (s *tally) judge(l *faultLoad, d *Decision, err error, took time.Duration, ctxDone, cancels bool, limit int64) {
	s.decisions++
	s.lat = append(s.lat, took)
	if err != nil {
		if ctxDone && errors.Is(err, context.Canceled) {
			s.cancelled++
			return
		}
		s.callerErrs++
		s.problem("error to the caller (context done: %v): %v", ctxDone, err)
		return
	}
	if d == nil {
		s.problem("nil decision and nil error")
		return
	}
	if d.Source == FromBackend || d.Source == FromLease {
		s.fromRedis++
		if d.Source == FromLease {
			s.fromLease++
		}
		if d.Allowed {
			s.allowedByRedis++
		}
		return
	}
	s.degraded++
	if unanswered(d.Err) {
		s.lost++
		if timedOut(d.Err) {
			s.late++
		}
	}
	if l.f.healthy && !cancels {
		s.problem("Redis is healthy, yet a caller that keeps its context got source %d (err %v)", d.Source, d.Err)
	}
	if d.Err == nil {
		s.problem("degraded decision (source %d) without the backend failure in Err", d.Source)
	}
	switch {
	case l.mode == "allow" && d.Source == FromFailOpen && d.Allowed:
	case l.mode == "deny" && d.Source == FromFailDeny && !d.Allowed:
	case l.mode == "local" && d.Source == FromLocal && len(d.Rules) == 1 && d.Rules[0].Limit == limit:
	default:
		s.problem("on_error %q, yet a degraded decision has source %d, allowed %v, rules %+v (err %v)",
			l.mode, d.Source, d.Allowed, d.Rules, d.Err)
	}
}

// unanswered reports whether a degraded decision's failure leaves open whether the call
// ran: it was sent and no answer came. The breaker refusing, a refused dial and an error
// reply (OOM, READONLY, the script's deadline reply, ...) all mean it did not run.
func unanswered(err error) bool {
	var re interface{ RedisError() }
	var op *net.OpError
	switch {
	case err == nil, errors.Is(err, ErrBreakerOpen), errors.As(err, &re):
		return false
	case errors.As(err, &op) && op.Op == "dial":
		return false
	}
	return true
}

// timedOut reports whether an unanswered call's failure is its deadline (the engine's, or
// the client's read timeout set from it) rather than a broken connection: the call may be
// waiting, unrun, in the server's queue.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// peekFromRedis peeks r until Redis answers (the breaker may still be closing), for up to
// ten seconds.
func peekFromRedis(t *testing.T, e *Engine, r Attrs) *Decision {
	return decideFromRedis(t, e, r, true)
}

// decideFromRedis decides r (or peeks it) until Redis answers, for up to ten seconds (a
// restarted cluster node takes a while to serve its slots again on a loaded machine);
// an answer from elsewhere charges nothing on Redis, and a charge by the in-process
// fallback does not matter here.
func decideFromRedis(t *testing.T, e *Engine, r Attrs, peek bool) *Decision {
	t.Helper()
	var d *Decision
	var err error
	for wait := time.Now().Add(10 * time.Second); time.Now().Before(wait); time.Sleep(20 * time.Millisecond) {
		if peek {
			d, err = e.Peek(context.Background(), r)
		} else {
			d, err = e.Allow(context.Background(), r)
		}
		if err == nil && d.Source == FromBackend {
			return d
		}
		if err == nil {
			e.Release(context.Background(), d)
		}
	}
	t.Errorf("Redis did not decide %v within 10s after the fault: %+v, %v", r, d, err)
	return nil
}

// waitBaseline waits up to wait for the goroutine count to come back to baseline and
// returns how many more there are.
func waitBaseline(baseline int, wait time.Duration) int {
	var now int
	for end := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		if now = runtime.NumGoroutine(); now <= baseline || time.Now().After(end) {
			return max(0, now-baseline)
		}
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}
