package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
)

// Bounds of rlctl bench's flags: a run always ends by itself.
const (
	benchMaxDecisions = 10_000_000
	benchMaxCallers   = 1024
	benchMaxKeys      = 1_000_000
)

var cmdBench = &command{
	name:  "bench",
	args:  "-redis ADDR [-n N] [-c C] [-duration D] [-keys K] [-policy NAME] [-deadline D] [-batch N] [-attr NAME=VALUE]... FILE|DIR...",
	short: "measure each policy's decisions per second and latency on a Redis",
	long: `Bench runs each policy of the files, one at a time, through the engine against the Redis
at -redis, from C concurrent callers, until N decisions are made or D has passed, and
prints per policy: decisions per second, p50 and p99 latency of a decision, and how many
requests were allowed, denied, or matched by no rule.

Then, per policy, what the server measured over the run: its script time per call, the
mean time of the FCALL, EVALSHA and EVAL calls the engine sent (from INFO commandstats,
read before and after the run; the count includes a first FCALL per caller that finds no
library and loads it), and per decision (a call carries a batch of decisions: -batch),
and the SLOWLOG entries over 5ms made during the run with the
slowest of them, beside the server's slowlog-log-slower-than (CONFIG GET): entries under
it are not logged. Bench changes no setting and resets no statistic; a server that
refuses INFO, SLOWLOG or CONFIG (a managed service, an ACL) gets "not available" and the
reason, and the bench goes on. Other clients' scripts on the server count too.

Requests are generated. Each attribute a policy reads (request.NAME) gets a value:
  - the value of -attr NAME=VALUE when given, "{n}" in it replaced by the key number;
  - for attributes that make up a rule's key or the policy's shard: NAME-<n>, so the
    requests spread over K keys;
  - otherwise the value the policy's first scenarios send (traffic requests, in turn),
    so that match and when conditions hold as they do there;
  - otherwise NAME-<n>.
Concurrency leases an allowed request holds are released at once.

The engine's keys are written under a prefix of the run's own (rlctl-bench:<id>:), so the
counters the policies use in production are never touched, and are deleted at the end
(they also expire by themselves). Bench talks to the given URL only. Use a Redis that
can take the load: the run is as fast as the server allows.

Flags:
  -redis ADDR     host:port (port 6379 when left out), redis://[user:password@]host:port[/db],
                  rediss://... (TLS), or a Unix socket: unix:///path or the path itself
  -n N            decisions per policy (default 10000, at most 10000000)
  -c C            concurrent callers (default 8, at most 1024)
  -duration D     time limit per policy (default 10s)
  -keys K         key space per rule key (default 1000, at most 1000000)
  -policy NAME    bench only this policy
  -deadline D     the engine's decision deadline (default 50ms, the engine's own); a
                  decision past it is made without Redis, which bench reports as a failure
  -batch N        the most decisions one script call carries (default 64, the engine's;
                  1: each alone); see engine.Batched
  -attr NAME=VALUE  fix request.NAME (repeatable)

Progress is shown on stderr when it is a terminal.

Exit status: 0 done, 1 invalid policies, an unreachable Redis, a request the policy
cannot evaluate, or decisions made without Redis (on_error), 2 usage error.
`,
	run: runBench,
}

// benchRedisOptions reads -redis: a redis://, rediss:// or unix:// URL, a Unix socket's path
// (absolute or starting with "."), or host:port, the port 6379 when left out.
func benchRedisOptions(addr string) (*redis.Options, error) {
	switch {
	case strings.Contains(addr, "://"):
		return redis.ParseURL(addr)
	case strings.HasPrefix(addr, "/"), strings.HasPrefix(addr, "."):
		return &redis.Options{Network: "unix", Addr: addr}, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		// A host alone, or a bare IPv6 address.
		host, port = strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]"), "6379"
	}
	if host == "" || strings.ContainsAny(host, "/@?#") {
		return nil, fmt.Errorf("%q is not host:port or a redis://, rediss:// or unix:// URL", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return nil, fmt.Errorf("%q: the port %q is not a number in [0, 65535]", addr, port)
	}
	return &redis.Options{Network: "tcp", Addr: net.JoinHostPort(host, port)}, nil
}

// benchAttrs is the -attr flag: fixed request attributes.
type benchAttrs map[string]string

func (a benchAttrs) String() string { return fmt.Sprint(map[string]string(a)) }

