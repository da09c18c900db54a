package algorithms

import (
	"context"
	"errors"
	"fmt"
	"github.com/rlctl/rlctl/internal/traces"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/calendar"
	"github.com/rlctl/rlctl/luahost"
)

// This file holds the machinery of the differential tests: random traces of engine-script
// calls, executors that run them (real Redis, luahost), and shrinking of a failing trace.

// traceKey is a key of a trace with its algorithm and parameters, fixed for the trace.
type traceKey struct {
	key    string
	alg    *Algorithm
	params []int64
	box    Box
	ovr    bool // overridable
	lists  Lists
	cal    *calendar.Period // a calendar rule's periods; nil for none
}

// rule returns k's rule for a call at now, with its lease; a calendar rule's span is
// drawn around a caller's clock up to a period away from now either way (the script
// finds now's period among them).
func (k traceKey) rule(rng *rand.Rand, now int64, lease string) Rule {
	r := Rule{Key: k.key, Algorithm: k.alg, Params: k.params, Lease: lease, Box: k.box, Overridable: k.ovr, Lists: k.lists}
	if k.cal != nil {
		around := time.UnixMicro(now)
		switch rng.IntN(4) {
		case 0:
			_, end := k.cal.Bounds(around)
			around = end.Add(-time.Duration(rng.Int64N(int64(time.Hour))))
		case 1:
			start, _ := k.cal.Bounds(around)
			around = start.Add(time.Duration(rng.Int64N(int64(time.Hour))) - time.Hour)
		}
		r.Calendar, r.Span = true, SpanAround(*k.cal, around)
	}
	return r
}

// randomLists draws lists for one key in three: an exempt list, a deny list (with a retry
// from a microsecond to an hour), or both.
func randomLists(rng *rand.Rand) Lists {
	if rng.IntN(3) != 0 {
		return Lists{}
	}
	var l Lists
	x := rng.IntN(3)
	if x != 1 {
		l.Exempt = "partners"
	}
	if x != 0 {
		l.Deny, l.DenyRetry = "banned", []int64{1, 999, 1_000_000, 3_600_000_000}[rng.IntN(4)]+rng.Int64N(3)
	}
	return l
}

// randomBox draws a penalty box for one key in three (none for concurrency, which a policy
// cannot box): a block from a microsecond to about the key's own time scale, escalating
// in half of them.
func randomBox(rng *rand.Rand, a *Algorithm, params []int64) Box {
	if a.Name == "concurrency" || rng.IntN(3) != 0 {
		return Box{}
	}
	var scale int64 = 1
	for _, v := range params {
		scale = max(scale, v)
	}
	b := Box{For: []int64{1, 7, 1000, max(scale/2, 1), scale}[rng.IntN(5)] + rng.Int64N(3)}
	if rng.IntN(2) == 0 {
		b.Max = b.For * (2 + rng.Int64N(7))
	}
	return b
}

// boxedKey returns k's key, as its own hash tag when k is boxed or overridable, so that its
// box or override (further keys) are in its slot, as the engine renders such a rule's key.
func boxedKey(k traceKey) string {
	if k.box.For > 0 || k.ovr || k.lists.Any() {
		return "{" + k.key + "}"
	}
	return k.key
}

// randomParams draws small parameters so that traces reach every branch often, a count
// that may be 0 (Param.Min) being 0 in one draw of 13: a rule that admits nothing.
func randomParams(rng *rand.Rand, a *Algorithm) []int64 {
	w := paramsAtLeast(rng, a, 0)
	i := 0
	for _, p := range a.Params {
		if p.Min() == 0 && rng.IntN(13) == 0 {
			w[i] = 0
		}
		i += p.slots()
	}
	return w
}

