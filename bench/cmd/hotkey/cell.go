package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlctl/rlctl/bench/internal/redisproc"
	"github.com/rlctl/rlctl/bench/internal/stat"
	"github.com/rlctl/rlctl/dsl"
	"github.com/rlctl/rlctl/engine"
)

const (
	limit  = 100_000_000 // the key's limit per window: never reached
	window = time.Hour
	// margin is how far from the window's end a cell must start besides its max time.
	margin = 10 * time.Second
)

// contender is one way of deciding the hot key.
type contender struct {
	name  string
	lease int64 // lease_size; 0: unleased
	batch int   // engine.Batched's max: 0 the default, 1 each call alone
}

func (c contender) policy() string {
	lease := ""
	if c.lease > 0 {
		lease = fmt.Sprintf("\n    lease_size = %d", c.lease)
	}
	return fmt.Sprintf(`policy "hot" {
  rule "global" {
    algorithm = "fixed_window"
    key       = "all"
    limit     = %d
    window    = %q%s
  }
}
`, limit, "1h", lease)
}

// unleased is the name of the unleased contender with default batching, which the
// leased ones are compared with first.
const (
	unleased      = "unleased, batched"
	unleasedAlone = "unleased, each call alone"
)

func leasedName(size int64) string { return fmt.Sprintf("leased, lease_size = %d", size) }

func contenders(sizes []int64, alone bool) []contender {
	cs := []contender{{name: unleased}}
	if alone {
		cs = append(cs, contender{name: unleasedAlone, batch: 1})
	}
	for _, s := range sizes {
		cs = append(cs, contender{name: leasedName(s), lease: s})
	}
	return cs
}

// cell is one contender's measurement in one round.
type cell struct {
	decisions, admitted int64
	fromLease           int64   // decisions with Source FromLease
	engineCalls         int64   // backend calls the engines made (Hooks.Called), returns included
	scriptCalls         float64 // FCALL + EVALSHA + EVAL calls on the server (a batch is one)
	scriptUSec          float64 // their run time on the server (commandstats usec), µs
	counted             int64   // the server's count of the key after ReturnLeases
	elapsed             time.Duration
	serverUS            float64 // redis-server CPU (user+sys) per decision, µs
	selfUS              float64 // this process's CPU per decision, µs (every engine and goroutine)
}

func (c *cell) rate() float64 { return float64(c.decisions) / c.elapsed.Seconds() }

func (c *cell) per(x float64) float64 { return x / float64(c.decisions) }

// results holds each contender's cells, one per round.
type results map[string][]*cell

func measure(ctx context.Context, cs []contender, rounds int, l load) error {
	srv, err := redisproc.Start()
	if err != nil {
		return err
	}
	defer srv.Stop()
	// The meter's own client: INFO, FLUSHALL, CONFIG RESETSTAT, TIME.
	meter := redis.NewClient(&redis.Options{Addr: srv.Addr, DialerRetries: 1, MaxRetries: -1})
	defer meter.Close()
	clients := newClients(srv.Addr, l)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	info, err := meter.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	version := "?"
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			version = v
		}
	}
	idle, err := idleCPU(ctx, meter)
	if err != nil {
		return err
	}
	rep := report{env: describeEnv(version), load: l, rounds: rounds, cs: cs, res: results{}, idleUS: idle, loadStart: stat.Loadavg()}
	for round := 1; round <= rounds; round++ {
		order := slices.Clone(cs)
		if round%2 == 0 {
			slices.Reverse(order) // ABBA: drift over a round cancels out of the ratios
		}
		for _, c := range order {
			cl, err := runCell(ctx, meter, clients, c, l, round)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round, c.name, err)
			}
			rep.res[c.name] = append(rep.res[c.name], cl)
			progress("round %d/%d %-26s %9.0f decisions/s %7.2f µs redis-server CPU/decision %7.4f script calls/decision (%.1f µs each), %.1f%% from lease; server count %d = %d admitted",
				round, rounds, c.name, cl.rate(), cl.serverUS, cl.per(cl.scriptCalls), cl.scriptUSec/cl.scriptCalls, 100*cl.per(float64(cl.fromLease)), cl.counted, cl.admitted)
		}
	}
	rep.loadEnd = stat.Loadavg()
	rep.write(os.Stdout)
	return nil
}

