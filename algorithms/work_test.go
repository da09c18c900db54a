package algorithms

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/internal/redistest"
)

func TestAlloc(t *testing.T) {
	for _, tc := range []struct{ n, want int64 }{
		{1, 8}, {8, 8}, {9, 16}, {17, 32}, {48, 48}, {49, 64}, {128, 128}, {129, 160},
		{160, 160}, {161, 192}, {257, 320}, {513, 640}, {9863, 10240}, {16384, 16384}, {16385, 20480},
	} {
		if got := alloc(tc.n); got != tc.want {
			t.Errorf("alloc(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1 KiB"}, {65536, "64 KiB"}, {177_480, "173.3 KiB"}, {3 << 20, "3 MiB"}} {
		if got := FormatBytes(tc.n); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// The built-ins' declarations: a constant few for the hash and string algorithms, and for
// the per-request sorted sets entries that fall with the smallest cost; costs are clamped
// to the capacity.
func TestWorkOf(t *testing.T) {
	log, _ := Lookup("sliding_log")
	for _, tc := range []struct {
		limit, min, entries int64
	}{{1_000_000, 1000, 1000}, {1_000_000, 1, 1_000_000}, {10, 3, 3}, {10, 0, 10}, {10, 50, 1}} {
		w, ok, err := log.WorkOf([]int64{tc.limit, 3_600_000_000}, Costs{Min: tc.min})
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if w.Entries != tc.entries || w.Elements != 6*tc.entries+4 || w.Type != KeyZset {
			t.Errorf("limit %d, smallest cost %d: %+v, want %d entries", tc.limit, tc.min, w, tc.entries)
		}
	}
	g, _ := Lookup("gcra")
	w, _, _ := g.WorkOf([]int64{10, 1_000_000, 5}, Costs{})
	if w.Commands != 2 || w.Elements != 2 || w.Entries != 1 || w.Type != KeyString {
		t.Errorf("gcra: %+v", w)
	}
	for _, a := range builtin {
		if a.Complexity.Of == nil {
			t.Errorf("%s declares no work", a.Name)
		}
	}
	if _, _, err := g.WorkOf([]int64{1}, Costs{}); err == nil {
		t.Error("wrong parameter count accepted")
	}
}

// TestRedisMemoryModel holds KeyMemory to MEMORY USAGE on a real Redis: keys of every type,
// with random element counts and lengths on both sides of the encoding thresholds, filled
// with elements of the longest length, and sorted sets and hashes that grew past the
// threshold and shrank again.
func TestRedisMemoryModel(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 0))
	prefix := freshPrefix(t)
	worst := map[KeyType]float64{}
	for i := range 160 {
		typ := KeyTypes[i%len(KeyTypes)]
		n := []int64{1, 2, 3, 100, 128, 129, 200, 1000}[rng.IntN(8)] + rng.Int64N(3)
		l := []int64{1, 17, 33, 44, 45, 48, 63, 64, 65, 200}[rng.IntN(10)]
		if typ == KeyString {
			n = 1
		}
		key := fmt.Sprintf("%s:%d", prefix, i)
		elem := func(j int64) string { // l bytes, distinct per j
			s := strconv.FormatInt(j, 36) + ":"
			return s + strings.Repeat("x", int(max(0, l-int64(len(s)))))
		}
		pipe := rdb.Pipeline()
		var grown int64
		switch typ {
		case KeyString:
			switch rng.IntN(3) {
			case 0:
				pipe.Set(ctx, key, rng.Int64N(MaxInt), 0)
			case 1:
				pipe.Set(ctx, key, elem(0), 0)
			default:
				pipe.Set(ctx, key, elem(0)[:l/2], 0)
				pipe.Append(ctx, key, elem(0)[l/2:])
			}
		case KeyHash:
			lf := max(1, rng.Int64N(l+1))
			for j := range n {
				f := elem(j)[:min(l, lf)]
				if int64(len(f)) < lf {
					f += strings.Repeat("f", int(lf)-len(f))
				}
				v := strings.Repeat("9", int(max(0, l-int64(len(f)))))
				pipe.HSet(ctx, key, f, v)
			}
		case KeyList:
			for j := range n {
				pipe.RPush(ctx, key, elem(j))
			}
		case KeyZset:
			grown = n
			if rng.IntN(3) == 0 {
				grown = n + 200 // past the threshold, then trimmed back to n
			}
			for j := range grown {
				score := float64(1_800_000_000_000_000 + j)
				if rng.IntN(4) == 0 {
					score = rng.Float64() * 1e15
				}
				pipe.ZAdd(ctx, key, redis.Z{Score: score, Member: elem(j)})
			}
			if grown > n {
				pipe.ZRemRangeByRank(ctx, key, 0, grown-n-1)
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		used, err := rdb.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		got := used - KeyNameBytes(len(key))
		bound := KeyMemory(typ, max(n, grown), l)
		if got > bound {
			t.Errorf("%s of %d elements of %d bytes (grown to %d): MEMORY USAGE %d less its name is %d, above the bound %d", typ, n, l, grown, used, got, bound)
		}
		worst[typ] = max(worst[typ], float64(got)/float64(bound))
		rdb.Del(ctx, key)
	}
	t.Logf("largest share of the bound that a key reached: %v", worst)
}

// TestRedisWorstCase holds every built-in to its declared worst case on a real Redis. For
// random parameters and costs it drives the algorithm's key to its worst states through
// the engine script: filled to its limit by requests at distinct instants, denied at the
// limit (the retry-after search), charged within a stack another rule denies (check, then
// the peek), refunded, and charged again once every entry has expired, so one call trims
// them all. After every call the key's MEMORY USAGE (less its name) and element count must
// be within the declared Memory and Entries, and the commands the script ran on the key,
// as MONITOR shows them, must be within Commands and touch at most Elements elements,
// counted by running the same commands again on a copy of the key (RESTORE of its DUMP
// before the call) and reading their replies.
//
// The sorted-set algorithms are declared for the layout of one entry per request
// (sliding_log) or per lease (concurrency): with costs above 1, a layout of one member per
// unit of cost fails here.
func TestRedisWorstCase(t *testing.T) {
	srv := redistest.Start(t)
	// RESP2, so that replies with scores are flat arrays, as scripts see them.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	s := Default()
	if _, err := rdb.ScriptLoad(ctx, s.Source).Result(); err != nil {
		t.Fatal(err)
	}
	mon := startMonitor(t, srv.Addr())
	rng := rand.New(rand.NewPCG(5, 0))
	blocker, _ := Lookup("gcra")
	for _, a := range builtin {
		t.Run(a.Name, func(t *testing.T) {
			for round := range 6 {
				params, capacity, span := worstParams(rng, a, round)
				unit := int64(1)
				if round > 0 && rng.IntN(2) == 0 {
					unit = 1 + rng.Int64N(min(capacity, 5))
				}
				want, _, err := a.WorkOf(params, Costs{Min: unit})
				if err != nil {
					t.Fatal(err)
				}
				d := &driver{t: t, rdb: rdb, mon: mon, script: s, alg: a, params: params, want: want,
					key:     fmt.Sprintf("rl:w:%s:%d", a.Name, round),
					blocker: Rule{Key: fmt.Sprintf("rl:w:%s:%d:blocker", a.Name, round), Algorithm: blocker, Cost: 2, Params: []int64{1, 1_000_000, 1}},
					now:     1_800_000_000_000_000 + rng.Int64N(1_000_000_000)}
				d.start = d.now
				d.drive(rng, capacity, unit, span)
				t.Logf("%s %v, costs multiples of %d: %d calls; most seen: %d commands, %d elements, %d entries, %d bytes; declared: %d, %d, %d, %d",
					a.Name, params, unit, d.calls, d.seen.Commands, d.seen.Elements, d.seen.Entries, d.seen.Memory,
					want.Commands, want.Elements, want.Entries, want.Memory)
			}
		})
	}
}

// worstParams draws parameters for round r: a small capacity, one past the sorted sets'
// small encoding (128 entries), a random one, and again; every duration and period at
// least a minute, so real time expires nothing between calls. span is how long the key's
// state lasts at most (µs): after it, everything has expired.
func worstParams(rng *rand.Rand, a *Algorithm, r int) (w []int64, capacity, span int64) {
	capacity = []int64{1 + rng.Int64N(10), 129 + rng.Int64N(200), 1 + rng.Int64N(400)}[r%3]
	for _, p := range a.Params {
		switch p.Kind {
		case Count:
			w = append(w, capacity)
		case Duration:
			d := 60_000_000 + rng.Int64N(3_600_000_000)
			w = append(w, d)
			span = max(span, 2*d)
		case Rate:
			n, per := 1+rng.Int64N(20), 60_000_000+rng.Int64N(3_600_000_000)
			w = append(w, n, per)
			span = max(span, (capacity*per+n-1)/n)
		case Lease:
			w = append(w, 0)
		}
	}
	return w, capacity, span + 1
}

// charge is an allowed charge: when, how much, under which lease.
type charge struct {
	at, cost int64
	lease    string
}

// driver runs one algorithm's key through its worst states and checks every call.
type driver struct {
	t       *testing.T
	rdb     *redis.Client
	mon     *monitor
	script  *Script
	alg     *Algorithm
	params  []int64
	want    Work
	key     string
	blocker Rule  // a rule that always denies (its cost exceeds its burst)
	start   int64 // the first instant
	now     int64 // the latest instant
	calls   int
	held    []charge // charges allowed and not yet refunded, oldest first
	seq     int
	seen    Work // the most of each figure seen
}

func (d *driver) drive(rng *rand.Rand, capacity, unit, span int64) {
	step := max(1, span/(4*capacity+4))
	for cycle := range 2 {
		// Fill: requests of the smallest cost at distinct instants, until one is denied,
		// which leaves the most entries a key can hold; the second time, now and then a
		// larger multiple, a peek, a refund, a stacked call another rule denies, or a
		// caller whose clock runs behind.
		for denied := 0; denied < 2 && d.calls < 4000; {
			d.now += 1 + rng.Int64N(step)
			cost, at := unit, d.now
			x := 20
			if cycle > 0 {
				x = rng.IntN(20)
			}
			switch {
			case x == 0:
				cost = unit * (1 + rng.Int64N(max(1, capacity/unit)))
			case x == 1:
				cost = 0
			case x == 2:
				d.check(at, cost, true)
				continue
			case x == 3:
				d.refund(rng)
				continue
			case x == 4:
				at -= rng.Int64N(min(d.now-d.start+1, span/4))
			}
			if !d.check(at, cost, false) && cost == unit {
				denied++
			}
		}
		// At the limit: denied requests, whose retry-after needs the key's oldest entries,
		// and a request that can never fit.
		d.check(d.now, unit, false)
		d.check(d.now, unit*max(1, capacity/unit), false)
		d.check(d.now, capacity+1, false)
		// After a quiet spell every entry has expired: the next charge trims them all, and
		// releasing a lease that expired finds it gone.
		d.now += span + rng.Int64N(span)
		d.check(d.now, unit, rng.IntN(2) == 0)
		d.refund(rng)
		d.check(d.now, unit, false)
	}
}

// check runs a check call of cost at instant at on the key, stacked with the blocker when
// stacked, and reports whether the key's rule allowed.
func (d *driver) check(at, cost int64, stacked bool) bool {
	d.seq++
	// A lease id as the engine writes them: 12 hex digits, "-", a counter in base 36.
	lease := fmt.Sprintf("%012x-%s", d.seq, strconv.FormatUint(uint64(d.seq)*0x9e3779b97f4a7c15, 36))
	c := Call{Op: OpCheck, Now: at, Rules: []Rule{{Key: d.key, Algorithm: d.alg, Cost: cost, Params: d.params, Lease: lease}}}
	if stacked {
		c.Rules = append(c.Rules, d.blocker)
	}
	r := d.run(c)
	ok := r.Rules[0].Allowed
	if ok && r.Allowed && cost > 0 {
		d.held = append(d.held, charge{at: at, cost: cost, lease: lease})
	}
	return ok
}

// refund gives back a charge still held, the oldest or a random one, at the instant it was
// charged: a cluster's compensation, or a lease's release.
func (d *driver) refund(rng *rand.Rand) {
	if len(d.held) == 0 {
		return
	}
	i := 0
	if rng.IntN(2) == 0 {
		i = rng.IntN(len(d.held))
	}
	h := d.held[i]
	d.held = append(d.held[:i], d.held[i+1:]...)
	d.run(Call{Op: OpRefund, Now: h.at, Rules: []Rule{{Key: d.key, Algorithm: d.alg, Cost: h.cost, Params: d.params, Lease: h.lease}}})
}

// run runs call c on Redis, then checks the key's memory and what the call did to it.
func (d *driver) run(c Call) Reply {
	t, ctx := d.t, context.Background()
	t.Helper()
	d.calls++
	argv, err := c.Argv()
	if err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("rlctl-work-%d", d.calls)
	pipe := d.rdb.Pipeline()
	dump := pipe.Dump(ctx, d.key)
	eval := pipe.EvalSha(ctx, d.script.SHA1, c.Keys(), anys(argv)...)
	for _, k := range c.Keys() {
		pipe.Persist(ctx, k)
	}
	typ := pipe.Type(ctx, d.key)
	mem := pipe.MemoryUsage(ctx, d.key, 0)
	zcard, hlen := pipe.ZCard(ctx, d.key), pipe.HLen(ctx, d.key)
	pipe.Echo(ctx, marker)
	_, _ = pipe.Exec(ctx)
	v, err := eval.Result()
	r, err := decode(&c, v, err)
	if err != nil {
		t.Fatalf("%s call %d: %v", d.alg.Name, d.calls, err)
	}
	ran := d.mon.until(t, marker)
	var cmds [][]string
	for _, cmd := range ran {
		if len(cmd) > 1 && cmd[1] == d.key {
			cmds = append(cmds, cmd)
		}
	}
	// Memory and entries after the call.
	var w Work
	if typ.Val() != "none" {
		w.Memory = mem.Val() - KeyNameBytes(len(d.key))
		switch typ.Val() {
		case "zset":
			w.Entries = zcard.Val()
		case "hash":
			w.Entries = hlen.Val()
		default:
			w.Entries = 1
		}
		if typ.Val() != d.want.Type.String() {
			t.Errorf("%s: the key is a %s, declared %s", d.alg.Name, typ.Val(), d.want.Type)
		}
	}
	w.Commands = int64(len(cmds))
	w.Elements = d.elements(cmds, dump.Val())
	d.seen = d.seen.Max(w)
	if w.Commands > d.want.Commands || w.Elements > d.want.Elements || w.Entries > d.want.Entries || w.Memory > d.want.Memory {
		var lines []string
		for _, cmd := range cmds {
			lines = append(lines, strings.Join(cmd, " "))
		}
		t.Fatalf("%s %v, call %d (%s, cost %d at %d) is past the declared worst case:\n  did      %d commands, %d elements; the key then holds %d entries, %d bytes\n  declared %d commands, %d elements; %d entries, %d bytes\ncommands:\n  %s",
			d.alg.Name, d.params, d.calls, c.Op, c.Rules[0].Cost, c.Now, w.Commands, w.Elements, w.Entries, w.Memory,
			d.want.Commands, d.want.Elements, d.want.Entries, d.want.Memory, strings.Join(lines, "\n  "))
	}
	return r
}

// elements counts the elements cmds touch, by running them again in order on a copy of
// the key restored from dump (its state before the call) and reading the replies.
func (d *driver) elements(cmds [][]string, dump string) int64 {
	t, ctx := d.t, context.Background()
	if len(cmds) == 0 {
		return 0
	}
	cp := d.key + ":copy"
	pipe := d.rdb.Pipeline()
	pipe.Del(ctx, cp)
	var restore *redis.StatusCmd
	if dump != "" {
		restore = pipe.Restore(ctx, cp, 0, dump)
	}
	type step struct {
		cmd  []string
		pre  []*redis.Cmd // what the count needs from before the command
		done *redis.Cmd
	}
	var steps []step
	for _, cmd := range cmds {
		args := make([]any, len(cmd))
		for i, a := range cmd {
			args[i] = a
		}
		args[1] = cp
		st := step{cmd: cmd}
		switch cmd[0] {
		case "DEL", "UNLINK":
			st.pre = []*redis.Cmd{pipe.Do(ctx, "TYPE", cp), pipe.Do(ctx, "ZCARD", cp), pipe.Do(ctx, "HLEN", cp), pipe.Do(ctx, "LLEN", cp)}
		case "ZRANGEBYSCORE", "ZREVRANGEBYSCORE", "ZRANGE", "ZREVRANGE":
			if lo, hi, ok := scoreRange(cmd); ok {
				st.pre = []*redis.Cmd{pipe.Do(ctx, "ZCOUNT", cp, lo, hi)}
			}
		}
		st.done = pipe.Do(ctx, args...)
		steps = append(steps, st)
	}
	pipe.Del(ctx, cp)
	_, _ = pipe.Exec(ctx)
	if restore != nil && restore.Err() != nil {
		t.Fatalf("RESTORE: %v", restore.Err())
	}
	var n int64
	for _, st := range steps {
		got, err := st.done.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("replaying %v: %v", st.cmd, err)
		}
		k, known := touched(st.cmd, got, st.pre)
		if !known {
			t.Fatalf("%s runs %s, whose elements this test does not count: add it to touched", d.alg.Name, st.cmd[0])
		}
		n += k
	}
	return n
}

// touched is the number of elements cmd touched, from its reply and what pre read before
// it; known is false for a command it does not know.
func touched(cmd []string, reply any, pre []*redis.Cmd) (n int64, known bool) {
	args := len(cmd) - 2 // after the command and its key
	arr, _ := reply.([]any)
	num, _ := reply.(int64)
	withScores := false
	for _, a := range cmd[2:] {
		if strings.EqualFold(a, "WITHSCORES") {
			withScores = true
		}
	}
	returned := int64(len(arr))
	if withScores {
		returned /= 2
	}
	switch cmd[0] {
	case "PEXPIRE", "EXPIRE", "PEXPIREAT", "EXPIREAT", "PERSIST", "TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME",
		"EXISTS", "TYPE", "TOUCH", "ZCARD", "ZCOUNT", "ZLEXCOUNT", "ZRANK", "ZREVRANK", "HLEN", "LLEN", "STRLEN":
		return 0, true
	case "GET", "SET", "SETEX", "PSETEX", "SETNX", "GETSET", "GETDEL", "GETEX", "INCR", "INCRBY", "DECR", "DECRBY",
		"INCRBYFLOAT", "APPEND", "HGET", "HEXISTS", "HSTRLEN", "HINCRBY", "HINCRBYFLOAT", "HSETNX", "ZSCORE", "ZINCRBY":
		return 1, true
	case "HMGET", "HDEL", "ZREM", "ZMSCORE":
		return int64(args), true
	case "HSET", "HMSET":
		return int64(args / 2), true
	case "HGETALL":
		return returned / 2, true
	case "HKEYS", "HVALS", "ZPOPMIN", "ZPOPMAX":
		if cmd[0] == "ZPOPMIN" || cmd[0] == "ZPOPMAX" {
			return returned / 2, true
		}
		return returned, true
	case "ZADD":
		i := 2
		for i < len(cmd) && strings.Contains(" NX XX GT LT CH INCR ", " "+strings.ToUpper(cmd[i])+" ") {
			i++
		}
		return int64((len(cmd) - i) / 2), true
	case "ZREMRANGEBYSCORE", "ZREMRANGEBYRANK", "ZREMRANGEBYLEX":
		return num, true
	case "ZRANGE", "ZREVRANGE", "ZRANGEBYSCORE", "ZREVRANGEBYSCORE":
		if offset, ok := limitOffset(cmd); ok && len(pre) == 1 {
			inRange, _ := pre[0].Int64()
			returned += min(offset, inRange)
		}
		return returned, true
	case "DEL", "UNLINK":
		if len(pre) != 4 {
			return 0, false
		}
		switch typ, _ := pre[0].Text(); typ {
		case "none":
			return 0, true
		case "string":
			return 1, true
		case "zset":
			v, _ := pre[1].Int64()
			return v, true
		case "hash":
			v, _ := pre[2].Int64()
			return v, true
		case "list":
			v, _ := pre[3].Int64()
			return v, true
		}
	}
	return 0, false
}

// scoreRange returns the score range of a ZRANGEBYSCORE, ZREVRANGEBYSCORE or ZRANGE …
// BYSCORE as ZCOUNT takes it.
func scoreRange(cmd []string) (lo, hi string, ok bool) {
	if len(cmd) < 4 {
		return "", "", false
	}
	byScore, rev := cmd[0] == "ZRANGEBYSCORE" || cmd[0] == "ZREVRANGEBYSCORE", cmd[0] == "ZREVRANGEBYSCORE"
	for _, a := range cmd[4:] {
		switch strings.ToUpper(a) {
		case "BYSCORE":
			byScore = true
		case "REV":
			rev = true
		}
	}
	if !byScore {
		return "", "", false
	}
	lo, hi = cmd[2], cmd[3]
	if rev {
		lo, hi = hi, lo
	}
	return lo, hi, true
}

// limitOffset returns the offset of a LIMIT clause.
func limitOffset(cmd []string) (int64, bool) {
	for i := 2; i+1 < len(cmd); i++ {
		if strings.EqualFold(cmd[i], "LIMIT") {
			v, err := strconv.ParseInt(cmd[i+1], 10, 64)
			return max(v, 0), err == nil
		}
	}
	return 0, false
}

// monitor reads a server's MONITOR stream.
type monitor struct {
	conn net.Conn
	r    *bufio.Reader
}

func startMonitor(t *testing.T, addr string) *monitor {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	m := &monitor{conn: conn, r: bufio.NewReader(conn)}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := m.r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		t.Fatalf("MONITOR: %q %v", line, err)
	}
	return m
}

// until returns the commands scripts ran, with their names upper-cased, up to the ECHO of
// marker.
func (m *monitor) until(t *testing.T, marker string) [][]string {
	t.Helper()
	var out [][]string
	for {
		_ = m.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := m.r.ReadString('\n')
		if err != nil {
			t.Fatalf("MONITOR: %v", err)
		}
		_, rest, ok := strings.Cut(strings.TrimRight(line, "\r\n"), " [")
		if !ok {
			continue
		}
		who, quoted, _ := strings.Cut(rest, "] ")
		args, err := unquoteArgs(quoted)
		if err != nil {
			t.Fatalf("MONITOR line %q: %v", line, err)
		}
		if len(args) == 0 {
			continue
		}
		args[0] = strings.ToUpper(args[0])
		if args[0] == "ECHO" && len(args) == 2 && args[1] == marker {
			return out
		}
		if strings.HasSuffix(who, " lua") {
			out = append(out, args)
		}
	}
}

// unquoteArgs splits a MONITOR line's arguments: each in double quotes, escaped as Redis's
// sdscatrepr escapes them.
func unquoteArgs(s string) ([]string, error) {
	var out []string
	for i := 0; i < len(s); {
		if s[i] == ' ' {
			i++
			continue
		}
		if s[i] != '"' {
			return nil, fmt.Errorf("expected a quote at %d", i)
		}
		var b strings.Builder
		i++
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] != '\\' || i+1 >= len(s) {
				b.WriteByte(s[i])
				continue
			}
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if i+2 >= len(s) {
					return nil, errors.New("short \\x escape")
				}
				v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
				if err != nil {
					return nil, err
				}
				b.WriteByte(byte(v))
				i += 2
			default:
				b.WriteByte(s[i])
			}
		}
		if i >= len(s) {
			return nil, errors.New("unterminated argument")
		}
		out = append(out, b.String())
		i++
	}
	return out, nil
}