func (a benchAttrs) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	name = strings.TrimPrefix(name, "request.")
	if !ok || name == "" {
		return fmt.Errorf("%q is not NAME=VALUE", s)
	}
	a[name] = value
	return nil
}

func runBench(e *env, args []string) error {
	fs := flags("bench")
	addr := fs.String("redis", "", "")
	n := fs.Int("n", 10_000, "")
	callers := fs.Int("c", 8, "")
	limit := fs.Duration("duration", 10*time.Second, "")
	keys := fs.Int("keys", 1000, "")
	only := fs.String("policy", "", "")
	deadline := fs.Duration("deadline", 50*time.Millisecond, "")
	batch := fs.Int("batch", engine.DefaultBatch, "")
	fixed := benchAttrs{}
	fs.Var(fixed, "attr", "")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	bad := func(format string, a ...any) error {
		fmt.Fprintf(e.stderr, "rlctl: error: "+format+"\n", a...)
		return errUsage
	}
	switch {
	case fs.NArg() == 0:
		return errUsage
	case *addr == "":
		return bad("-redis is required: the Redis to measure on, such as 127.0.0.1:6379")
	case *n < 1 || *n > benchMaxDecisions:
		return bad("-n %d is not in [1, %d]", *n, benchMaxDecisions)
	case *callers < 1 || *callers > benchMaxCallers:
		return bad("-c %d is not in [1, %d]", *callers, benchMaxCallers)
	case *limit <= 0:
		return bad("-duration %v is not positive", *limit)
	case *keys < 1 || *keys > benchMaxKeys:
		return bad("-keys %d is not in [1, %d]", *keys, benchMaxKeys)
	case *batch < 1:
		return bad("-batch %d: want 1 (each decision alone) or more", *batch)
	}
	opt, err := benchRedisOptions(*addr)
	if err != nil {
		return bad("-redis: %v", err)
	}
	opt.PoolSize = max(opt.PoolSize, *callers+*callers/4+1)
	// The engine's deadline ends calls; a retried call could be charged twice.
	opt.ContextTimeoutEnabled, opt.MaxRetries = true, -1

	cfg, _ := load(e, fs.Args())
	if cfg == nil {
		return errFailed
	}
	policies := cfg.Policies
	if *only != "" {
		p, ok := cfg.Policy(*only)
		if !ok {
			fmt.Fprintf(e.stderr, "rlctl: error: no policy %q in the files\n", *only)
			return errFailed
		}
		policies = []*dsl.Policy{p}
	}
	if len(policies) == 0 {
		fmt.Fprintf(e.stderr, "rlctl: error: the files have no policy to bench\n")
		return errFailed
	}
	for name := range fixed {
		if !slices.ContainsFunc(policies, func(p *dsl.Policy) bool { return slices.Contains(benchReads(p), name) }) {
			fmt.Fprintf(e.stderr, "rlctl: warning: -attr %s: no policy benched reads request.%s\n", name, name)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	redis.SetLogger(benchQuiet{}) // failures are reported as errors, not logged
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = rdb.Ping(pctx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("cannot reach Redis at %s: %w", opt.Addr, err)
	}
	threshold, thresholdErr := benchSlowlogThreshold(ctx, rdb)
	var id [4]byte
	_, _ = rand.Read(id[:])
	backend := &benchBackend{Backend: engine.NewRedis(rdb, engine.Batched(*batch)), prefix: "rlctl-bench:" + hex.EncodeToString(id[:]) + ":"}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := backend.cleanup(cctx, rdb); err != nil {
			fmt.Fprintf(e.stderr, "rlctl: warning: deleting the bench keys %s*: %v (they expire by themselves)\n", backend.prefix, err)
		}
	}()

	fmt.Fprintf(e.stdout, "Redis %s, %d callers, up to %d decisions or %v per policy, %d keys\n\n", opt.Addr, *callers, *n, *limit, *keys)
	var results []benchResult
	for _, p := range policies {
		reqs, err := benchRequests(cfg, p, fixed, *keys)
		if err != nil {
			return fmt.Errorf("policy %q: %w", p.Name, err)
		}
		fmt.Fprintf(e.stdout, "%s: %s\n", p.Name, benchDescribe(reqs[0]))
		one := *cfg
		one.Policies = []*dsl.Policy{p}
		plan, err := engine.Compile(&one)
		if err != nil {
			return err
		}
		mark := benchMarkServer(ctx, rdb)
		r, err := benchPolicy(ctx, e, engine.New(backend, plan, engine.WithTimeout(*deadline)), p.Name, reqs, *n, *callers, *limit)
		if err != nil {
			return fmt.Errorf("policy %q: %w", p.Name, err)
		}
		r.server = mark.since(ctx, rdb)
		results = append(results, r)
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Fprintln(e.stdout)
	benchTable(e, results)
	benchServerTable(e, results, threshold, thresholdErr)

	failed := false
	for _, r := range results {
		switch {
		case r.degraded > 0:
			fmt.Fprintf(e.stderr, "rlctl: error: policy %q: %d decisions were made without Redis (on_error): %v\n", r.policy, r.degraded, r.firstErr)
			failed = true
		case r.noRule == r.decisions:
			fmt.Fprintf(e.stderr, "rlctl: hint: policy %q: no rule applied to any request (its match or when conditions reject them); set attributes with -attr NAME=VALUE\n", r.policy)
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintf(e.stderr, "rlctl: error: interrupted\n")
		return errFailed
	}
	if failed {
		return errFailed
	}
	return nil
}

// benchReads returns the request attributes any expression of p reads, sorted.
func benchReads(p *dsl.Policy) []string {
	var names []string
	add := func(x *dsl.Expr) {
		if x != nil {
			names = append(names, x.Attrs()...)
		}
	}
	add(p.Match)
	add(p.Shard)
	for _, r := range p.Rules {
		add(r.Key)
		add(r.When)
		add(r.Cost)
		for _, prm := range r.Params {
			add(prm.Expr)
		}
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// benchRequests returns the keys requests a policy's bench cycles over; see cmdBench.
func benchRequests(cfg *dsl.Config, p *dsl.Policy, fixed benchAttrs, keys int) ([]engine.Attrs, error) {
	keyed := map[string]bool{}
	if p.Shard != nil {
		for _, a := range p.Shard.Attrs() {
			keyed[a] = true
		}
	}
	for _, r := range p.Rules {
		for _, a := range r.Key.Attrs() {
			keyed[a] = true
		}
	}
	var traffic []*dsl.Traffic
	for _, s := range cfg.Scenarios {
		if s.Policy == p.Name {
			traffic = append(traffic, s.Traffic...)
		}
	}
	reads := benchReads(p)
	reqs := make([]engine.Attrs, keys)
	for k := range reqs {
		var base map[string]string
		if len(traffic) > 0 {
			t := traffic[k%len(traffic)]
			var err error
			if base, err = t.Render(k / len(traffic) % max(t.Clients, 1)); err != nil {
				return nil, fmt.Errorf("scenario traffic %q: %w", t.Name, err)
			}
		}
		num := strconv.Itoa(k)
		r := make(engine.Attrs, len(reads))
		for _, a := range reads {
			v, isFixed := fixed[a]
			base, inBase := base[a]
			switch {
			case isFixed:
				r[a] = strings.ReplaceAll(v, "{n}", num)
			case keyed[a] || !inBase:
				r[a] = a + "-" + num
			default:
				r[a] = base
			}
		}
		reqs[k] = r
	}
	return reqs, nil
}

// benchDescribe writes a request as name=value pairs in name order.
func benchDescribe(r engine.Attrs) string {
	if len(r) == 0 {
		return "requests read no attribute"
	}
	names := make([]string, 0, len(r))
	for a := range r {
		names = append(names, a)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("requests like")
	for _, a := range names {
		fmt.Fprintf(&b, " %s=%q", a, r[a])
	}
	return b.String()
}

// benchResult is one policy's measurement.
type benchResult struct {
	policy                     string
	decisions, allowed, noRule int
	degraded                   int
	firstErr                   error
	elapsed                    time.Duration
	p50, p99                   time.Duration
	server                     benchServer // what the server measured
}

// benchPolicy makes up to n decisions on eng from callers goroutines for at most limit.
func benchPolicy(ctx context.Context, e *env, eng *engine.Engine, name string, reqs []engine.Attrs, n, callers int, limit time.Duration) (benchResult, error) {
	res := benchResult{policy: name}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lats := make([][]time.Duration, callers)
	var next, done, allowed, noRule, degraded atomic.Int64
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(limit)
	for g := range callers {
		lats[g] = make([]time.Duration, 0, n/callers+1)
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				t0 := time.Now()
				if i >= n || t0.After(deadline) {
					return
				}
				d, err := eng.Allow(ctx, reqs[i%len(reqs)])
				if err != nil {
					if ctx.Err() == nil {
						cancel(fmt.Errorf("request %v: %w", reqs[i%len(reqs)], err))
					}
					return
				}
				lats[g] = append(lats[g], time.Since(t0))
				done.Add(1)
				switch {
				case d.Source == engine.FromNoRules:
					noRule.Add(1)
				case d.Source != engine.FromBackend && d.Source != engine.FromCache && d.Source != engine.FromLease:
					degraded.Add(1)
					errOnce.Do(func() { res.firstErr = d.Err })
				case d.Allowed:
					allowed.Add(1)
				}
				if d.Allowed {
					_ = eng.Release(ctx, d)
				}
			}
		})
	}
	stopProgress := benchProgress(e, name, n, &done, start)
	wg.Wait()
	res.elapsed = time.Since(start)
	stopProgress()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return res, err
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	res.decisions = len(all)
	res.allowed, res.noRule, res.degraded = int(allowed.Load()), int(noRule.Load()), int(degraded.Load())
	if len(all) > 0 {
		res.p50 = all[min(len(all)-1, len(all)/2)]
		res.p99 = all[min(len(all)-1, len(all)*99/100)]
	}
	return res, nil
}

// benchProgress shows done/n on stderr every 200ms when stderr is a terminal; the returned
// function clears the line.
func benchProgress(e *env, name string, n int, done *atomic.Int64, start time.Time) func() {
	if !e.color {
		return func() {}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				fmt.Fprint(e.stderr, "\r\033[K")
				return
			case <-t.C:
				fmt.Fprintf(e.stderr, "\r\033[K%s: %d/%d decisions, %.1fs", name, done.Load(), n, time.Since(start).Seconds())
			}
		}
	})
	return func() {
		close(stop)
		wg.Wait()
	}
}

