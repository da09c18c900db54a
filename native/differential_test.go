package native

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/internal/traces"
	"github.com/rlctl/rlctl/luahost"
)

// This file is the differential proof of the store: random traces of engine-script calls
// on the same keys, run three ways (the store beside its host, as engine.Native runs them;
// luahost alone; a real redis-server), must agree reply for reply, and the store's keys
// must equal luahost's, value and expiry, after every call. The calls the store decides
// (checks, partial admissions, delayed calls, refunds, owes) are interleaved with calls it
// leaves to the script (stacks with a rule of another algorithm, instants it refuses), so keys
// move between the store and its host both ways throughout.

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// traceCount is the number of random traces per algorithm (traces.Count).
func traceCount() int { return traces.Count(testing.Short() || raceEnabled) }

// traceLen is the number of calls of a trace.
const traceLen = 40

// decidable are the algorithms the store decides.
var decidable = []string{"gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_window"}

func mustAlg(name string) *algorithms.Algorithm {
	a, ok := algorithms.Lookup(name)
	if !ok {
		panic("no algorithm " + name)
	}
	return a
}

// diffScript is the engine script the traces run: every built-in, and a pool of compiled
// rules of the decidable algorithms, so that calls reach the script's fast checks
// (algorithms/fast.go: compiled rules that vary in nothing) and its compiled rules whose
// values vary per call, as well as the algorithms' own checks (rules sent whole).
var diffScript = sync.OnceValue(func() *algorithms.Script {
	rng := rand.New(rand.NewPCG(7, 7))
	var pool []*algorithms.Compiled
	for _, name := range decidable {
		a := mustAlg(name)
		for i := range 12 {
			c := &algorithms.Compiled{Algorithm: a, Params: randomParams(rng, a), Shadow: i%4 == 3}
			if i >= 8 {
				c.Vary = []int{0}
				if name == "gcra" && i%2 == 0 {
					c.Vary = []int{2} // the burst
				}
			}
			pool = append(pool, c)
		}
	}
	s, err := algorithms.Assemble(algorithms.Builtin(), pool...)
	if err != nil {
		panic(err)
	}
	return s
})

// compiledOf returns the script's compiled rules of a.
func compiledOf(s *algorithms.Script, a *algorithms.Algorithm) []*algorithms.Compiled {
	var out []*algorithms.Compiled
	for _, c := range s.Rules {
		if c.Algorithm == a {
			out = append(out, c)
		}
	}
	return out
}

// randomCount draws a count parameter: mostly small, so that traces reach every branch
// often; now and then large (rounding in the float arithmetic); 0 in one draw of 13 when
// the parameter takes 0 ('nat': a rule that admits nothing).
func randomCount(rng *rand.Rand, min int64) int64 {
	switch x := rng.IntN(13); {
	case x == 0 && min == 0:
		return 0
	case x == 1:
		return 1 + rng.Int64N(1_000_000)
	}
	return 1 + rng.Int64N(12)
}

// randomParams draws parameters a accepts.
func randomParams(rng *rand.Rand, a *algorithms.Algorithm) []int64 {
	for range 100 {
		var w []int64
		for _, p := range a.Params {
			switch p.Kind {
			case algorithms.Count:
				w = append(w, randomCount(rng, p.Min()))
			case algorithms.Duration:
				w = append(w, []int64{1, 7, 1000, 999_999, 1_000_000, 3_600_000_000}[rng.IntN(6)]+rng.Int64N(3))
			case algorithms.Rate:
				n := 1 + rng.Int64N(7)
				if rng.IntN(8) == 0 {
					n = 1 + rng.Int64N(1000)
				}
				w = append(w, n, []int64{1, 3, 1000, 1_000_000, 60_000_000}[rng.IntN(5)]+rng.Int64N(5))
			case algorithms.Lease:
				w = append(w, 0)
			}
		}
		if a.Validate(w) == nil {
			return w
		}
	}
	panic("no parameters for " + a.Name)
}

// tkey is a key of a trace: its algorithm, its parameters (the current ones: a compiled
// rule's varying value changes between calls) and the compiled rule it names, if any.
type tkey struct {
	key      string
	alg      *algorithms.Algorithm
	params   []int64
	compiled *algorithms.Compiled
}

// decided reports whether the store decides k's rules.
func (k *tkey) decided() bool { return slices.Contains(decidable, k.alg.Name) }