// paramsAtLeast draws parameters whose durations and periods are at least floor µs (plus
// the usual small offsets), for tests where real time must not expire anything. Counts
// are at least 1.
func paramsAtLeast(rng *rand.Rand, a *Algorithm, floor int64) []int64 {
	var w []int64
	for _, p := range a.Params {
		switch p.Kind {
		case Count:
			w = append(w, 1+rng.Int64N(12))
		case Duration:
			w = append(w, floor+[]int64{1, 7, 1000, 999_999, 1_000_000, 3_600_000_000}[rng.IntN(6)]+rng.Int64N(3))
		case Rate:
			w = append(w, 1+rng.Int64N(7), floor+[]int64{1, 3, 1000, 1_000_000, 60_000_000}[rng.IntN(5)]+rng.Int64N(5))
		case Lease:
			w = append(w, 0)
		}
	}
	return w
}

// randomOverride draws an override for key k: nil (clear it) in one draw of three, else
// random figures (the window of a window algorithm kept) until 0 (cleared) or an instant
// within a few of the trace's time scales after now.
func randomOverride(rng *rand.Rand, k traceKey, now, scale int64) *Override {
	if rng.IntN(3) == 0 {
		return nil
	}
	for range 10 {
		o := &Override{Params: randomParams(rng, k.alg)}
		if slices.Contains(windowed, k.alg.Name) {
			o.Params[1] = k.params[1]
		}
		if rng.IntN(2) == 0 {
			o.Until = now + 1 + rng.Int64N(2*scale+2)
		}
		if k.alg.CheckOverride(k.params, o.Params) == nil {
			return o
		}
	}
	return nil
}

