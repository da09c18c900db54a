package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/luahost"
)

// Backend runs an engine script call and returns its raw reply (as go-redis decodes RESP2:
// int64, string, nil, []any) or an error, which is a script error reply when the script
// rejected the call.
type Backend interface {
	Eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error)
	// Del deletes keys (Engine.Reset).
	Del(ctx context.Context, keys ...string) error
}

// Redis is a Backend on a go-redis client: standalone, Sentinel or Cluster.
//
// On a server with Redis Functions (Redis 7 and later) it runs the script's library form
// with FCALL: the library is instantiated once per FUNCTION LOAD, not on every call. When
// the server does not know the function (a new server, a restart without persistence,
// FUNCTION FLUSH, a failover to a node that never had it) it loads the library on that
// server, replacing any copy, and calls again. A server without FCALL (Redis 6, miniredis,
// a managed service whose ACL forbids FUNCTION) is detected by the first call's answer,
// and from then on the backend calls EVALSHA and, when the server does not know the
// script (NOSCRIPT), loads it with SCRIPT LOAD and calls again; a call that still finds
// no script sends the script itself with EVAL, which runs it and caches it again, so even
// a flush racing with the call is invisible to the caller. Both forms run the same code
// (algorithms.Script). Library names carry a hash of the code, so engines with different
// policies share a server; old libraries stay until FUNCTION DELETE or FLUSH.
//
// The calls of concurrent decisions travel in batches, one script call for those that
// queued while the one before was in flight (see Batched; on a cluster, per hash slot): a
// lone call goes alone, at once.
//
// Loading is single-flight: one load per server (per cluster primary) at a time. The
// calls that find the script missing while a load runs wait for it, each no longer than
// its own deadline, and then call again; the load itself runs to its end (at most
// loadTimeout) whichever callers give up. A load that a call started after another call
// saw the script missing but that finished before it asked is not repeated: the call asks
// again first. A missing script is never a backend failure: a caller whose deadline ends
// while it waits for a load has said nothing about the server, and only a load that fails
// for a backend reason (the server down, stalled, out of memory) is one.
//
// On a Redis Cluster the backend's commands are never resent by the client for a
// network error (go-redis would resend a call whose reply was lost to the same node):
// the client still follows MOVED and ASK replies, which say the node did not run the call.
// The engine resends, once, the calls a node refused without running them (see
// ReplyClasses), after refreshing the client's map of the slots; it refreshes the map,
// at most once per slotRefreshEvery, whenever a node fails or its breaker is open.
//
// The engine's decision deadline reaches Redis as the context's deadline. A go-redis client
// honours it only with ContextTimeoutEnabled set (otherwise a stalled server holds the
// caller for the client's ReadTimeout, 3 s by default). NewRedis looks at the client's
// options: when the client does not honour contexts, or is of a type whose options it
// cannot read, every call runs on its own goroutine and Eval returns when the context
// ends, leaving the call to finish (and hold its connection) until the client's own
// timeouts end it. The deadline holds either way; set ContextTimeoutEnabled: true so that
// abandoned calls give their connection back at once.
//
// A call whose reply was lost, for instance on a connection killed after the server ran
// it, must not be resent: it would be charged twice. The backend marks every call it sends
// as one the client must not resend (go-redis's NoRetry), so a client that retries
// (MaxRetries > 0, go-redis's default for a *redis.Client) does not, nor does a cluster
// client, whose redirect loop resends on network errors whatever MaxRetries says: on_error
// decides the call, and the next call reconnects. Calls batched by Pipelined are the
// autopipeline's to resend, so with Pipelined set MaxRetries: -1. The engine logs a
// warning when it sees a client that ignores contexts or retries.
type Redis struct {
	c redis.Scripter
	// proc sends every script call as one prepared command; nil for a client without
	// Process, whose calls go through its Scripter methods (script).
	proc processor
	// fc loads libraries; nil when the client cannot (then EVALSHA only).
	fc functionClient
	// ap, when set, carries FCALLs (Pipelined).
	ap *redis.AutoPipeliner
	// batch, when set, groups the FCALLs of concurrent calls (Batched).
	batch *batcher
	// batchMax is Batched's max; 0: DefaultBatch.
	batchMax int
	// slotBatches, on a cluster, holds a batcher per hash slot (made on first use).
	slotBatches []atomic.Pointer[batcher]
	// batches and batchedCalls count the batches sent and the calls in them (Batches).
	batches, batchedCalls atomic.Uint64
	// evalOnly is set once a server answered that it has no FCALL or FUNCTION.
	evalOnly atomic.Bool
	// detach: the client ignores context deadlines, so Eval waits for them itself.
	detach bool
	// retries: the client resends failed commands.
	retries bool
	// loads runs the script loads, one per server at a time, and counts them.
	loads loads
	// slots decides when a cluster client's slot map is refreshed; nil elsewhere.
	slots *slotMap
}