func benchTable(e *env, results []benchResult) {
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\tdecisions\ttime\tdecisions/s\tp50\tp99\tallowed\tdenied\tno rule")
	for _, r := range results {
		rate := 0.0
		if r.elapsed > 0 {
			rate = float64(r.decisions) / r.elapsed.Seconds()
		}
		denied := r.decisions - r.allowed - r.noRule - r.degraded
		fmt.Fprintf(tw, "%s\t%d\t%v\t%.0f\t%v\t%v\t%d\t%d\t%d\n", r.policy, r.decisions, r.elapsed.Round(time.Millisecond),
			rate, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.allowed, denied, r.noRule)
	}
	tw.Flush()
}

// benchQuiet discards go-redis's log.
type benchQuiet struct{}

func (benchQuiet) Printf(context.Context, string, ...any) {}

// benchBackend runs the engine's calls on keys under a prefix of the run's own, so a bench
// never touches the counters of the policies in use, and can delete what it wrote.
type benchBackend struct {
	engine.Backend
	prefix string
}

func (b *benchBackend) keys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = b.prefix + k
	}
	return out
}

// Eval implements engine.Backend.
func (b *benchBackend) Eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error) {
	return b.Backend.Eval(ctx, s, b.keys(keys), argv)
}

// Del implements engine.Backend.
func (b *benchBackend) Del(ctx context.Context, keys ...string) error {
	return b.Backend.Del(ctx, b.keys(keys)...)
}