// newKey draws a key of a: in one draw of four a compiled rule of the script's.
func newKey(rng *rand.Rand, s *algorithms.Script, a *algorithms.Algorithm, name string) tkey {
	k := tkey{key: name, alg: a}
	if pool := compiledOf(s, a); len(pool) > 0 && rng.IntN(4) == 0 {
		k.compiled = pool[rng.IntN(len(pool))]
		k.params = slices.Clone(k.compiled.Params)
		k.vary(rng)
		return k
	}
	k.params = randomParams(rng, a)
	return k
}

// vary draws new values for the positions k's compiled rule varies, keeping the old when
// the algorithm refuses the new; for a rule sent whole, now and then new parameters (a
// policy changed under a key that holds state).
func (k *tkey) vary(rng *rand.Rand) {
	if k.compiled == nil {
		if rng.IntN(8) == 0 {
			w := randomParams(rng, k.alg)
			if slices.Contains([]string{"fixed_window", "sliding_window", "sliding_log"}, k.alg.Name) {
				w[1] = k.params[1] // a key counts in one window: its index is the key's state
			}
			if k.alg.Validate(w) == nil {
				k.params = w
			}
		}
		return
	}
	if len(k.compiled.Vary) == 0 {
		return
	}
	for range 20 {
		w := slices.Clone(k.params)
		for _, j := range k.compiled.Vary {
			w[j] = randomCount(rng, 0)
		}
		if k.alg.Validate(w) == nil {
			k.params = w
			return
		}
	}
}

// capacity is the most one call may charge k's rule.
func (k *tkey) capacity() int64 {
	if k.alg.Name == "gcra" {
		return k.params[2]
	}
	return k.params[0]
}

// step is one call of a trace and the server's clock when it runs (µs).
type step struct {
	at   int64
	call algorithms.Call
}

// trace is a sequence of calls over keys.
type trace struct {
	keys []tkey
	// hand: after every call the test hands every key to the host to compare them (the
	// next decision adopts them back); else it reads the store's keys where they are, so
	// the store keeps them and the calls it leaves to the script take them from it.
	hand bool
	// redis: the calls carry client clocks and the server's clock stands still, so that the
	// trace runs on a real Redis as well (see redisRun).
	redis bool
	steps []step
}

// without returns tr without step i.
func (tr *trace) without(i int) *trace {
	out := *tr
	out.steps = append(slices.Clone(tr.steps[:i]), tr.steps[i+1:]...)
	return &out
}

// gen draws the steps of a trace, one at a time, aiming some at the instant a previous
// denial said to retry at (and one microsecond before).
type gen struct {
	rng  *rand.Rand
	tr   *trace
	now  int64 // the true time: the server's clock, or for a Redis trace the clients'
	at   int64 // a Redis trace's server clock
	skew int64
	lag  int64 // how far a client's clock strays from the true time, mostly
	// client: calls carry the client's clock (always in a Redis trace; else in three of
	// four calls of a client-clock trace).
	client bool
	scale  int64
	last   algorithms.Reply // the reference's last reply with rules
	stack  bool
}

func newGen(rng *rand.Rand, tr *trace, stack bool) *gen {
	g := &gen{rng: rng, tr: tr, stack: stack}
	g.now = 1_700_000_000_000_000 + rng.Int64N(1_000_000_000_000)
	g.at = g.now
	g.scale = 1
	for _, k := range tr.keys {
		for _, v := range k.params {
			g.scale = max(g.scale, v)
		}
	}
	g.scale = min(g.scale, 10_000_000_000)
	switch {
	case tr.redis:
		// Every TTL the script sets carries the skew (the prelude's ttl_ms), so with one of
		// at least 10 s nothing expires on the real server's clock during the trace.
		g.client, g.skew = true, 10_000_000+rng.Int64N(g.scale)
		g.lag = 1 + rng.Int64N(max(g.scale/4, 1))
	case rng.IntN(2) == 0:
		g.client = true
		if rng.IntN(4) != 0 {
			g.skew = 1 + rng.Int64N(max(g.scale/4, 1))
		}
		g.lag = max(g.skew, 1)
	case rng.IntN(6) == 0:
		g.skew = 1 + rng.Int64N(max(g.scale/4, 1))
	}
	return g
}

// maxNow bounds the true time of a trace (2096): a retry-after read from a key whose
// parameters changed under it may be far off.
const maxNow = 4_000_000_000_000_000

// clientNow is a client's clock: the true time, or behind it by up to the lag, or behind
// by up to two of the trace's time scales (behind the window a key is in), or ahead.
func (g *gen) clientNow() int64 {
	switch x := g.rng.IntN(8); {
	case x < 4:
		return g.now
	case x < 6:
		return max(0, g.now-g.rng.Int64N(g.lag+1))
	case x == 6:
		return max(0, g.now-g.rng.Int64N(2*g.scale+1))
	}
	return g.now + g.rng.Int64N(g.lag+1)
}