// ScriptLoads reports how many times the backend sent a server the engine's script
// because a call found it missing (a new or restarted server, FUNCTION FLUSH, SCRIPT
// FLUSH, a failover to a replica that never ran it): one load per server per loss, however
// many calls found it missing. A count that keeps rising is a server losing its scripts:
// each loss costs its callers a round trip, a wait for the load and a compile.
func (r *Redis) ScriptLoads() uint64 { return r.loads.sent.Load() }

// RedisOption configures a Redis backend.
type RedisOption func(*Redis)

// WithoutFunctions makes the backend call EVALSHA only, never FCALL or FUNCTION LOAD: for
// servers whose operators forbid functions and would rather not see the refused first
// call in their logs.
func WithoutFunctions() RedisOption { return func(r *Redis) { r.fc = nil } }

// Pipelined batches the FCALLs of concurrent decisions into shared writes on a
// standalone *redis.Client (go-redis's asynchronous autopipeline; envoyproxy/ratelimit's
// REDIS_PIPELINE_WINDOW is the same idea): fewer system calls and round trips per
// decision under concurrency. Each caller still waits only until its own deadline: a call
// still queued when its caller gives up runs later, and the server refuses it as past the
// call's deadline, so it charges nothing. Other clients, and servers without functions,
// run unbatched. It takes the place of Batched's batching (the default), which shares
// the script call itself, and its costs on the server, and not only the write.
func Pipelined() RedisOption {
	return func(r *Redis) {
		c, ok := r.c.(*redis.Client)
		if !ok || r.fc == nil {
			return
		}
		if ap, err := c.AsyncAutoPipeline(); err == nil {
			r.ap = ap
		}
	}
}

// NewRedis returns a Backend that runs scripts on c (e.g. a *redis.Client, *redis.ClusterClient
// or any redis.UniversalClient).
func NewRedis(c redis.Scripter, opts ...RedisOption) *Redis {
	honours, retries := clientSettings(c)
	r := &Redis{c: c, fc: functionsOf(c), detach: !honours, retries: retries}
	r.proc, _ = c.(processor)
	if cc, ok := c.(*redis.ClusterClient); ok {
		r.slots = &slotMap{every: slotRefreshEvery, refresh: cc.ReloadState, reload: reloadNow(cc)}
	}
	for _, o := range opts {
		o(r)
	}
	r.batching()
	return r
}

// functionClient is what running the library form takes: FCALL, routed by its first key,
// and FUNCTION LOAD on the server that key lives on.
type functionClient interface {
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
	loadOn(ctx context.Context, key, library string) error
}

// serverOf names the server the calls whose first key is key go to: the address of the
// key's primary on a Redis Cluster, "" (the one server) elsewhere or while the cluster's
// slot map is unknown.
func (r *Redis) serverOf(ctx context.Context, key string) string {
	if cc, ok := r.c.(*redis.ClusterClient); ok {
		if node, err := cc.MasterForKey(ctx, key); err == nil {
			return node.Options().Addr
		}
	}
	return ""
}