// cleanup deletes every key under the prefix.
func (b *benchBackend) cleanup(ctx context.Context, rdb *redis.Client) error {
	iter := rdb.Scan(ctx, 0, b.prefix+"*", 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := rdb.Unlink(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	return flush()
}

// benchSlowCall is the duration over which a SLOWLOG entry made during a run is counted.
const benchSlowCall = 5 * time.Millisecond

// benchSlowlogFetch bounds the SLOWLOG entries read after a run.
const benchSlowlogFetch = 1024

// benchServerTimeout bounds each read of the server's statistics.
const benchServerTimeout = 5 * time.Second

// benchScriptCommands are the commands the engine runs its scripts with: FCALL on a server
// with Redis Functions, EVALSHA (and EVAL after NOSCRIPT) elsewhere.
var benchScriptCommands = []string{"fcall", "evalsha", "eval"}

// benchCommandStats is the cumulative calls and time (µs) of the script commands in an
// INFO commandstats reply.
type benchCommandStats struct{ calls, usec int64 }

// benchScriptStats sums the calls and usec of benchScriptCommands in an INFO commandstats
// reply; a command the server never ran has no line and counts 0.
func benchScriptStats(info string) (benchCommandStats, error) {
	var s benchCommandStats
	for line := range strings.Lines(info) {
		name, fields, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		cmd, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd || !slices.Contains(benchScriptCommands, strings.ToLower(cmd)) {
			continue
		}
		var calls, usec int64 = -1, -1
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if calls < 0 || usec < 0 {
			return s, fmt.Errorf("INFO commandstats: cannot read calls and usec in %q", line)
		}
		s.calls += calls
		s.usec += usec
	}
	return s, nil
}

// benchMark is what the server had measured when a policy's run started.
type benchMark struct {
	stats    benchCommandStats
	statsErr error
	slowID   int64 // ID of the newest SLOWLOG entry, -1 when the log was empty
	slowErr  error
}

// benchServer is what the server measured over one policy's run.
type benchServer struct {
	// calls and usec: the script commands the engine sent, from INFO commandstats.
	calls, usec int64
	scriptErr   error // script time not available
	// slow: SLOWLOG entries over benchSlowCall made during the run; more when the log
	// dropped (or bench did not read) some of the run's entries, so slow is a lower bound.
	slow    int
	more    bool
	slowest redis.SlowLog
	slowErr error // slowlog not available
}

// benchMarkServer reads the server's script statistics and the newest SLOWLOG entry. A
// refused command (a managed service, an ACL) is recorded, not returned: the bench goes on.
func benchMarkServer(ctx context.Context, rdb *redis.Client) benchMark {
	ctx, cancel := context.WithTimeout(ctx, benchServerTimeout)
	defer cancel()
	var m benchMark
	m.stats, m.statsErr = benchReadStats(ctx, rdb)
	m.slowID = -1
	log, err := rdb.SlowLogGet(ctx, 1).Result()
	switch {
	case err != nil:
		m.slowErr = fmt.Errorf("SLOWLOG GET: %w", err)
	case len(log) > 0:
		m.slowID = log[0].ID
	}
	return m
}

func benchReadStats(ctx context.Context, rdb *redis.Client) (benchCommandStats, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return benchCommandStats{}, fmt.Errorf("INFO commandstats: %w", err)
	}
	return benchScriptStats(info)
}

// since returns what the server measured from m to now.
func (m benchMark) since(ctx context.Context, rdb *redis.Client) benchServer {
	ctx, cancel := context.WithTimeout(ctx, benchServerTimeout)
	defer cancel()
	var s benchServer
	if s.slowErr = m.slowErr; s.slowErr == nil {
		log, err := rdb.SlowLogGet(ctx, benchSlowlogFetch).Result()
		if err != nil {
			s.slowErr = fmt.Errorf("SLOWLOG GET: %w", err)
		}
		// Entries come newest first; IDs grow by one per entry and survive SLOWLOG RESET.
		run := 0
		for _, l := range log {
			if l.ID <= m.slowID {
				break
			}
			run++
			if l.Duration > benchSlowCall {
				s.slow++
				if l.Duration > s.slowest.Duration {
					s.slowest = l
				}
			}
		}
		s.more = run == benchSlowlogFetch || (run > 0 && m.slowID >= 0 && log[run-1].ID > m.slowID+1)
	}
	if s.scriptErr = m.statsErr; s.scriptErr == nil {
		now, err := benchReadStats(ctx, rdb)
		s.calls, s.usec, s.scriptErr = now.calls-m.stats.calls, now.usec-m.stats.usec, err
		if err == nil && (s.calls < 0 || s.usec < 0) {
			s.scriptErr = errors.New("the server's statistics were reset during the run (CONFIG RESETSTAT)")
		}
	}
	return s
}

// benchSlowlogThreshold returns the server's slowlog-log-slower-than, in µs (negative: the
// slowlog is off).
func benchSlowlogThreshold(ctx context.Context, rdb *redis.Client) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, benchServerTimeout)
	defer cancel()
	cfg, err := rdb.ConfigGet(ctx, "slowlog-log-slower-than").Result()
	if err != nil {
		return 0, fmt.Errorf("CONFIG GET slowlog-log-slower-than: %w", err)
	}
	v, ok := cfg["slowlog-log-slower-than"]
	if !ok {
		return 0, errors.New("CONFIG GET slowlog-log-slower-than: no such parameter")
	}
	us, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("CONFIG GET slowlog-log-slower-than: %q is not a number", v)
	}
	return us, nil
}