// newClients returns a client per engine, as separate instances would have, with the
// settings engine.NewRedis asks for.
func newClients(addr string, l load) []*redis.Client {
	clients := make([]*redis.Client, l.engines)
	for i := range clients {
		clients[i] = redis.NewClient(&redis.Options{
			Addr: addr, PoolSize: l.g + 2, DialerRetries: 1,
			ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
			ContextTimeoutEnabled: true, MaxRetries: -1,
		})
	}
	return clients
}

// idleCPU returns the server's CPU per second while nothing calls it, in µs: its
// background work (serverCron), which every cell's figure includes.
func idleCPU(ctx context.Context, meter *redis.Client) (float64, error) {
	cpu0, err := redisproc.CPU(ctx, meter)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	cpu1, err := redisproc.CPU(ctx, meter)
	if err != nil {
		return 0, err
	}
	return (cpu1 - cpu0) * 1e6 / time.Since(t0).Seconds(), nil
}

// runCell measures contender c once: l.n decisions of the hot key from l.engines new
// engines of l.g goroutines each, for at most l.maxTime.
func runCell(ctx context.Context, meter *redis.Client, clients []*redis.Client, c contender, l load, round int) (*cell, error) {
	if err := meter.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	if err := awayFromWindowEnd(ctx, meter, l.maxTime+margin); err != nil {
		return nil, err
	}
	w0, err := serverWindow(ctx, meter)
	if err != nil {
		return nil, err
	}
	plan, err := compile(c.policy())
	if err != nil {
		return nil, err
	}
	var calls atomic.Int64
	hooks := engine.Hooks{Called: func(engine.CallStats) { calls.Add(1) }}
	es := make([]*engine.Engine, l.engines)
	for i := range es {
		var opts []engine.RedisOption
		if c.batch > 0 {
			opts = append(opts, engine.Batched(c.batch))
		}
		es[i] = engine.New(engine.NewRedis(clients[i], opts...), plan, engine.WithTimeout(10*time.Second), engine.WithHooks(hooks))
	}
	// Untimed: each engine's first call loads the function if the server lacks it and
	// opens a connection; a peek charges nothing and takes no lease.
	var key string
	for _, e := range es {
		d, err := e.Peek(ctx, engine.Attrs(nil))
		if err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
		if len(d.Rules) != 1 || d.Rules[0].Limit-d.Rules[0].Remaining != 0 {
			return nil, fmt.Errorf("warm-up: peek %+v, want one rule with nothing counted", d)
		}
		key = d.Rules[0].Key
	}

	cctx, cancel := context.WithTimeout(ctx, l.maxTime+time.Minute)
	defer cancel()
	var prof *os.File
	if l.profiles != "" {
		name := strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			return '-'
		}, c.name)
		if prof, err = os.Create(fmt.Sprintf("%s/%s-r%d.pprof", l.profiles, name, round)); err != nil {
			return nil, err
		}
		defer prof.Close()
	}
	if err := meter.ConfigResetStat(cctx).Err(); err != nil {
		return nil, err
	}
	calls.Store(0)
	cpu0, err := redisproc.CPU(cctx, meter)
	if err != nil {
		return nil, err
	}
	self0 := selfCPU()
	if prof != nil {
		if err := pprof.StartCPUProfile(prof); err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	out, err := drive(cctx, es, l)
	elapsed := time.Since(t0)
	for _, e := range es {
		if rerr := e.ReturnLeases(cctx); rerr != nil && err == nil {
			err = fmt.Errorf("ReturnLeases: %w", rerr)
		}
	}
	if prof != nil {
		pprof.StopCPUProfile()
	}
	self1 := selfCPU()
	if err != nil {
		return nil, err
	}
	cpu1, err := redisproc.CPU(cctx, meter)
	if err != nil {
		return nil, err
	}
	scripts, scriptUSec, err := scriptCalls(cctx, meter)
	if err != nil {
		return nil, err
	}
	cl := &cell{
		decisions: out.decisions, admitted: out.admitted, fromLease: out.fromLease,
		engineCalls: calls.Load(), scriptCalls: scripts, scriptUSec: scriptUSec, elapsed: elapsed,
	}
	if cl.decisions == 0 {
		return nil, errors.New("no decision within the time limit")
	}
	cl.serverUS = (cpu1 - cpu0) * 1e6 / float64(cl.decisions)
	cl.selfUS = (self1 - self0).Seconds() * 1e6 / float64(cl.decisions)

	// The check: every unit the server counted was admitted, and every admitted one
	// counted; nothing is left in an engine.
	if w1, err := serverWindow(cctx, meter); err != nil || w1 != w0 {
		return nil, fmt.Errorf("the cell ran across a window boundary (%d to %d, %v): its count is split", w0, w1, err)
	}
	for i, e := range es {
		if held := e.Leased(key); held != 0 {
			return nil, fmt.Errorf("CHECK FAILED: engine %d holds %d units of %s after ReturnLeases", i, held, key)
		}
	}
	d, err := es[0].Peek(cctx, engine.Attrs(nil))
	if err != nil {
		return nil, err
	}
	cl.counted = d.Rules[0].Limit - d.Rules[0].Remaining
	if cl.counted != cl.admitted {
		return nil, fmt.Errorf("CHECK FAILED: the server counts %d units of %s, the engines admitted %d (%d decisions)", cl.counted, key, cl.admitted, cl.decisions)
	}
	if cl.admitted != cl.decisions {
		return nil, fmt.Errorf("CHECK FAILED: %d of %d decisions admitted at a limit of %d", cl.admitted, cl.decisions, limit)
	}
	if c.lease == 0 && cl.fromLease != 0 {
		return nil, fmt.Errorf("CHECK FAILED: %d decisions from a lease with no lease_size", cl.fromLease)
	}
	if c.lease > 0 && cl.fromLease == 0 {
		return nil, errors.New("CHECK FAILED: no decision was served from a lease")
	}
	return cl, nil
}