// scriptLoad loads source with SCRIPT LOAD where the calls whose first key is key run: on
// the key's primary of a Redis Cluster, on every shard of other clients that shard.
func (r *Redis) scriptLoad(ctx context.Context, key, source string) error {
	if cc, ok := r.c.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		return node.ScriptLoad(ctx, source).Err()
	}
	return r.c.ScriptLoad(ctx, source).Err()
}

// processor is a client that runs a prepared command, routed by its first key (every
// go-redis client is one).
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// functionsOf returns c's functionClient: a standalone client loads on its server, a
// cluster client on the primary of the key's slot. Other clients (a Ring shards by key
// on its own) run EVALSHA only.
func functionsOf(c redis.Scripter) functionClient {
	switch c := c.(type) {
	case *redis.Client:
		return standaloneFunctions{c}
	case *redis.ClusterClient:
		return clusterFunctions{c}
	}
	return nil
}

type standaloneFunctions struct{ *redis.Client }

func (c standaloneFunctions) loadOn(ctx context.Context, _, library string) error {
	return c.FunctionLoadReplace(ctx, library).Err()
}

type clusterFunctions struct{ *redis.ClusterClient }

func (c clusterFunctions) loadOn(ctx context.Context, key, library string) error {
	node, err := c.MasterForKey(ctx, key)
	if err != nil {
		return err
	}
	return node.FunctionLoadReplace(ctx, library).Err()
}

// clientSettings reports whether c is known to end a call when its context does, and
// whether it retries failed commands.
func clientSettings(c redis.Scripter) (honoursContext, retries bool) {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled, c.Options().MaxRetries > 0
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled, c.Options().MaxRetries > 0
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled, c.Options().MaxRetries > 0
	}
	return false, false
}

// HonoursDeadline reports whether the client ends a call when the engine's deadline
// passes (see Redis). When false the engine still returns at the deadline.
func (r *Redis) HonoursDeadline() bool { return !r.detach }

// Eval implements Backend.
func (r *Redis) Eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error) {
	if !r.detach {
		return r.eval(ctx, s, keys, argv)
	}
	return r.bounded(ctx, func() (any, error) { return r.eval(ctx, s, keys, argv) })
}

// scriptArgs are a script's names as command arguments, converted to interfaces once
// per plan rather than on every call.
type scriptArgs struct {
	function, sha1, source any
}

func argsOf(s *algorithms.Script) scriptArgs {
	return scriptArgs{function: s.Function, sha1: s.SHA1, source: s.Source}
}

// call runs c, whose ARGV the caller has appended to args after three free values and
// c's keys (see prepare), the engine's path: one argument slice per call, no strings
// formatted or copied.
func (r *Redis) call(ctx context.Context, s *algorithms.Script, sa scriptArgs, c *algorithms.Call, args []any) (any, error) {
	if !r.detach {
		return r.run(ctx, s, sa, c.Rules[0].Key, args)
	}
	return r.bounded(ctx, func() (any, error) { return r.run(ctx, s, sa, c.Rules[0].Key, args) })
}

// prepare returns a slice for a call's command with c's keys at their places: the
// command, function and key count go first (run sets them), then the keys, then room
// for the ARGV.
func prepare(c *algorithms.Call) []any {
	n := len(c.Rules)
	args := make([]any, 3+n, 3+n+6+5*n)
	args[2] = int64(n)
	for i := range c.Rules {
		args[3+i] = &c.Rules[i].Key
	}
	return args
}

