package luahost

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// DefaultTimeout is the script deadline a Host uses unless WithTimeout says
// otherwise. Rate-limiting scripts run in microseconds; a script still
// running after a second is a runaway loop, and failing it in a second
// keeps tests and simulations from hanging while leaving room for slow CI
// machines and the race detector.
const DefaultTimeout = time.Second

type options struct {
	clock    Clock
	timeout  time.Duration
	steps    uint64   // instruction budget of one script run; 0: none
	commands []string // nil: every implemented command
	strict   bool
	memory   memoryLimit // WithMaxMemory (memory.go)
}

// Option configures a Host.
type Option func(*options)

// WithClock makes c the host's clock: TIME answers it and TTLs run on it.
// The default (and what nil means) is the machine's wall clock.
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// WithTimeout sets the deadline of one script run: a script still running
// after d of wall-clock time fails with an *ErrorReply wrapping ErrTimeout.
// 0 (or less) means no deadline, which saves a check per Lua instruction,
// a few percent of a small script's run time (BenchmarkEvalSHA). The
// default is DefaultTimeout. A bounded call (FCallBounded) is checked
// against it before each Redis command instead.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithInstructionLimit makes a script that runs more than n Lua instructions fail with
// an *ErrorReply wrapping ErrInstructionLimit. Unlike WithTimeout it does not depend on
// how fast the machine is or how loaded: the same script on the same state stops at the
// same instruction, so simulations and proofs stay deterministic (use it with
// WithTimeout(0)). 0 means no limit, the default. It does not apply to FCallBounded.
func WithInstructionLimit(n uint64) Option { return func(o *options) { o.steps = n } }

// WithCommands limits the Redis commands scripts may call to names
// (case-insensitive); any other command fails in the script with Redis's
// "This Redis command is not allowed from script" error. Names the host
// does not implement stay unknown commands. The default allows every
// command the host implements. Do is not limited.
func WithCommands(names ...string) Option {
	return func(o *options) { o.commands = append([]string{}, names...) }
}

// WithStrictKeys controls whether a script may only touch the keys passed in
// KEYS and the keys of their cluster slots (default true): keys that hash, as
// Redis Cluster hashes them, to the slot of one of KEYS, such as "rl:{a}:x:prev"
// for KEYS "rl:{a}:x" (a key's slot is CRC16 of its hash tag, the bytes between
// its first '{' and the first '}' after it when there are any, else of the whole
// key, mod 16384). A command naming any other key then fails in the script with
// an "ERR luahost: script accessed key '...' that is neither in KEYS nor in the
// cluster slot of one of them (strict keys)" error. Redis
// enforces as much in cluster mode (a key of another slot is not the node's);
// the host does everywhere, so that a script that would break on Redis Cluster
// fails in tests. (Dragonfly, by default, allows only the keys in KEYS: a plugin
// with further keys needs its allow-undeclared-keys flag.)
func WithStrictKeys(on bool) Option { return func(o *options) { o.strict = on } }

// Host is an in-process stand-in for a Redis 7.0 server running Lua
// scripts: a gopher-lua VM set up as Redis sets up its Lua environment, and
// an in-memory keyspace of strings, hashes, lists and sorted sets whose TTLs
// run on the host's Clock.
//
// A Host is safe for concurrent use. Like Redis it runs one script or
// command at a time, so a script is atomic with respect to everything else
// done through the same Host.
type Host struct {
	mu      sync.Mutex
	clock   Clock
	timeout time.Duration
	steps   uint64
	allowed map[*command]bool // nil: every command
	strict  bool

	ks   keyspace
	rand redisRand
	cc   cmdCtx

	vm      *vm
	scripts map[string]*lua.LFunction

	libraries map[string]*library  // by name, case-sensitive
	functions map[string]*function // by lower-case name
	loading   *library             // the library FUNCTION LOAD is running, nil otherwise

	run runState

	// recent remembers the host's last script-command lookups (see lookup).
	recent [8]recentCommand
	next   int // the entry of recent the next new name takes

	// timeSec and timeSecText are the seconds of the last TIME a script read, and their
	// Lua string (nil before the first).
	timeSec     int64
	timeSecText lua.LValue
}

// recentCommand is a script command's name as a script spelled it, the command (nil:
// unknown) and whether the host allows it.
type recentCommand struct {
	name    string
	cmd     *command
	allowed bool
}