// observe takes the reference's reply to the last step.
func (g *gen) observe(c *algorithms.Call, rep algorithms.Reply) {
	if c.Op != algorithms.OpRefund && rep.Rules != nil {
		g.last = rep
	}
}

// next draws the next step.
func (g *gen) next() step {
	rng := g.rng
	jumped := false
	if g.last.Rules != nil && rng.IntN(3) == 0 {
		for _, r := range g.last.Rules {
			if r.RetryAfter > 0 {
				g.now = max(g.now, g.last.Now+r.RetryAfter-rng.Int64N(2))
				jumped = true
				break
			}
		}
	}
	if !jumped {
		g.now = traces.StepTime(rng, g.now, g.scale)
	}
	g.now = min(g.now, maxNow)
	s := step{at: g.now, call: algorithms.Call{Op: algorithms.OpCheck, Now: algorithms.ServerTime, Skew: g.skew}}
	if g.tr.redis {
		s.at = g.at
	}
	if g.tr.redis || g.client && rng.IntN(4) != 0 {
		s.call.Now = g.clientNow()
	}
	if rng.IntN(200) == 0 {
		// An instant the script refuses (2^53 + 1 would read as 2^53): the store leaves it
		// to the script, whose error the native side replies.
		s.call.Now = algorithms.MaxInt + 2
	}
	c := &s.call
	switch rng.IntN(20) {
	case 0, 1:
		c.Op = algorithms.OpRefund
	case 2:
		c.Op = algorithms.OpOwe
	case 3, 4:
		c.Op, c.Units = algorithms.OpMost, 1+rng.Int64N(12)
	case 5:
		c.Op, c.MaxDelay = algorithms.OpDelay, rng.Int64N(2*g.scale+1)
	}
	keys := g.tr.keys
	n := 1 + rng.IntN(min(3, len(keys)))
	if g.stack && rng.IntN(6) != 0 {
		n = 2 + rng.IntN(len(keys)-1)
	}
	for _, i := range rng.Perm(len(keys))[:n] {
		k := &keys[i]
		if rng.IntN(3) == 0 {
			k.vary(rng)
		}
		cp := k.capacity()
		var cost int64
		switch x := rng.IntN(20); {
		case c.Op == algorithms.OpMost: // a cost per unit
			cost = rng.Int64N(4)
		case c.Op == algorithms.OpOwe && !k.alg.CarriesDebt():
			cost = 0 // only a rule that carries a debt may be charged past its limit
		case x < 2:
			cost = 0
		case x < 11:
			cost = 1
		case x < 18:
			cost = 1 + rng.Int64N(max(cp, 1))
		default:
			cost = cp + 1 + rng.Int64N(3)
		}
		r := algorithms.Rule{Key: k.key, Algorithm: k.alg, Params: k.params, Cost: cost, Shadow: rng.IntN(5) == 0}
		if k.compiled != nil {
			r = r.Compile(k.compiled)
		}
		c.Rules = append(c.Rules, r)
	}
	return s
}

// newTrace draws a trace's keys (of algorithm a, or for a nil a a stack of 2 to 5 keys of
// mixed algorithms, now and then one the store does not decide) and its mode.
func newTrace(rng *rand.Rand, s *algorithms.Script, a *algorithms.Algorithm, withRedis bool) *trace {
	tr := &trace{hand: rng.IntN(2) == 0, redis: withRedis && rng.IntN(2) == 0}
	if a != nil {
		for i := range 1 + rng.IntN(3) {
			tr.keys = append(tr.keys, newKey(rng, s, a, fmt.Sprintf("k%d", i)))
		}
		return tr
	}
	for i := range 2 + rng.IntN(4) {
		b := mustAlg(decidable[rng.IntN(len(decidable))])
		if rng.IntN(10) == 0 {
			b = mustAlg("sliding_log")
		}
		tr.keys = append(tr.keys, newKey(rng, s, b, fmt.Sprintf("k%d", i)))
	}
	return tr
}

// result is one side's answer to a call.
type result struct {
	rep algorithms.Reply
	err string
}

func (r result) String() string {
	if r.err != "" {
		return "error " + r.err
	}
	return fmt.Sprintf("%+v", r.rep)
}