// outcome counts a cell's decisions.
type outcome struct{ decisions, admitted, fromLease int64 }

// drive makes up to l.n decisions from l.g goroutines per engine until l.maxTime has
// passed or one fails.
func drive(ctx context.Context, es []*engine.Engine, l load) (outcome, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	deadline := time.Now().Add(l.maxTime)
	var next, admitted, fromLease atomic.Int64
	var wg sync.WaitGroup
	for _, e := range es {
		for range l.g {
			wg.Go(func() {
				for ctx.Err() == nil && time.Now().Before(deadline) {
					if next.Add(1) > int64(l.n) {
						next.Add(-1)
						return
					}
					d, err := e.Allow(ctx, engine.Attrs(nil))
					if err != nil {
						next.Add(-1)
						cancel(err)
						return
					}
					if d.Allowed {
						admitted.Add(1)
					}
					if d.Source == engine.FromLease {
						fromLease.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return outcome{}, err
	}
	if err := ctx.Err(); err != nil {
		return outcome{}, err
	}
	return outcome{decisions: next.Load(), admitted: admitted.Load(), fromLease: fromLease.Load()}, nil
}

func compile(src string) (*engine.Plan, error) {
	cfg, diags := dsl.Parse(map[string][]byte{"hotkey.hcl": []byte(src)})
	if diags.HasErrors() {
		return nil, diags
	}
	return engine.Compile(cfg)
}

// serverTime is the server's clock (TIME), which the rule's windows follow.
func serverTime(ctx context.Context, meter *redis.Client) (time.Time, error) {
	return meter.Time(ctx).Result()
}

// serverWindow is the index of the window the server's clock is in.
func serverWindow(ctx context.Context, meter *redis.Client) (int64, error) {
	now, err := serverTime(ctx, meter)
	if err != nil {
		return 0, err
	}
	return now.UnixMicro() / window.Microseconds(), nil
}

// awayFromWindowEnd waits for the key's window to end when less than need is left of
// it, so that a cell's decisions all count in one window.
func awayFromWindowEnd(ctx context.Context, meter *redis.Client, need time.Duration) error {
	now, err := serverTime(ctx, meter)
	if err != nil {
		return err
	}
	left := now.Truncate(window).Add(window).Sub(now)
	if left >= need {
		return nil
	}
	progress("waiting %v for the key's window to end", left.Round(time.Second))
	select {
	case <-time.After(left + 100*time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// selfCPU is this process's CPU time (user + system) so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scriptCalls returns the FCALL, EVALSHA and EVAL calls since the last CONFIG RESETSTAT,
// from INFO commandstats (a batch of calls is one FCALL), and their run time in µs.
func scriptCalls(ctx context.Context, meter *redis.Client) (calls, usec float64, err error) {
	info, err := meter.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, err
	}
	calls, usec = redisproc.CommandStats(info, "fcall", "evalsha", "eval")
	return calls, usec, nil
}