// lookup returns the command a script names and whether the host allows it (nil: no such
// command). A script calls the same few commands under the same constant names, so the
// last eight names are remembered: a string comparison, which a name that is the same
// constant ends at its pointer, instead of a map lookup and the allowlist's.
func (h *Host) lookup(name string) (*command, bool) {
	for i := range h.recent {
		if r := &h.recent[i]; r.name == name && r.cmd != nil {
			return r.cmd, r.allowed
		}
	}
	cmd := findCommand(name)
	if cmd == nil {
		return nil, false
	}
	allowed := h.allowed == nil || h.allowed[cmd]
	h.recent[h.next] = recentCommand{name: name, cmd: cmd, allowed: allowed}
	h.next = (h.next + 1) % len(h.recent)
	return cmd, allowed
}

// runState describes the script being run.
type runState struct {
	sha  string
	keys []string // KEYS as passed in, for strict-key checks (set with setKeys)
	// slots holds the cluster slots of keys, computed when the run first names a key
	// not in keys (inDeclaredSlot); slotsKnown says whether it has been.
	slots      []uint16
	slotsKnown bool
	// Where the error being handled was raised, found by the error handler.
	errSource string
	errLine   int
	args      []string // reused buffer for redis.call arguments
	dl        deadline
	readOnly  bool // a no-writes function: write commands fail
	// bounded: the run is FCallBounded's, whose deadline is checked at each Redis command
	// (see Host.stopped) instead of at every instruction, until wrote.
	bounded bool
	// wrote: the run has run a write command.
	wrote bool
}

// New returns a Host with an empty keyspace and no scripts.
func New(opts ...Option) *Host {
	o := options{clock: wallClock{}, timeout: DefaultTimeout, strict: true}
	for _, opt := range opts {
		opt(&o)
	}
	if o.clock == nil {
		o.clock = wallClock{}
	}
	o.timeout = max(o.timeout, 0)
	h := &Host{
		clock:   o.clock,
		timeout: o.timeout,
		steps:   o.steps,
		strict:  o.strict,
		ks:      newKeyspace(),
		rand:    newRedisRand(),
		scripts: make(map[string]*lua.LFunction),

		libraries: make(map[string]*library),
		functions: make(map[string]*function),
	}
	if o.commands != nil {
		h.allowed = make(map[*command]bool, len(o.commands))
		for _, n := range o.commands {
			if c := findCommand(n); c != nil {
				h.allowed[c] = true
			}
		}
	}
	h.cc = cmdCtx{h: h, ks: &h.ks}
	h.ks.mem.setLimit(o.memory)
	h.initVM()
	return h
}

// sha1hex returns the lower-case hex SHA1 of s, as SCRIPT LOAD names
// scripts.
func sha1hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Load compiles src and keeps it under the lower-case hex SHA1 of src, which
// it returns, as SCRIPT LOAD does. A script that does not compile is an
// *ErrorReply starting "ERR Error compiling script". Loading the same source
// again is cheap.
func (h *Host) Load(src string) (sha string, err error) {
	sha = sha1hex(src)
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := h.load(sha, src); err != nil {
		return "", err
	}
	return sha, nil
}

func (h *Host) load(sha, src string) (*lua.LFunction, error) {
	if fn, ok := h.scripts[sha]; ok {
		return fn, nil
	}
	proto, err := compile(src, chunkName)
	if err != nil {
		return nil, errorf(compileErrorMessage(src, err))
	}
	fn := h.vm.L.NewFunctionFromProto(proto)
	fn.Env = h.vm.env
	h.scripts[sha] = fn
	return fn, nil
}

// FlushScripts forgets every loaded script, as SCRIPT FLUSH does; EvalSHA
// then answers NOSCRIPT until the script is loaded again.
func (h *Host) FlushScripts() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.scripts)
}

// EvalSHA runs the loaded script sha (case-insensitive) with KEYS and ARGV,
// as EVALSHA does, and returns its reply: int64, string, nil (nil bulk) or
// []any of those, with status replies as plain strings, as go-redis decodes
// RESP2. An error reply, a script error or an unknown sha ("NOSCRIPT ...")
// is returned as an *ErrorReply; an error nested in an array reply is an
// *ErrorReply element. ctx can stop the script early (see ErrorReply.Unwrap);
// a ctx already done returns ctx.Err() without running anything.
func (h *Host) EvalSHA(ctx context.Context, sha string, keys []string, args []string) (any, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sha = lowerASCII(sha)
	h.mu.Lock()
	defer h.mu.Unlock()
	fn, ok := h.scripts[sha]
	if !ok {
		return nil, errorf("NOSCRIPT No matching script. Please use EVAL.")
	}
	return h.runScript(ctx, sha, fn, keys, args)
}