// bounded runs f, a call on the client with ctx, and returns when it does or, for a client
// that ignores contexts, when ctx ends.
func (r *Redis) bounded(ctx context.Context, f func() (any, error)) (any, error) {
	if !r.detach {
		return f()
	}
	type result struct {
		v   any
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case res := <-done:
		return res.v, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// boxed holds the ARGV values that calls repeat, each already converted to an interface:
// the protocol, the ops, small counts and costs, and the names of compiled rules. A string
// converted to an interface is copied to the heap; most of a call's values are these.
var boxed = func() map[string]any {
	m := map[string]any{algorithms.Protocol: algorithms.Protocol}
	for _, op := range []algorithms.Op{algorithms.OpCheck, algorithms.OpRefund} {
		m[string(op)] = string(op)
	}
	for i := range 1025 {
		n := strconv.Itoa(i)
		m[n], m["@"+n] = n, "@"+n
	}
	return m
}()

func (r *Redis) eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error) {
	args := make([]any, 3+len(keys), 3+len(keys)+len(argv))
	args[2] = int64(len(keys))
	for i, k := range keys {
		args[3+i] = k
	}
	for _, a := range argv {
		if v, ok := boxed[a]; ok {
			args = append(args, v)
		} else {
			args = append(args, a)
		}
	}
	key := ""
	if len(keys) > 0 {
		key = keys[0]
	}
	return r.run(ctx, s, argsOf(s), key, args)
}

// run sends the script call args (see prepare) whose first key is key: FCALL when the
// server runs functions, loading the library where it is missing, else EVALSHA, loading
// the script where the server does not hold it and sending it with EVAL when it is still
// missing. A call without keys has no server to route an FCALL to: it runs with EVALSHA.
func (r *Redis) run(ctx context.Context, s *algorithms.Script, sa scriptArgs, key string, args []any) (any, error) {
	if r.fc != nil && !r.evalOnly.Load() && args[2] != int64(0) {
		args[0], args[1] = "fcall", sa.function
		var v any
		var err error
		if b := r.batcherFor(key); b != nil {
			v, err = b.do(ctx, r, s, key, args)
		} else {
			v, err = r.sendLoaded(ctx, s, key, args, r.ap, true)
		}
		if !noFunctions(err) {
			return v, err
		}
		r.evalOnly.Store(true)
	}
	args[0], args[1] = "evalsha", sa.sha1
	v, err := r.sendLoaded(ctx, s, key, args, nil, false)
	if err == nil || !isNoScript(err) {
		return v, err
	}
	args[0], args[1] = "eval", sa.source
	return r.send(ctx, args, nil)
}

// maxLoads bounds the loads one call waits for: a server that loses the script again
// between each load and the call after it (FUNCTION FLUSH in a loop) gets the call's
// missing-script reply after that many.
const maxLoads = 2

// sendLoaded sends args, an FCALL of s's library (function) or an EVALSHA of s, and when
// the server answers that it does not hold the script, waits for it to be loaded there
// (loads) and sends args again, up to maxLoads times. It returns the last reply: a
// missing-script reply only after maxLoads loads.
func (r *Redis) sendLoaded(ctx context.Context, s *algorithms.Script, key string, args []any, ap *redis.AutoPipeliner, function bool) (any, error) {
	for n := 0; ; n++ {
		seen := r.loads.epoch()
		v, err := r.send(ctx, args, ap)
		if err == nil {
			return v, nil
		}
		missing := isNoScript(err)
		if function {
			missing = isFunctionNotFound(err)
		}
		if !missing || n == maxLoads {
			return v, err
		}
		load := func(ctx context.Context) error { return r.scriptLoad(ctx, key, s.Source) }
		if function {
			load = func(ctx context.Context) error { return r.fc.loadOn(ctx, key, s.Library) }
		}
		if err := r.loads.await(ctx, r.serverOf(ctx, key), seen, load); err != nil {
			return nil, err
		}
	}
}

// send runs one command, through ap when it is set, waiting for the answer no longer than
// ctx: a command still queued when ctx ends is the pipeline's to send, and the server
// refuses it as past its deadline.
func (r *Redis) send(ctx context.Context, args []any, ap *redis.AutoPipeliner) (any, error) {
	if r.proc == nil {
		return r.script(ctx, args)
	}
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	if ap != nil {
		if err := ap.Submit(ctx, cmd).WaitContext(ctx); err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return cmd.Result()
	}
	_ = r.proc.Process(ctx, onceCmd{cmd})
	return cmd.Result()
}

// onceCmd is a command the client must not resend after a failure that may have come
// after the server ran it (a lost reply, a timeout): resending a script call charges it
// twice. A cluster client still follows MOVED and ASK, which come before the script runs.
// It has the size of a pointer, so passing it as a redis.Cmder allocates nothing.
type onceCmd struct{ *redis.Cmd }

// NoRetry implements redis.Cmder.
func (onceCmd) NoRetry() bool { return true }

// script runs the command args on a client that cannot run a prepared one, through its
// Scripter methods. Such a client has no FCALL (functionsOf), so args is an EVALSHA or
// EVAL.
func (r *Redis) script(ctx context.Context, args []any) (any, error) {
	n := int(args[2].(int64))
	keys := make([]string, n)
	for i := range keys {
		switch k := args[3+i].(type) {
		case string:
			keys[i] = k
		case *string:
			keys[i] = *k
		}
	}
	if args[0] == "eval" {
		return r.c.Eval(ctx, args[1].(string), keys, args[3+n:]...).Result()
	}
	return r.c.EvalSha(ctx, args[1].(string), keys, args[3+n:]...).Result()
}

// Del implements Backend. On a cluster, keys of different slots are deleted one by one.
func (r *Redis) Del(ctx context.Context, keys ...string) error {
	c, ok := r.c.(redis.Cmdable)
	if !ok {
		return errors.New("engine: the Redis client cannot DEL")
	}
	_, err := r.bounded(ctx, func() (any, error) {
		for _, k := range keys {
			if err := c.Del(ctx, k).Err(); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	return err
}

// isFunctionNotFound reports the server's answer to an FCALL of a function it has not
// loaded.
func isFunctionNotFound(err error) bool {
	if err == nil {
		return false
	}
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "ERR Function not found")
}

// noFunctions reports an answer that says the server will not run functions for this
// client: it does not know FCALL or FUNCTION (Redis 6, miniredis), or its ACL forbids them.
func noFunctions(err error) bool {
	if err == nil {
		return false
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := strings.ToLower(rerr.Error())
	unknown := strings.HasPrefix(msg, "err unknown command") || strings.HasPrefix(msg, "err unknown subcommand")
	return strings.HasPrefix(msg, "noperm") || unknown && (strings.Contains(msg, "fcall") || strings.Contains(msg, "function"))
}

func isNoScript(err error) bool {
	if err == nil {
		return false
	}
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "NOSCRIPT")
}

// errLoadWait is the error of a call whose deadline ended while it waited for a load
// of the script that it did not start (loads.await): it says nothing about the server.
var errLoadWait = errors.New("engine: the deadline passed while the script loaded on the server")

// loadTimeout bounds one load of the script. A load runs on its own, not under the
// deadline of the call that started it, so that the callers who wait for it share it
// whichever of them gives up first.
const loadTimeout = 5 * time.Second

// loads makes loading the script single-flight: at most one load per server at a time,
// which every call that finds the script missing on that server waits for.
type loads struct {
	mu      sync.Mutex
	running map[string]*loading // by server (serverOf)
	// done counts the loads that succeeded, on any server, and loaded holds, per server,
	// done's value when a load there last succeeded: a call that saw the script missing
	// on a server where a load succeeded after the call was sent asks again before it
	// loads. (A load on another server says nothing of this one: on a cluster whose
	// primaries all lack the library, a call must not spend its loads waiting for the
	// other primaries'.)
	done   atomic.Uint64
	loaded map[string]uint64
	sent   atomic.Uint64 // loads started (ScriptLoads)
}

// loading is one load under way; err is set before done closes.
type loading struct {
	done chan struct{}
	err  error
}

// epoch returns the count of loads done, to pass to await by a call about to be sent.
func (l *loads) epoch() uint64 { return l.done.Load() }

// await returns at once when a load on server succeeded since epoch; otherwise it starts load on
// server unless a load runs there already, and waits for the one that runs until ctx
// ends. It returns the load's error, or errLoadWait wrapping ctx's error.
func (l *loads) await(ctx context.Context, server string, epoch uint64, load func(context.Context) error) error {
	l.mu.Lock()
	if l.loaded[server] > epoch {
		l.mu.Unlock()
		return nil
	}
	ld, ok := l.running[server]
	if !ok {
		ld = &loading{done: make(chan struct{})}
		if l.running == nil {
			l.running = map[string]*loading{}
		}
		l.running[server] = ld
		l.sent.Add(1)
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
		go func() {
			defer cancel()
			err := load(lctx)
			l.mu.Lock()
			delete(l.running, server)
			if err == nil {
				if l.loaded == nil {
					l.loaded = map[string]uint64{}
				}
				l.loaded[server] = l.done.Add(1)
			}
			ld.err = err
			l.mu.Unlock()
			close(ld.done)
		}()
	}
	l.mu.Unlock()
	select {
	case <-ld.done:
		return ld.err
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", errLoadWait, ctx.Err())
	}
}

// Local is a Backend that runs scripts in-process on a luahost.Host, for single-instance
// services, the on_error = "local" fallback, and simulations on a virtual clock. It cannot
// stall on a network, so the engine's decision deadline does not apply to it (luahost's own
// script timeout stops a runaway script).
//
// Like Redis on a server with functions, it runs the script's library form with FCALL, so
// the library's prelude and built-in algorithms are instantiated once per load, not on
// every call; when the host does not know the function (a new host, FUNCTION FLUSH) it
// loads the library, replacing any copy, and calls again. A script of built-in algorithms
// only (algorithms.Script.Bounded) runs with FCallBounded, whose deadline the host checks
// at each Redis command rather than at every Lua instruction. A Script without a library
// form (no Function) runs with EVALSHA, loaded on NOSCRIPT.
type Local struct {
	h *luahost.Host
	// seen is the host's eviction count last reported to a hook (evicted).
	seen atomic.Uint64
}

// inProcess marks backends that the decision deadline does not apply to.
func (*Local) inProcess() {}

// NewLocal returns a Backend on h that runs every call as the engine script: what verify
// and simulate run. For serving, NewNative decides alike at a fraction of the cost. Give
// h a memory cap (luahost.WithMaxMemory) when the clients it limits are not bounded: see
// WithLocalMaxMemory for what evicting a limiter's key means.
func NewLocal(h *luahost.Host) *Local { return &Local{h: h} }

// evicted returns how many keys the host evicted since the last call that reported some,
// reporting each eviction to exactly one caller.
func (l *Local) evicted() uint64 { return unreported(l.h.Evicted(), &l.seen) }

// unreported returns how much of the count n no caller was told of yet, as seen records,
// reporting each unit to exactly one caller.
func unreported(n uint64, seen *atomic.Uint64) uint64 {
	for {
		prev := seen.Load()
		if n <= prev {
			return 0
		}
		if seen.CompareAndSwap(prev, n) {
			return n - prev
		}
	}
}

// load loads s into the host ahead of its first call, so that compiling the script is not
// paid inside a decision's deadline. A call loads it anyway when the host has lost it.
func (l *Local) load(s *algorithms.Script) {
	if s.Function == "" {
		_, _ = l.h.Load(s.Source)
		return
	}
	_, _ = l.h.FunctionLoad(s.Library, true)
}

// Eval implements Backend.
func (l *Local) Eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error) {
	if s.Function == "" {
		return l.evalSHA(ctx, s, keys, argv)
	}
	fcall := l.h.FCall
	if s.Bounded() {
		fcall = l.h.FCallBounded
	}
	v, err := fcall(ctx, s.Function, keys, argv)
	if !isFunctionNotFound(err) {
		return v, err
	}
	if _, err := l.h.FunctionLoad(s.Library, true); err != nil {
		return nil, err
	}
	return fcall(ctx, s.Function, keys, argv)
}

func (l *Local) evalSHA(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error) {
	v, err := l.h.EvalSHA(ctx, s.SHA1, keys, argv)
	if err == nil || !isNoScript(err) {
		return v, err
	}
	if _, err := l.h.Load(s.Source); err != nil {
		return nil, err
	}
	return l.h.EvalSHA(ctx, s.SHA1, keys, argv)
}

// Del implements Backend.
func (l *Local) Del(ctx context.Context, keys ...string) error {
	for _, k := range keys {
		if _, err := l.h.Do(ctx, "DEL", k); err != nil {
			return err
		}
	}
	return nil
}