func resultOf(rep algorithms.Reply, err error) result {
	if err != nil {
		return result{err: err.Error()}
	}
	return result{rep: rep}
}

// decode decodes a script reply to call c; a refund's ({1, 0, now, server}) as a reply
// with no rules.
func decode(c *algorithms.Call, v any, err error) (algorithms.Reply, error) {
	if err != nil {
		return algorithms.Reply{}, err
	}
	if c.Op == algorithms.OpRefund {
		arr, ok := v.([]any)
		if !ok || len(arr) != 4 || arr[0] != int64(1) || arr[1] != int64(0) {
			return algorithms.Reply{}, fmt.Errorf("refund reply %v", v)
		}
		now, _ := arr[2].(int64)
		server, _ := arr[3].(int64)
		return algorithms.Reply{Allowed: true, Now: now, Server: server}, nil
	}
	return algorithms.DecodeCallReply(c, v)
}

// keyState is a key as the native side holds it after a call: its value, when live.
type keyState struct {
	v    luahost.Value
	live bool
}

// pair is the native side (a store beside its host, called as engine.Native calls them)
// and the reference (luahost alone), on one clock.
type pair struct {
	s       *algorithms.Script
	clock   *luahost.ManualClock
	ref, nh *luahost.Host
	st      *Store
	scratch *luahost.Host // renders the store's keys as luahost.Host.Dump does
	keys    []string      // the trace's
	decided int           // calls the store decided
	left    int           // calls it left to the script
	last    result        // the reference's reply to the last step
	lastGot result        // the native side's
}

func newHost(clock luahost.Clock, s *algorithms.Script) *luahost.Host {
	h := luahost.New(luahost.WithClock(clock), luahost.WithTimeout(0), luahost.WithInstructionLimit(1e9), luahost.WithCommands(s.Commands()...))
	if _, err := h.FunctionLoad(s.Library, true); err != nil {
		panic(err)
	}
	return h
}

func newPair(s *algorithms.Script, tr *trace) *pair {
	at := int64(0)
	if len(tr.steps) > 0 {
		at = tr.steps[0].at
	}
	clock := luahost.NewManualClock(time.UnixMicro(at))
	p := &pair{s: s, clock: clock, ref: newHost(clock, s), nh: newHost(clock, s), scratch: luahost.New(luahost.WithClock(clock))}
	p.st = New(p.nh)
	for _, k := range tr.keys {
		p.keys = append(p.keys, k.key)
	}
	return p
}

// native runs c as engine.Native does: the store decides it, or the script runs on the
// host with c's keys handed to it.
func (p *pair) native(c *algorithms.Call, argv []string) (result, bool) {
	if rep, ok, err := p.st.Decide(c); ok {
		return resultOf(rep, err), true
	}
	var v any
	var err error
	p.st.Hand(c.Keys(), func() { v, err = p.nh.FCall(context.Background(), p.s.Function, c.Keys(), argv) })
	return resultOf(decode(c, v, err)), false
}