// Eval loads src (see Load) and runs it (see EvalSHA), as EVAL does.
func (h *Host) Eval(ctx context.Context, src string, keys, args []string) (any, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sha := sha1hex(src)
	h.mu.Lock()
	defer h.mu.Unlock()
	fn, err := h.load(sha, src)
	if err != nil {
		return nil, err
	}
	return h.runScript(ctx, sha, fn, keys, args)
}

// Do runs one command against the keyspace outside any script, with the
// same implementation scripts reach through redis.call, and returns its
// reply as EvalSHA does. Unknown commands and wrong argument counts get
// Redis's errors; the command allowlist and strict keys do not apply.
//
// Do also runs FCALL, FCALL_RO and FUNCTION LOAD [REPLACE], DELETE, FLUSH
// [ASYNC|SYNC] and LIST [WITHCODE] [LIBRARYNAME pattern] as Redis 7.0 does
// (see FunctionLoad and FCall; LIST sorts libraries and functions by name).
func (h *Host) Do(ctx context.Context, args ...string) (any, error) {
	if ctx != nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if len(args) == 0 {
		return nil, errorf("ERR empty command")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if r, ok := h.doFunction(ctx, args); ok {
		return goReply(r)
	}
	cmd := findCommand(args[0])
	if cmd == nil {
		return nil, errorf(unknownCommandMessage(args))
	}
	if !cmd.arityOK(len(args)) {
		return nil, errArity(cmd.name)
	}
	h.cc.now = h.clock.Now().UnixMilli()
	h.ks.beginRun(h.cc.now)
	return goReply(cmd.run(&h.cc, args))
}

// unknownCommandMessage is Redis 7.0's reply to an unknown command.
func unknownCommandMessage(args []string) string {
	var b []byte
	b = append(b, "ERR unknown command '"...)
	b = append(b, truncate(args[0], 128)...)
	b = append(b, "', with args beginning with: "...)
	n := 0
	for _, a := range args[1:] {
		if n >= 128 {
			break
		}
		a = truncate(a, 128-n)
		b = append(b, '\'')
		b = append(b, a...)
		b = append(b, "' "...)
		n += len(a) + 3
	}
	return oneLine(string(b))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// goReply turns a command reply into what Do returns.
func goReply(r any) (any, error) {
	switch r := r.(type) {
	case *ErrorReply:
		return nil, r
	case statusReply:
		return string(r), nil
	case timeReply:
		return []any{strconv.FormatInt(r.sec, 10), strconv.FormatInt(r.usec, 10)}, nil
	case *bulks:
		out := make([]any, len(r.vals))
		for i, v := range r.vals {
			if r.set[i] {
				out[i] = v
			}
		}
		return out, nil
	case []any:
		for i, e := range r {
			if s, ok := e.(statusReply); ok {
				r[i] = string(s)
			}
		}
	}
	return r, nil
}

// Keys returns the live keys, sorted. It also frees expired keys.
func (h *Host) Keys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ks.keys(h.clock.Now().UnixMilli())
}

// Len returns the number of live keys. It also frees expired keys.
func (h *Host) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ks.sweep(h.clock.Now().UnixMilli())
	return len(h.ks.m)
}

// Dump returns a canonical rendering of key's type, value and absolute
// expiry instant, and whether the key is live. Two dumps are equal exactly
// when the key holds the same value and expires at the same millisecond,
// which is what "unchanged" means; hash field order does not matter. The
// format is not Redis's DUMP format and may change.
func (h *Host) Dump(key string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.ks.lookup(key, h.clock.Now().UnixMilli())
	if e == nil {
		return "", false
	}
	return dump(e), true
}

// runScript runs fn as script sha. h.mu is held.
func (h *Host) runScript(ctx context.Context, sha string, fn *lua.LFunction, keys, args []string) (any, error) {
	h.vm.setArgs(keys, args)
	h.vm.L.Push(fn)
	return h.exec(ctx, sha, keys, 0, h.vm.env, false)
}