// genTrace draws a trace of n calls over keys, answering each with the oracle so that
// some calls land exactly on a previous denial's retry-after (and one microsecond before).
// In half the traces the calls come from clients whose clocks are up to a skew behind the
// true time (client-clock mode): a quarter of the calls are told an earlier now, and
// every call carries the skew, as the engine sends a client-clock policy's clock_skew.
func genTrace(rng *rand.Rand, keys []traceKey, n int) ([]Call, []Reply, error) {
	o := NewOracle()
	now := int64(1_700_000_000_000_000) + rng.Int64N(1_000_000_000_000)
	for _, k := range keys {
		if k.cal != nil {
			now = calendarStart(rng, k.cal)
		}
	}
	var scale int64 = 1
	for _, k := range keys {
		for _, v := range k.params {
			scale = max(scale, v)
		}
	}
	scale = min(scale, 10_000_000_000)
	var skew int64
	if rng.IntN(2) == 0 {
		skew = 1 + rng.Int64N(max(scale/4, 1))
	}
	var calls []Call
	var replies []Reply
	lease := 0
	var last Reply
	for range n {
		jumped := false
		if last.Rules != nil && rng.IntN(3) == 0 {
			for _, r := range last.Rules {
				if r.RetryAfter > 0 {
					now = max(now, last.Now+r.RetryAfter-int64(rng.IntN(2)))
					jumped = true
					break
				}
			}
		}
		if !jumped {
			now = traces.StepTime(rng, now, scale)
		}
		c := Call{Op: OpCheck, Now: now, Skew: skew}
		if skew > 0 && rng.IntN(4) == 0 {
			c.Now -= rng.Int64N(skew + 1)
		}
		switch rng.IntN(10) {
		case 0:
			c.Op = OpRefund
			if rng.IntN(3) == 0 {
				c.Op = OpOwe
			}
		case 8:
			if rng.IntN(2) == 0 {
				break
			}
			k := keys[rng.IntN(len(keys))]
			c.Op = OpInspect
			lease++
			c.Rules = []Rule{k.rule(rng, c.Now, fmt.Sprintf("lease-%d", lease))}
			rep, err := o.Do(&c)
			if err != nil {
				return nil, nil, err
			}
			calls, replies = append(calls, c), append(replies, rep)
			continue
		case 9:
			var listed []traceKey
			for _, k := range keys {
				if k.lists.Any() {
					listed = append(listed, k)
				}
			}
			if len(listed) == 0 {
				break
			}
			k := listed[rng.IntN(len(listed))]
			c.Op, c.List = OpList, k.lists.Exempt
			if c.List == "" || k.lists.Deny != "" && rng.IntN(2) == 0 {
				c.List = k.lists.Deny
			}
			c.Action = []ListAction{ListAdd, ListAdd, ListRemove, ListRead}[rng.IntN(4)]
			lease++
			c.Rules = []Rule{k.rule(rng, c.Now, fmt.Sprintf("lease-%d", lease))}
			rep, err := o.Do(&c)
			if err != nil {
				return nil, nil, err
			}
			calls, replies = append(calls, c), append(replies, rep)
			continue
		case 1:
			c.Op, c.Units = OpMost, 1+rng.Int64N(12)
		case 3:
			if rng.IntN(2) == 0 {
				c.Op, c.MaxDelay = OpDelay, rng.Int64N(2*scale+1)
			}
		case 2:
			var over []traceKey
			for _, k := range keys {
				if k.ovr {
					over = append(over, k)
				}
			}
			if len(over) == 0 {
				break
			}
			k := over[rng.IntN(len(over))]
			c.Op, c.Override = OpOverride, randomOverride(rng, k, c.Now, scale)
			if rng.IntN(4) == 0 {
				c.Override, c.Read = nil, true
			}
			lease++
			c.Rules = []Rule{k.rule(rng, c.Now, fmt.Sprintf("lease-%d", lease))}
			rep, err := o.Do(&c)
			if err != nil {
				return nil, nil, err
			}
			calls, replies = append(calls, c), append(replies, rep)
			continue
		}
		perm := rng.Perm(len(keys))[:1+rng.IntN(min(3, len(keys)))]
		for _, i := range perm {
			k := keys[i]
			capacity, _ := newState(k.alg, k.params)
			cp := capacity.capacity()
			var cost int64
			switch x := rng.IntN(20); {
			case c.Op == OpMost: // a cost per unit
				cost = rng.Int64N(4)
			case c.Op == OpOwe && !k.alg.CarriesDebt():
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
			// The engine never reuses a lease id for an acquisition; a refund (release)
			// names one acquired before, or one never seen.
			lease++
			id := lease
			if c.Op == OpRefund {
				id = rng.IntN(lease + 1)
			}
			r := k.rule(rng, c.Now, fmt.Sprintf("lease-%d", id))
			r.Cost, r.Shadow = cost, rng.IntN(5) == 0
			c.Rules = append(c.Rules, r)
		}
		rep, err := o.Do(&c)
		if err != nil {
			return nil, nil, err
		}
		calls = append(calls, c)
		replies = append(replies, rep)
		if c.Op != OpRefund {
			last = rep
		}
	}
	return calls, replies, nil
}

// expected replays calls on a fresh oracle.
func expected(calls []Call) ([]Reply, error) {
	o := NewOracle()
	out := make([]Reply, len(calls))
	for i := range calls {
		r, err := o.Do(&calls[i])
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// executor runs calls against one engine-script host and returns the decoded replies.
type executor interface {
	name() string
	run(calls []Call) ([]Reply, error)
}

// decode turns one raw script reply into a Reply for call c.
func decode(c *Call, v any, err error) (Reply, error) {
	if err != nil {
		return Reply{}, err
	}
	if c.Op == OpRefund {
		arr, ok := v.([]any)
		if !ok || len(arr) != 4 {
			return Reply{}, fmt.Errorf("refund reply %v", v)
		}
		now, _ := arr[2].(int64)
		if arr[0] != int64(1) || arr[1] != int64(0) {
			return Reply{}, fmt.Errorf("refund reply %v", v)
		}
		return Reply{Allowed: true, Now: now}, nil
	}
	r, err := DecodeCallReply(c, v)
	r.Server = 0 // the hosts' clocks; the oracle has none
	return r, err
}

// redisExec runs calls on a real Redis with EVALSHA, in client-clock mode, all in one
// MULTI/EXEC. The trace's clock is virtual while Redis counts TTLs down in real time (a
// script sees real time even inside EXEC), so after each call the executor PERSISTs the
// call's keys: the comparison with the model then covers every decision, and expiry is
// covered where the clock is virtual too (luahost) and by TestRedisTTLCoversReset.
type redisExec struct {
	rdb    redis.Cmdable
	script *Script
}

func (e redisExec) name() string { return "redis" }

func (e redisExec) run(calls []Call) ([]Reply, error) {
	ctx := context.Background()
	pipe := e.rdb.TxPipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i := range calls {
		argv, err := calls[i].Argv()
		if err != nil {
			return nil, err
		}
		keys := calls[i].Keys()
		cmds[i] = pipe.EvalSha(ctx, e.script.SHA1, keys, anys(argv)...)
		persist(ctx, pipe, &calls[i])
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.As(err, new(redis.Error)) {
		return nil, err
	}
	out := make([]Reply, len(calls))
	for i, cmd := range cmds {
		v, err := cmd.Result()
		r, err := decode(&calls[i], v, err)
		if err != nil {
			return nil, fmt.Errorf("call %d: %w", i+1, err)
		}
		out[i] = r
	}
	return out, nil
}

// persist queues a PERSIST of each key call c may have written: its rules' keys, and a
// boxed rule's box.
func persist(ctx context.Context, pipe redis.Pipeliner, c *Call) {
	for _, r := range c.Rules {
		pipe.Persist(ctx, r.Key)
		if r.Box.For > 0 {
			pipe.Persist(ctx, r.Key+boxSuffix)
		}
	}
}

// anys converts ARGV for go-redis.
func anys(argv []string) []any {
	args := make([]any, len(argv))
	for i, a := range argv {
		args[i] = a
	}
	return args
}

// prefixed returns a copy of calls whose keys start with prefix.
func prefixed(calls []Call, prefix string) []Call {
	out := make([]Call, len(calls))
	for i, c := range calls {
		c.Rules = append([]Rule(nil), c.Rules...)
		for j := range c.Rules {
			c.Rules[j].Key = prefix + c.Rules[j].Key
		}
		out[i] = c
	}
	return out
}

// runner runs traces on an executor, each run under fresh keys.
type runner struct {
	ex   executor
	base string // a key prefix unique to the test
	runs int
}

// firstMismatch runs calls and returns the index of the first reply that differs from the
// oracle, or -1, with the two replies.
func (rn *runner) firstMismatch(calls []Call) (int, Reply, Reply, error) {
	want, err := expected(calls)
	if err != nil {
		return 0, Reply{}, Reply{}, err
	}
	return rn.compare(calls, want)
}

// compare runs calls and returns the index of the first reply that differs from want.
func (rn *runner) compare(calls []Call, want []Reply) (int, Reply, Reply, error) {
	rn.runs++
	got, err := rn.ex.run(prefixed(calls, fmt.Sprintf("%s:r%d:", rn.base, rn.runs)))
	if err != nil {
		return 0, Reply{}, Reply{}, err
	}
	for i := range want {
		if !reflect.DeepEqual(want[i], got[i]) {
			return i, want[i], got[i], nil
		}
	}
	return -1, Reply{}, Reply{}, nil
}

// shrink removes calls from a failing trace while it still fails, and returns the shortest
// failing trace it finds.
func (rn *runner) shrink(calls []Call) []Call {
	for i := 0; i < len(calls); {
		try := append(append([]Call(nil), calls[:i]...), calls[i+1:]...)
		if m, _, _, err := rn.firstMismatch(try); err == nil && m >= 0 {
			calls = try[:m+1]
			continue
		}
		i++
	}
	return calls
}

// formatTrace prints a trace one call per line, for a failure message.
func formatTrace(calls []Call) string {
	var b strings.Builder
	for i, c := range calls {
		fmt.Fprintf(&b, "  %2d. %s now=%d", i+1, c.Op, c.Now)
		if c.Op == OpOverride && c.Read {
			b.WriteString(" read")
		} else if c.Op == OpOverride {
			fmt.Fprintf(&b, " %+v", c.Override)
		}
		for _, r := range c.Rules {
			fmt.Fprintf(&b, " [%s %s%v cost=%d shadow=%v", r.Key, r.Algorithm.Name, r.Params, r.Cost, r.Shadow)
			if r.Box.For > 0 {
				fmt.Fprintf(&b, " box=%d/%d", r.Box.For, r.Box.Max)
			}
			if r.Overridable {
				b.WriteString(" overridable")
			}
			b.WriteString("]")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// checkTraces runs n random traces from seed on ex and fails with the shortest trace that
// shows a difference from the reference model.
func checkTraces(t *testing.T, ex executor, seed uint64, n, length int, keysFor func(rng *rand.Rand, prefix string) []traceKey) {
	t.Helper()
	rn := &runner{ex: ex, base: freshPrefix(t)}
	for i := range n {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		calls, want, err := genTrace(rng, keysFor(rng, fmt.Sprintf("t%d:", i)), length)
		if err != nil {
			t.Fatalf("trace %d: %v", i, err)
		}
		m, want0, got0, err := rn.compare(calls, want)
		if err != nil {
			t.Fatalf("trace %d on %s: %v\n%s", i, ex.name(), err, formatTrace(calls))
		}
		if m < 0 {
			continue
		}
		small := rn.shrink(calls[:m+1])
		m2, want1, got, err := rn.firstMismatch(small)
		if err == nil && m2 < 0 && strings.HasPrefix(ex.name(), "redis") && expiredEarly(calls[:m+1], got0) {
			// A real server expires keys on its wall clock, not the trace's: a stalled
			// machine (a loaded CI box) can let a key with a millisecond TTL expire between
			// a call and the PERSIST after it. A divergence that a rerun does not repeat
			// and that reads exactly as an empty key is that, not the script's doing; the
			// luahost run of the same traces checks expiry on the trace's clock.
			t.Logf("trace %d (seed %d): a key expired on the server's wall clock mid-trace (a rerun agrees with the model):\n%s  want %+v\n  got  %+v",
				i, seed, formatTrace(calls[:m+1]), want0, got0)
			continue
		}
		if err != nil || m2 < 0 {
			t.Fatalf("trace %d (seed %d): %s differs from the reference model at call %d, but a rerun does not (err=%v):\n%s  want %+v\n  got  %+v",
				i, seed, ex.name(), m+1, err, formatTrace(calls[:m+1]), want0, got0)
		}
		t.Fatalf("trace %d (seed %d): %s differs from the reference model after this shrunk trace:\n%s  want %+v\n  got  %+v",
			i, seed, ex.name(), formatTrace(small), want1, got)
	}
}

// expiredEarly reports whether got, the reply to the last of calls, is what the model
// answers when some of that call's keys had expired just before it. Every non-empty subset
// of the keys is tried: one key's expiry changes the whole stack's decision, so the keys
// whose results differ are not only the ones that expired.
func expiredEarly(calls []Call, got Reply) bool {
	o := NewOracle()
	for i := range calls[:len(calls)-1] {
		if _, err := o.Do(&calls[i]); err != nil {
			return false
		}
	}
	last := calls[len(calls)-1]
	if len(last.Rules) != len(got.Rules) || len(last.Rules) > 8 {
		return false
	}
	for set := 1; set < 1<<len(last.Rules); set++ {
		try := &Oracle{states: maps.Clone(o.states), algs: maps.Clone(o.algs), boxes: maps.Clone(o.boxes), overrides: maps.Clone(o.overrides), members: maps.Clone(o.members)}
		for i, r := range last.Rules {
			if set&(1<<i) != 0 {
				delete(try.states, r.Key)
			}
		}
		expired, err := try.Do(&last)
		if err == nil && expired.Allowed == got.Allowed && expired.Decider == got.Decider && slices.Equal(expired.Rules, got.Rules) {
			return true
		}
	}
	return false
}

// hostExec runs calls on a fresh luahost whose clock follows the calls' time (the latest
// so far: a call whose client clock is behind does not move the server's back), so TTLs
// expire on the trace's own clock. After the trace it advances the clock past every
// reported reset-after and fails if any key is left: idle state must disappear.
type hostExec struct {
	script *Script
}

func (e hostExec) name() string { return "luahost" }

func (e hostExec) run(calls []Call) ([]Reply, error) {
	clock := luahost.NewManualClock(time.UnixMicro(0))
	h := luahost.New(luahost.WithTimeout(0), luahost.WithInstructionLimit(1e9), luahost.WithClock(clock), luahost.WithCommands(e.script.Commands()...))
	if _, err := h.Load(e.script.Source); err != nil {
		return nil, err
	}
	ctx := context.Background()
	out := make([]Reply, len(calls))
	var horizon, server int64
	for i := range calls {
		argv, err := calls[i].Argv()
		if err != nil {
			return nil, err
		}
		server = max(server, calls[i].Now)
		clock.Set(time.UnixMicro(server))
		v, err := h.EvalSHA(ctx, e.script.SHA1, calls[i].Keys(), argv)
		r, err := decode(&calls[i], v, err)
		if err != nil {
			return nil, fmt.Errorf("call %d: %w", i+1, err)
		}
		out[i] = r
		for j, rr := range r.Rules {
			// A box that escalates remembers a block for its ceiling after it ends.
			horizon = max(horizon, server+rr.ResetAfter+calls[i].Skew+calls[i].Rules[j].Box.Max)
		}
		if calls[i].Op == OpOverride {
			// An override's change writes the key's state in figures no reply has described
			// yet: it lives at most as long as they let any state live, and while an
			// override that ends is in force, writes keep the key past its end (OVR).
			r := calls[i].Rules[0]
			keep := lifetime(r.Algorithm, r.Params)
			if o := calls[i].Override; o != nil {
				keep = max(keep, lifetime(r.Algorithm, o.Params))
				horizon = max(horizon, o.Until+keep+2*calls[i].Skew)
			}
			// A caller behind the server converts at its own clock: up to a skew later,
			// and expire_us adds the skew again.
			horizon = max(horizon, server+keep+2*calls[i].Skew)
		}
		if calls[i].Op == OpRefund && horizon > 0 {
			// A refund replies with no reset-after: it only lowers state, but it computes
			// TTLs from its caller's clock, so a caller lagging the server by lag keeps a
			// key up to lag longer than the reset-afters reported before it.
			horizon += max(0, server-calls[i].Now)
		}
	}
	if horizon > 0 {
		clock.Set(time.UnixMicro(horizon + 3000))
		// Overrides are records with no expiry of their own (see Override).
		// Overrides and list members live until changed.
		keys := slices.DeleteFunc(h.Keys(), func(k string) bool { return strings.HasSuffix(k, overrideSuffix) || strings.Contains(k, listSuffix) })
		if len(keys) > 0 {
			return nil, fmt.Errorf("keys %v outlive every reset-after (the last ends at %d)", keys, horizon)
		}
	}
	return out, nil
}

// invocations numbers the key prefixes tests take on the shared server, so reruns
// (-count=N) never meet a previous run's keys.
var invocations atomic.Int64

// freshPrefix returns a key prefix no other test invocation in this process uses.
func freshPrefix(t testing.TB) string {
	return fmt.Sprintf("%d:%d:%s", os.Getpid(), invocations.Add(1), t.Name())
}

// TestExpiredEarly: the divergence a loaded machine produced on a real server (a sliding
// log key with a 2 ms TTL expired between a call and the PERSIST after it) reads as an
// early expiry; a wrong answer does not.
func TestExpiredEarly(t *testing.T) {
	a, _ := Lookup("sliding_log")
	rule := func(cost int64, shadow bool) Rule {
		return Rule{Key: "t57:k0", Algorithm: a, Cost: cost, Shadow: shadow, Params: []int64{7, 9}}
	}
	calls := []Call{
		{Op: OpCheck, Now: 1700213732040190, Rules: []Rule{rule(1, false)}},
		{Op: OpCheck, Now: 1700213732040191, Rules: []Rule{rule(0, true)}},
	}
	empty := Reply{Allowed: true, Now: 1700213732040191, Rules: []RuleResult{{Allowed: true, Remaining: 7, Limit: 7}}}
	if !expiredEarly(calls, empty) {
		t.Error("an empty key's answer is not recognised as an early expiry")
	}
	wrong := Reply{Allowed: true, Now: 1700213732040191, Rules: []RuleResult{{Allowed: true, Remaining: 5, ResetAfter: 8, Limit: 7}}}
	if expiredEarly(calls, wrong) {
		t.Error("a wrong answer passes for an early expiry")
	}
}

// TestExpiredEarlyInAStack: in a stack, one key expiring early turns a denial into an
// allowance, so the other rules are charged too and their results differ although their
// keys did not expire (the divergence a loaded CI machine produced on a real server:
// a token bucket's key expired mid-trace). The server's reply here comes from luahost
// with that key deleted between the two calls.
func TestExpiredEarlyInAStack(t *testing.T) {
	a, _ := Lookup("fixed_window")
	calls := []Call{
		{Op: OpCheck, Now: 1700561097353346, Rules: []Rule{
			{Key: "t1:k0", Algorithm: a, Cost: 2, Params: []int64{2, 1000}},
			{Key: "t1:k1", Algorithm: a, Cost: 1, Params: []int64{5, 1000}},
		}},
		{Op: OpCheck, Now: 1700561097353400, Rules: []Rule{
			{Key: "t1:k0", Algorithm: a, Cost: 1, Params: []int64{2, 1000}},
			{Key: "t1:k1", Algorithm: a, Cost: 1, Params: []int64{5, 1000}},
		}},
	}
	s := Default()
	clock := luahost.NewManualClock(time.UnixMicro(calls[0].Now))
	h := luahost.New(luahost.WithTimeout(0), luahost.WithInstructionLimit(1e9), luahost.WithClock(clock), luahost.WithCommands(s.Commands()...))
	if _, err := h.Load(s.Source); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var got Reply
	for i := range calls {
		if i == 1 {
			if _, err := h.Do(ctx, "DEL", "t1:k0"); err != nil {
				t.Fatal(err)
			}
		}
		argv, err := calls[i].Argv()
		if err != nil {
			t.Fatal(err)
		}
		v, err := h.EvalSHA(ctx, s.SHA1, calls[i].Keys(), argv)
		if got, err = decode(&calls[i], v, err); err != nil {
			t.Fatal(err)
		}
	}
	if !got.Allowed || got.Rules[1].Remaining != 3 {
		t.Fatalf("with k0 gone the stack should be allowed and charge k1 again: %+v", got)
	}
	if !expiredEarly(calls, got) {
		t.Errorf("one key's early expiry in a stack is not recognised: %+v", got)
	}
	got.Rules[1].Remaining = 2
	if expiredEarly(calls, got) {
		t.Errorf("a wrong answer in a stack passes for an early expiry: %+v", got)
	}
}

// TestOracleExpiredOverriddenKey: a key whose state is gone while it has an override is
// empty in the override's figures, as the script decides it, so that a key a real server
// expired mid-trace reads as expired (expiredEarly) with overrides too.
func TestOracleExpiredOverriddenKey(t *testing.T) {
	a, _ := Default().Algorithm("sliding_log")
	o := NewOracle()
	r := Rule{Key: "{k}", Algorithm: a, Params: []int64{12, 1000}, Overridable: true}
	if _, err := o.Do(&Call{Op: OpOverride, Now: 1, Rules: []Rule{r}, Override: &Override{Params: []int64{10, 1000}}}); err != nil {
		t.Fatal(err)
	}
	delete(o.states, r.Key)
	r.Cost = 1
	rep, err := o.Do(&Call{Op: OpCheck, Now: 2, Rules: []Rule{r}})
	if err != nil || rep.Rules[0].Limit != 10 || rep.Rules[0].Remaining != 9 {
		t.Fatalf("%+v %v, want limit 10 and 9 remaining", rep, err)
	}
}