// benchScriptNames writes benchScriptCommands as "FCALL, EVALSHA and EVAL".
func benchScriptNames() string {
	up := strings.ToUpper(strings.Join(benchScriptCommands, ", "))
	if i := strings.LastIndex(up, ", "); i >= 0 {
		up = up[:i] + " and " + up[i+2:]
	}
	return up
}

// benchServerTable prints what the server measured per policy: the script time per call
// and the slow calls, or why they are not available.
func benchServerTable(e *env, results []benchResult, threshold int64, thresholdErr error) {
	if len(results) == 0 {
		return
	}
	scripts := slices.ContainsFunc(results, func(r benchResult) bool { return r.server.scriptErr == nil })
	slow := slices.ContainsFunc(results, func(r benchResult) bool { return r.server.slowErr == nil })
	if thresholdErr == nil && threshold < 0 {
		slow = false
		for i := range results {
			results[i].server.slowErr = fmt.Errorf("the server's slowlog is off (slowlog-log-slower-than %d)", threshold)
		}
	}
	fmt.Fprintln(e.stdout)
	if !scripts {
		fmt.Fprintf(e.stdout, "script time: not available (%v)\n", results[0].server.scriptErr)
	}
	if !slow {
		fmt.Fprintf(e.stdout, "slowlog: not available (%v)\n", results[0].server.slowErr)
	}
	if !scripts && !slow {
		return
	}
	if scripts {
		fmt.Fprintf(e.stdout, "script time per call: the server's mean time in %s over the run (INFO commandstats)\n", benchScriptNames())
	}
	if slow {
		fmt.Fprintf(e.stdout, "slowlog: the SLOWLOG entries over %v made during the run", benchSlowCall)
		switch lim := time.Duration(threshold) * time.Microsecond; {
		case thresholdErr != nil:
			fmt.Fprintf(e.stdout, "; the server's threshold: not available (%v)", thresholdErr)
		case lim > benchSlowCall:
			fmt.Fprintf(e.stdout, "; the server logs calls over %v only (slowlog-log-slower-than %d), so calls of %v to %v are not counted", lim, threshold, benchSlowCall, lim)
		default:
			fmt.Fprintf(e.stdout, "; the server logs calls over %v (slowlog-log-slower-than %d)", lim, threshold)
		}
		fmt.Fprintln(e.stdout)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "policy")
	if scripts {
		fmt.Fprint(tw, "\tscript calls\tscript time per call\tper decision")
	}
	if slow {
		fmt.Fprint(tw, "\tslowlog over "+benchSlowCall.String()+"\tslowest")
	}
	fmt.Fprintln(tw)
	var notes []string
	for _, r := range results {
		s := r.server
		fmt.Fprint(tw, r.policy)
		switch {
		case !scripts:
		case s.scriptErr != nil:
			fmt.Fprint(tw, "\t-\t-\t-")
			notes = append(notes, fmt.Sprintf("%s: script time: not available (%v)", r.policy, s.scriptErr))
		case s.calls == 0:
			fmt.Fprint(tw, "\t0\t-\t-")
		default:
			fmt.Fprintf(tw, "\t%d\t%.2fµs\t%.2fµs", s.calls, float64(s.usec)/float64(s.calls), float64(s.usec)/float64(max(r.decisions, 1)))
		}
		switch {
		case !slow:
		case s.slowErr != nil:
			fmt.Fprint(tw, "\t-\t-")
			notes = append(notes, fmt.Sprintf("%s: slowlog: not available (%v)", r.policy, s.slowErr))
		default:
			more, slowest := "", "-"
			if s.more {
				more = " or more"
			}
			if s.slow > 0 {
				slowest = s.slowest.Duration.Round(time.Microsecond).String()
				if len(s.slowest.Args) > 0 {
					slowest += " " + strings.ToUpper(s.slowest.Args[0])
				}
			}
			fmt.Fprintf(tw, "\t%d%s\t%s", s.slow, more, slowest)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(e.stdout, n)
	}
}