// exec calls the function pushed on the Lua stack, below its nargs arguments, as the script
// or function name with KEYS keys, loadstring compiling chunks into env, and returns its
// reply. h.mu is held.
func (h *Host) exec(ctx context.Context, name string, keys []string, nargs int, env *lua.LTable, readOnly bool) (any, error) {
	L := h.vm.L
	h.run.sha = name
	h.run.setKeys(keys)
	h.run.readOnly = readOnly
	h.run.wrote = false
	h.run.errSource, h.run.errLine = "", 0
	h.cc.now = h.clock.Now().UnixMilli()
	h.ks.beginRun(h.cc.now)
	h.vm.runEnv = env

	watch := h.watch(ctx)
	err := L.PCall(nargs, 1, h.vm.handler)
	h.unwatch(watch)

	h.run.setKeys(nil)
	h.run.readOnly = false
	if err != nil {
		return nil, h.scriptError(err)
	}
	ret := L.Get(-1)
	L.Pop(1)
	r := luaToReply(ret, 0)
	if e, ok := r.(*ErrorReply); ok {
		return nil, e
	}
	return r, nil
}

// watch puts the Lua state under the run's deadline, instruction limit and ctx, and
// reports whether there is any to watch (then unwatch must follow the run).
func (h *Host) watch(ctx context.Context) bool {
	dl := &h.run.dl
	*dl = deadline{}
	if pd := ctx.Done(); pd != nil {
		dl.parent, dl.pdone = ctx, pd
	}
	if h.timeout > 0 {
		dl.at = time.Now().Add(h.timeout)
	}
	if h.run.bounded {
		return false // checked at each Redis command (stopped); no instruction limit
	}
	dl.limit = h.steps
	watch := dl.pdone != nil || !dl.at.IsZero() || dl.limit > 0
	if watch {
		h.vm.L.SetContext(dl)
	}
	return watch
}

// Steps reports how many Lua instructions the host's last script call ran (EVAL, EVALSHA
// or FCALL), a measure of a script's work that no machine's speed changes. Instructions
// are counted on a host with an instruction limit (WithInstructionLimit); elsewhere it
// reports 0.
func (h *Host) Steps() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.run.dl.steps
}

// stopped reports whether a bounded run (FCallBounded) must stop: its deadline has passed
// or its context is done (h.run.dl.err says which).
func (h *Host) stopped() bool {
	return h.run.dl.err != nil || h.run.dl.check() != nil
}

func (h *Host) unwatch(watch bool) {
	if watch {
		h.vm.L.RemoveContext()
	}
}

// scriptError turns the error of a failed script run into the *ErrorReply
// Redis 7.0 would send: the message ("ERR " in front unless it is an error
// table, like those redis.call raises, which carries its own code) and
// " script: <sha>, on @user_script:<line>." when the line is known.
func (h *Host) scriptError(err error) *ErrorReply {
	var obj lua.LValue = lua.LString(err.Error())
	if aerr, ok := err.(*lua.ApiError); ok {
		obj = aerr.Object
	}
	var msg string
	var cause error
	if t, ok := obj.(*lua.LTable); ok {
		switch e := h.vm.L.GetField(t, "err").(type) {
		case lua.LString, lua.LNumber:
			msg = luaToString(e)
		default:
			// Redis 7.0 crashes on error({}); report something sane.
			msg = "ERR unknown error"
		}
	} else {
		msg = "ERR " + luaToString(obj)
	}
	if derr := h.run.dl.err; derr != nil {
		cause = derr
		msg = h.killedMessage(derr)
	}
	if h.run.errLine > 0 {
		msg += " script: " + h.run.sha + ", on " + h.run.errSource + ":" + strconv.Itoa(h.run.errLine) + "."
	}
	return &ErrorReply{Msg: oneLine(msg), cause: cause}
}

// killedMessage says why a script was stopped: derr is the run's deadline error.
func (h *Host) killedMessage(derr error) string {
	switch derr {
	case ErrTimeout:
		return "ERR Script killed by luahost: it ran past the " + h.timeout.String() + " deadline"
	case ErrInstructionLimit:
		return "ERR Script killed by luahost: it ran past " + strconv.FormatUint(h.steps, 10) + " Lua instructions"
	}
	return "ERR Script stopped by its context: " + derr.Error()
}