// held returns key as the store holds it, when it holds it live.
func (p *pair) held(key string) (luahost.Value, bool) {
	sh := &p.st.shards[shardOf(key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[key]
	if e == nil || e.expires && p.clock.Now().UnixMilli() > e.expireAt {
		return luahost.Value{}, false
	}
	return valueOf(e), true
}

// storeKeys returns the keys the store holds live, sorted.
func (p *pair) storeKeys() []string {
	nowMs := p.clock.Now().UnixMilli()
	var out []string
	for i := range p.st.shards {
		sh := &p.st.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			if !e.expires || nowMs <= e.expireAt {
				out = append(out, k)
			}
		}
		sh.mu.Unlock()
	}
	slices.Sort(out)
	return out
}

// state returns key as the native side holds it, in the store or on its host.
func (p *pair) state(key string) keyState {
	if v, ok := p.held(key); ok {
		return keyState{v, true}
	}
	v, ok := p.nh.TakeKey(key)
	if ok {
		p.nh.PutKey(key, v)
	}
	return keyState{v, ok}
}

// step runs s on both sides and compares the replies and every key of the trace. It
// returns a description of the first difference, or "".
func (p *pair) step(tr *trace, s *step) string {
	p.clock.Set(time.UnixMicro(s.at))
	c := &s.call
	argv, err := c.Argv()
	if err != nil {
		return fmt.Sprintf("the call does not encode: %v", err)
	}
	v, err := p.ref.FCall(context.Background(), p.s.Function, c.Keys(), argv)
	want := resultOf(decode(c, v, err))
	p.last = want
	got, decided := p.native(c, argv)
	p.lastGot = got
	if decided {
		p.decided++
	} else {
		p.left++
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Sprintf("replies differ (decided in Go: %v):\n  luahost %v\n  native  %v", decided, want, got)
	}
	if c.Op == algorithms.OpCheck && !decided && want.err == "" && len(c.Rules) <= maxRules && !slices.ContainsFunc(c.Rules, func(r algorithms.Rule) bool { return !slices.Contains(decidable, r.Algorithm.Name) }) {
		return "the store left a check of its algorithms to the script"
	}
	return p.compareKeys(tr)
}

// compareKeys compares every key of the trace on the two sides: handed to the host (tr.hand)
// or where the native side holds it.
func (p *pair) compareKeys(tr *trace) string {
	if tr.hand {
		p.st.Hand(p.keys, func() {})
		if held := p.storeKeys(); len(held) > 0 {
			return fmt.Sprintf("the store still holds %v after handing them to the host", held)
		}
	}
	var live []string
	for _, key := range p.keys {
		want, wok := p.ref.Dump(key)
		var got string
		var gok bool
		v, inStore := p.held(key)
		if inStore {
			if p.nh.HasKey(key) {
				return fmt.Sprintf("key %s is live in the store and on its host", key)
			}
			p.scratch.PutKey(key, v)
			got, gok = p.scratch.Dump(key)
		} else {
			got, gok = p.nh.Dump(key)
		}
		if want != got || wok != gok {
			return fmt.Sprintf("key %s differs:\n  luahost %q (live %v)\n  native  %q (live %v, in the store %v)", key, want, wok, got, gok, inStore)
		}
		if gok {
			live = append(live, key)
		}
	}
	// No key beyond the trace's, on either side.
	nk := append(p.storeKeys(), p.nh.Keys()...)
	slices.Sort(nk)
	if rk := p.ref.Keys(); !slices.Equal(rk, live) || !slices.Equal(nk, live) {
		return fmt.Sprintf("live keys differ: luahost %v, native %v, the trace's live %v", rk, nk, live)
	}
	return ""
}

// mismatch is the first difference a run of a trace found: at its step at.
type mismatch struct {
	at   int
	what string
}

// checker runs traces and shrinks a failing one.
type checker struct {
	t    *testing.T
	s    *algorithms.Script
	rdb  *redis.Client // nil: no Redis
	base string        // a key prefix unique to the test
	runs int
	// decided and left count the calls the store decided and left to the script.
	decided, left int
	redisTraces   int
}

// record is what a Redis run compares a step with: the native side's reply and keys.
type record struct {
	res  result
	keys []keyState
}

// replay runs tr from the start on a fresh pair, and on Redis when it is a Redis trace,
// and returns the first mismatch, or nil.
func (ck *checker) replay(tr *trace) *mismatch {
	p := newPair(ck.s, tr)
	recs := make([]record, 0, len(tr.steps))
	for i := range tr.steps {
		if m := ck.pairStep(p, tr, i, &recs); m != nil {
			return m
		}
	}
	return ck.redisRun(tr, recs)
}

// pairStep runs step i of tr on p and records its result for Redis.
func (ck *checker) pairStep(p *pair, tr *trace, i int, recs *[]record) *mismatch {
	if what := p.step(tr, &tr.steps[i]); what != "" {
		return &mismatch{i, "luahost and native: " + what}
	}
	if tr.redis {
		rec := record{res: p.lastGot}
		for _, k := range tr.keys {
			rec.keys = append(rec.keys, p.state(k.key))
		}
		*recs = append(*recs, rec)
	}
	return nil
}

// run draws trace number i from rng and runs it, failing the test with the shrunk trace on
// a mismatch.
func (ck *checker) run(rng *rand.Rand, a *algorithms.Algorithm, n int) {
	tr := newTrace(rng, ck.s, a, ck.rdb != nil)
	g := newGen(rng, tr, a == nil)
	p := newPair(ck.s, tr)
	var recs []record
	for i := range n {
		tr.steps = append(tr.steps, g.next())
		if m := ck.pairStep(p, tr, i, &recs); m != nil {
			ck.fail(tr, m)
			return
		}
		g.observe(&tr.steps[i].call, p.last.rep)
	}
	ck.decided += p.decided
	ck.left += p.left
	if tr.redis {
		ck.redisTraces++
		if m := ck.redisRun(tr, recs); m != nil {
			ck.fail(tr, m)
		}
	}
}

// fail shrinks tr, which fails with m, and fails the test with the shortest trace found.
func (ck *checker) fail(tr *trace, m *mismatch) {
	ck.t.Helper()
	tr.steps = tr.steps[:m.at+1]
	small := ck.shrink(tr)
	m2 := ck.replay(small)
	if m2 == nil {
		ck.t.Fatalf("step %d: %s\n(a rerun does not repeat it)\n%s", m.at+1, m.what, formatTrace(tr))
	}
	ck.t.Fatalf("after this shrunk trace (of %d steps first), step %d: %s\n%s", m.at+1, m2.at+1, m2.what, formatTrace(small))
}

// shrink removes steps from a failing trace while it still fails, and returns the
// shortest failing trace it finds.
func (ck *checker) shrink(tr *trace) *trace {
	for i := 0; i < len(tr.steps); {
		try := tr.without(i)
		if m := ck.replay(try); m != nil {
			try.steps = try.steps[:m.at+1]
			tr = try
			continue
		}
		i++
	}
	return tr
}

// formatTrace prints a trace one call per line, for a failure message.
func formatTrace(tr *trace) string {
	var b strings.Builder
	mode := "the server's clock at each step's at"
	if tr.redis {
		mode = "the server's clock still, the calls' own clocks (on Redis too)"
	}
	fmt.Fprintf(&b, "  %s; keys compared %s\n", mode, map[bool]string{true: "after handing them to the host", false: "where they are held"}[tr.hand])
	for _, k := range tr.keys {
		fmt.Fprintf(&b, "  key %s: %s", k.key, k.alg.Name)
		if k.compiled != nil {
			fmt.Fprintf(&b, " compiled @%d %v vary %v shadow %v", k.compiled.Index, k.compiled.Params, k.compiled.Vary, k.compiled.Shadow)
		}
		b.WriteString("\n")
	}
	for i, s := range tr.steps {
		c := &s.call
		fmt.Fprintf(&b, "  %2d. at=%d %s", i+1, s.at, c.Op)
		if c.Now == algorithms.ServerTime {
			b.WriteString(" now=server")
		} else {
			fmt.Fprintf(&b, " now=%d (at%+d)", c.Now, c.Now-s.at)
		}
		if c.Skew > 0 {
			fmt.Fprintf(&b, " skew=%d", c.Skew)
		}
		if c.Op == algorithms.OpMost {
			fmt.Fprintf(&b, " units=%d", c.Units)
		}
		if c.Op == algorithms.OpDelay {
			fmt.Fprintf(&b, " max_delay=%d", c.MaxDelay)
		}
		for _, r := range c.Rules {
			fmt.Fprintf(&b, " [%s %s%v cost=%d", r.Key, r.Algorithm.Name, r.Params, r.Cost)
			if r.Shadow {
				b.WriteString(" shadow")
			}
			if r.Compiled != nil {
				fmt.Fprintf(&b, " @%d", r.Compiled.Index)
			}
			b.WriteString("]")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// prefixed returns c with its keys prefixed.
func prefixed(c algorithms.Call, prefix string) algorithms.Call {
	c.Rules = slices.Clone(c.Rules)
	for j := range c.Rules {
		c.Rules[j].Key = prefix + c.Rules[j].Key
	}
	return c
}

// probeAt is the expiry instant (Unix ms, in 2096) of a Redis trace's probe key, whose
// PTTL tells the server's clock as the server counts TTLs.
const probeAt = 4_000_000_000_000

// redisRun runs a Redis trace on the real server, under keys of its own, all in one
// MULTI/EXEC, and compares it with recs, the native side's replies and keys. After each
// call it reads back every key of the trace: GET or HGETALL, and PEXPIRETIME. Around each
// call it reads the PTTL of a probe key that expires at probeAt: probeAt less it is the
// server's clock as PEXPIRE counts from it (the clock of that instant, or on Redis 7.2 and
// later the transaction's frozen one), so a key the call set expires at that clock plus
// the native TTL, a clock between the two readings.
func (ck *checker) redisRun(tr *trace, recs []record) *mismatch {
	if !tr.redis || ck.rdb == nil {
		return nil
	}
	ck.t.Helper()
	ck.runs++
	prefix := fmt.Sprintf("%s:r%d:", ck.base, ck.runs)
	ctx := context.Background()
	pipe := ck.rdb.TxPipeline()
	type readback struct {
		get  *redis.StringCmd
		hget *redis.MapStringStringCmd
		pexp *redis.Cmd
	}
	probe := prefix + "probe"
	pipe.Do(ctx, "SET", probe, "1", "PXAT", probeAt)
	calls := make([]*redis.Cmd, len(tr.steps))
	before := make([]*redis.Cmd, len(tr.steps))
	after := make([]*redis.Cmd, len(tr.steps))
	reads := make([][]readback, len(tr.steps))
	for i := range tr.steps {
		c := prefixed(tr.steps[i].call, prefix)
		argv, err := c.Argv()
		if err != nil {
			ck.t.Fatalf("step %d does not encode: %v", i+1, err)
		}
		args := make([]any, len(argv))
		for j, a := range argv {
			args[j] = a
		}
		before[i] = pipe.Do(ctx, "PTTL", probe)
		calls[i] = pipe.FCall(ctx, ck.s.Function, c.Keys(), args...)
		after[i] = pipe.Do(ctx, "PTTL", probe)
		for _, k := range tr.keys {
			var rb readback
			if k.decided() {
				if k.alg.Name == "gcra" {
					rb.get = pipe.Get(ctx, prefix+k.key)
				} else {
					rb.hget = pipe.HGetAll(ctx, prefix+k.key)
				}
				rb.pexp = pipe.Do(ctx, "PEXPIRETIME", prefix+k.key)
			}
			reads[i] = append(reads[i], rb)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.As(err, new(redis.Error)) {
		ck.t.Fatalf("redis: %v", err)
	}
	clock := func(cmd *redis.Cmd) int64 {
		pttl, err := cmd.Int64()
		if err != nil || pttl < 0 {
			ck.t.Fatalf("redis: the probe's PTTL: %d %v", pttl, err)
		}
		return probeAt - pttl
	}
	prevExp := make([]int64, len(tr.keys))
	prevTTL := make([]int64, len(tr.keys))
	for i := range tr.steps {
		c := prefixed(tr.steps[i].call, prefix)
		v, err := calls[i].Result()
		got := resultOf(decode(&c, v, err))
		want := recs[i].res
		got.rep.Server, want.rep.Server = 0, 0 // the servers' clocks
		if !reflect.DeepEqual(want, got) {
			return &mismatch{i, fmt.Sprintf("native and redis: replies differ:\n  native %v\n  redis  %v", want, got)}
		}
		from, to := clock(before[i]), clock(after[i])
		for j, k := range tr.keys {
			rb := reads[i][j]
			if rb.pexp == nil {
				continue
			}
			ks := recs[i].keys[j]
			exp, err := rb.pexp.Int64()
			if err != nil {
				ck.t.Fatalf("redis: PEXPIRETIME: %v", err)
			}
			var val string
			if rb.get != nil {
				val = rb.get.Val()
			} else {
				val = fmt.Sprint(rb.hget.Val())
			}
			nv := ""
			if rb.hget != nil {
				m := map[string]string{}
				for f := 0; ks.live && f+1 < len(ks.v.Fields); f += 2 {
					m[ks.v.Fields[f]] = ks.v.Fields[f+1]
				}
				nv = fmt.Sprint(m)
			} else if ks.live {
				nv = ks.v.Str
			}
			ok := ks.live == (exp != -2) && nv == val
			ttl := int64(-1)
			switch {
			case ks.live && ks.v.Expires:
				// A key the call set (its expiry moved, or it is new) expires the native TTL
				// after a clock between the readings; one it did not keeps its TTL.
				ttl = ks.v.ExpireAt - tr.steps[i].at/1000
				set := i == 0 || exp != prevExp[j]
				ok = ok && (from <= exp-ttl && exp-ttl <= to || !set && ttl == prevTTL[j])
			case ks.live:
				ok = ok && exp == -1
			}
			if !ok {
				return &mismatch{i, fmt.Sprintf("native and redis: key %s differs after the call:\n  native %s, live %v, TTL %d ms\n  redis  %s, PEXPIRETIME %d (the server's clock %d to %d ms: a TTL of %d to %d ms)",
					k.key, nv, ks.live, ttl, val, exp, from, to, exp-to, exp-from)}
			}
			prevExp[j], prevTTL[j] = exp, ttl
		}
	}
	return nil
}

// redisClient returns a client of the shared redis-server with the script loaded, or nil
// when there is no redis-server and RLCTL_REQUIRE_REDIS is not 1 (then a subtest "redis"
// skips, saying what is missing).
func redisClient(t *testing.T, s *algorithms.Script) *redis.Client {
	if !redistest.Available() && os.Getenv("RLCTL_REQUIRE_REDIS") != "1" {
		t.Run("redis", func(t *testing.T) { redistest.Shared(t) })
		t.Log("no redis-server: native is compared with luahost only")
		return nil
	}
	rdb := redistest.Shared(t).Client(t)
	if _, err := rdb.FunctionLoadReplace(context.Background(), s.Library).Result(); err != nil {
		t.Fatalf("FUNCTION LOAD: %v", err)
	}
	return rdb
}

// TestNativeMatchesLua runs traceCount random traces per algorithm, and of mixed stacks:
// the store (as engine.Native calls it) and luahost answer every call alike and hold the
// same keys after each, and in half the traces (client clocks) a real redis-server
// answers alike and holds the same keys too.
func TestNativeMatchesLua(t *testing.T) {
	s := diffScript()
	rdb := redisClient(t, s)
	base := fmt.Sprintf("%d:native", os.Getpid())
	cases := append(slices.Clone(decidable), "stacks")
	for ci, name := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var a *algorithms.Algorithm
			if name != "stacks" {
				a = mustAlg(name)
			}
			ck := &checker{t: t, s: s, rdb: rdb, base: base + ":" + name}
			n := traceCount()
			for i := range n {
				ck.run(rand.New(rand.NewPCG(uint64(ci), uint64(i))), a, traceLen)
			}
			if ck.decided == 0 || ck.left == 0 {
				t.Fatalf("the store decided %d calls and left %d to the script: the traces must have both", ck.decided, ck.left)
			}
			t.Logf("%d traces (%d on Redis too): the store decided %d calls, left %d to the script", n, ck.redisTraces, ck.decided, ck.left)
		})
	}
}

// TestNativeRegressions replays the shrunk traces of differences the random traces found,
// fixed since: a token or leaky bucket in debt (after an owe) denies with 0 remaining, as
// the algorithms' Lua replies, where the store (and the script's fast checks of compiled
// rules, algorithms/fast.go) replied with the negative balance.
func TestNativeRegressions(t *testing.T) {
	tb, lb := mustAlg("token_bucket"), mustAlg("leaky_bucket")
	s, err := algorithms.Assemble(algorithms.Builtin(),
		&algorithms.Compiled{Algorithm: tb, Params: []int64{12, 5, 4}},
		&algorithms.Compiled{Algorithm: lb, Params: []int64{10, 1, 1000}})
	if err != nil {
		t.Fatal(err)
	}
	at := func(k tkey, op algorithms.Op, at, cost int64, shadow bool) step {
		r := algorithms.Rule{Key: k.key, Algorithm: k.alg, Params: k.params, Cost: cost, Shadow: shadow}
		if k.compiled != nil {
			r = r.Compile(k.compiled)
		}
		return step{at: at, call: algorithms.Call{Op: op, Now: algorithms.ServerTime, Rules: []algorithms.Rule{r}}}
	}
	plain := tkey{key: "k0", alg: tb, params: []int64{1, 4, 60000004}}
	fastTB := tkey{key: "k1", alg: tb, params: []int64{12, 5, 4}, compiled: s.Rules[0]}
	fastLB := tkey{key: "k2", alg: lb, params: []int64{10, 1, 1000}, compiled: s.Rules[1]}
	const check, owe = algorithms.OpCheck, algorithms.OpOwe
	for name, tr := range map[string]*trace{
		"token_bucket": {keys: []tkey{plain}, steps: []step{
			at(plain, check, 1700180912345933, 1, false),
			at(plain, owe, 1700180922464081, 1, false),
			at(plain, check, 1700180924586882, 1, true),
		}},
		"token_bucket compiled": {keys: []tkey{fastTB}, steps: []step{
			at(fastTB, owe, 1700329193842800, 15, false),
			at(fastTB, check, 1700329193842801, 11, false),
		}},
		"leaky_bucket compiled": {keys: []tkey{fastLB}, steps: []step{
			at(fastLB, owe, 1700308996825475, 15, false),
			at(fastLB, check, 1700308996825476, 11, false),
			at(fastLB, check, 1700308996825476, 1, false),
		}},
	} {
		t.Run(name, func(t *testing.T) {
			ck := &checker{t: t, s: s}
			if m := ck.replay(tr); m != nil {
				t.Fatalf("step %d: %s\n%s", m.at+1, m.what, formatTrace(tr))
			}
			p := newPair(s, tr)
			for i := range tr.steps {
				p.step(tr, &tr.steps[i])
			}
			if r := p.last.rep.Rules[0]; r.Allowed || r.Remaining != 0 {
				t.Errorf("a key in debt: %+v, want denied with 0 remaining", r)
			}
		})
	}
}
