package luahost_test

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

const oomMessage = "OOM command not allowed when used memory > 'maxmemory'."

// TestAccountingFollowsTraces runs the random command traces of TestTracesMatchRedis on
// hosts with and without an evicting cap, and after every command recounts every key's
// bytes: the running count never drifts, and a host emptied counts nothing.
func TestAccountingFollowsTraces(t *testing.T) {
	for _, opts := range [][]luahost.Option{nil, {luahost.WithMaxMemory(1<<30, luahost.AllKeysLRU)}} {
		for seed := uint64(1); seed <= 4; seed++ {
			h := luahost.New(opts...)
			for i, c := range genTrace(seed, 3000) {
				_, _ = h.Do(ctx, bindStrings(c, "acct")...)
				if err := h.CheckMemory(); err != nil {
					t.Fatalf("seed %d, after command %d %q: %v", seed, i, c, err)
				}
			}
			if h.MemoryUsage() <= 0 {
				t.Errorf("seed %d: %d keys hold %d bytes", seed, h.Len(), h.MemoryUsage())
			}
			for _, k := range h.Keys() {
				if _, err := h.Do(ctx, "DEL", k); err != nil {
					t.Fatal(err)
				}
			}
			if n := h.MemoryUsage(); n != 0 {
				t.Errorf("seed %d: an empty keyspace counts %d bytes", seed, n)
			}
		}
	}
}

// TestAccountingCountsValues: each kind of value counts at least its bytes, a packed
// value far less than the same value unpacked, and expiry frees what it counted.
func TestAccountingCountsValues(t *testing.T) {
	clock := luahost.NewManualClock(time.Unix(1_900_000_000, 0))
	h := luahost.New(luahost.WithClock(clock))
	do := func(args ...string) {
		t.Helper()
		if _, err := h.Do(ctx, args...); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
	}
	grows := func(name string, min int64, f func()) int64 {
		t.Helper()
		before := h.MemoryUsage()
		f()
		if err := h.CheckMemory(); err != nil {
			t.Fatal(err)
		}
		d := h.MemoryUsage() - before
		if d < min {
			t.Errorf("%s: counted %d bytes, less than the %d it holds", name, d, min)
		}
		return d
	}
	big := strings.Repeat("v", 1000)
	grows("string", 1000, func() { do("SET", "s", big, "PX", "1000") })
	packed := grows("packed hash", 20*12, func() {
		for i := range 20 {
			do("HSET", "h", fmt.Sprintf("field%04d", i), "v")
		}
	})
	table := grows("hash of 200 fields", 200*12, func() {
		for i := range 200 {
			do("HSET", "ht", fmt.Sprintf("field%04d", i), "v")
		}
	})
	if packed*10 > table {
		t.Errorf("20 packed fields count %d bytes, 200 in a table %d: packing saves nothing", packed, table)
	}
	grows("packed zset", 100*13, func() {
		for i := range 100 {
			do("ZADD", "z", strconv.Itoa(i), fmt.Sprintf("m%04d", i))
		}
	})
	grows("skiplist", 300*13, func() {
		for i := range 300 {
			do("ZADD", "zs", strconv.Itoa(i), fmt.Sprintf("m%04d", i))
		}
	})
	grows("list", 50*1000, func() {
		for range 50 {
			do("RPUSH", "l", big)
		}
	})
	before := h.MemoryUsage()
	clock.Advance(2 * time.Second)
	if h.Len(); before-h.MemoryUsage() < 1000 {
		t.Errorf("the expired string freed %d bytes", before-h.MemoryUsage())
	}
	if err := h.CheckMemory(); err != nil {
		t.Fatal(err)
	}
}

// TestMaxMemoryOOMMatchesRedis: over the cap under noeviction, a script's first command
// that may add memory fails with Redis's error (raised or, by pcall, returned), unless
// the script wrote before; reads, deletes and expiry run. The same calls go to a
// redis-server whose maxmemory (1 byte) is always exceeded, and must answer alike.
func TestMaxMemoryOOMMatchesRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2})
	t.Cleanup(func() { rdb.Close() })
	host := luahost.New(luahost.WithMaxMemory(1, luahost.NoEviction))
	setup := []any{"k2", "x"}
	if err := rdb.Set(ctx, "k2", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := host.Do(ctx, "SET", setup[0].(string), setup[1].(string)); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	scripts := []string{
		`return redis.call('SET', KEYS[1], 'v')`,
		`return redis.pcall('SET', KEYS[1], 'v')`,
		`local r = redis.pcall('SET', KEYS[1], 'v'); return redis.call('SET', KEYS[1], 'w')`,
		`redis.call('DEL', KEYS[1]); return redis.call('SET', KEYS[1], 'v')`,
		`return redis.call('GET', KEYS[2])`,
		`redis.call('GET', KEYS[2]); return redis.call('ZADD', KEYS[1], 1, 'a')`,
		`redis.call('PEXPIRE', KEYS[2], 100000); return redis.call('HSET', KEYS[3], 'f', 1)`,
		`return redis.call('HINCRBY', KEYS[3], 'f', 1)`,
		`return {redis.call('DEL', KEYS[1], KEYS[3]), redis.call('PTTL', KEYS[2]) > 0}`,
		`return redis.call('INCR', KEYS[1])`,
	}
	for i, src := range scripts {
		keys := []string{"k1", "k2", "k1h"}
		want := canon(rdb.Eval(ctx, src, keys).Result())
		got := canon(host.Eval(ctx, src, keys, nil))
		if got != want {
			t.Errorf("script %d %q\n  redis:   %s\n  luahost: %s", i, src, want, got)
		}
	}
	for _, cmd := range [][]string{{"SET", "k3", "v"}, {"GET", "k2"}, {"DEL", "k2"}} {
		args := make([]any, len(cmd))
		for i, a := range cmd {
			args[i] = a
		}
		want := canon(rdb.Do(ctx, args...).Result())
		got := canon(host.Do(ctx, cmd...))
		if got != want {
			t.Errorf("%q\n  redis:   %s\n  luahost: %s", cmd, want, got)
		}
	}
	for _, k := range host.Keys() {
		if _, err := host.Do(ctx, "DEL", k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := host.Do(ctx, "SET", "k3", "v"); err != nil {
		t.Errorf("an empty keyspace under a 1-byte cap refuses a write: %v", err)
	}
}

// fill runs a script writing key with a TTL of ttl seconds (0: none) and reports its
// error.
func fill(h *luahost.Host, key string, ttl int) error {
	const src = `redis.call('SET', KEYS[1], ARGV[1]) if ARGV[2] ~= '0' then redis.call('EXPIRE', KEYS[1], ARGV[2]) end`
	_, err := h.Eval(ctx, src, []string{key}, []string{strings.Repeat("v", 100), strconv.Itoa(ttl)})
	return err
}

// capped returns a host on a virtual clock capped at 100 keys' worth of fill.
func capped(t *testing.T, policy luahost.EvictionPolicy) (*luahost.Host, int64) {
	t.Helper()
	probe := luahost.New()
	if err := fill(probe, "key-0000", 10); err != nil {
		t.Fatal(err)
	}
	limit := 100 * probe.MemoryUsage()
	clock := luahost.NewManualClock(time.Unix(1_900_000_000, 0))
	return luahost.New(luahost.WithClock(clock), luahost.WithMaxMemory(limit, policy)), limit
}

// TestEvictionKeepsUnderCap: under every evicting policy, 1,000 scripts each writing a
// new key on a host capped at about 100 keys leave it under the cap plus one script's
// writes after every call, with every call answered, evictions counted, and the same
// keys evicted on every run.
func TestEvictionKeepsUnderCap(t *testing.T) {
	for _, policy := range []luahost.EvictionPolicy{luahost.AllKeysLRU, luahost.VolatileLRU, luahost.AllKeysRandom, luahost.VolatileRandom, luahost.VolatileTTL} {
		t.Run(policy.String(), func(t *testing.T) {
			var runs [2][]string
			for run := range runs {
				h, limit := capped(t, policy)
				for i := range 1000 {
					if err := fill(h, fmt.Sprintf("key-%04d", i), 1000+i); err != nil {
						t.Fatalf("call %d: %v", i, err)
					}
					if used := h.MemoryUsage(); used > limit+limit/50 {
						t.Fatalf("call %d: %d bytes counted, cap %d", i, used, limit)
					}
				}
				if err := h.CheckMemory(); err != nil {
					t.Fatal(err)
				}
				if n, keys := h.Evicted(), h.Len(); n < 850 || n+uint64(keys) != 1000 {
					t.Errorf("%d keys evicted, %d left of 1000", n, keys)
				}
				runs[run] = h.Keys()
			}
			if !slices.Equal(runs[0], runs[1]) {
				t.Errorf("two runs kept different keys:\n%v\n%v", runs[0], runs[1])
			}
		})
	}
}

// TestEvictionChoosesByPolicy: LRU keeps a key used on every call; volatile policies
// never evict a key without a TTL; volatile-ttl keeps the keys that expire last.
func TestEvictionChoosesByPolicy(t *testing.T) {
	t.Run("allkeys-lru keeps the hot key", func(t *testing.T) {
		h, _ := capped(t, luahost.AllKeysLRU)
		for i := range 1000 {
			if err := fill(h, fmt.Sprintf("key-%04d", i), 0); err != nil {
				t.Fatal(err)
			}
			if _, err := h.Eval(ctx, `return redis.call('GET', KEYS[1])`, []string{"key-0000"}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, ok := h.Dump("key-0000"); !ok || h.Evicted() == 0 {
			t.Errorf("the key read on every call was evicted (%d evictions)", h.Evicted())
		}
	})
	t.Run("volatile-lru spares keys without TTL", func(t *testing.T) {
		h, _ := capped(t, luahost.VolatileLRU)
		for i := range 50 {
			if err := fill(h, fmt.Sprintf("persistent-%04d", i), 0); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 500 {
			if err := fill(h, fmt.Sprintf("volatile-%04d", i), 100); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 50 {
			if _, ok := h.Dump(fmt.Sprintf("persistent-%04d", i)); !ok {
				t.Fatalf("persistent-%04d was evicted", i)
			}
		}
		if h.Evicted() == 0 {
			t.Fatal("nothing evicted")
		}
		// Once only keys without TTL are left to free, writes fail as under noeviction.
		var err error
		for i := 0; i < 200 && err == nil; i++ {
			err = fill(h, fmt.Sprintf("more-%04d", i), 0)
		}
		if err == nil || !strings.HasPrefix(err.Error(), oomMessage) {
			t.Errorf("writes past the cap with nothing to evict: %v", err)
		}
	})
	t.Run("volatile-ttl frees the nearest expiry", func(t *testing.T) {
		h, _ := capped(t, luahost.VolatileTTL)
		ttls := map[string]int{}
		for i := range 400 {
			k := fmt.Sprintf("key-%04d", i)
			ttls[k] = 1000 + (i*7919)%400 // every TTL once, in a scrambled order
			if err := fill(h, k, ttls[k]); err != nil {
				t.Fatal(err)
			}
		}
		var kept []int
		for _, k := range h.Keys() {
			kept = append(kept, ttls[k])
		}
		sort.Ints(kept)
		if median := kept[len(kept)/2]; median < 1000+300 {
			t.Errorf("the keys kept have a median TTL of %d s; the 100 longest are 1300..1399", median)
		}
	})
}

// TestNoEvictionRefusesThenRecovers: under noeviction the host refuses writes past the
// cap, still deletes, and accepts writes again once under it.
func TestNoEvictionRefusesThenRecovers(t *testing.T) {
	h, _ := capped(t, luahost.NoEviction)
	var err error
	n := 0
	for ; n < 1000 && err == nil; n++ {
		err = fill(h, fmt.Sprintf("key-%04d", n), 100)
	}
	var re *luahost.ErrorReply
	if !errors.As(err, &re) || !strings.HasPrefix(re.Msg, oomMessage+" script: ") {
		t.Fatalf("after %d writes: %v", n, err)
	}
	if n < 90 || n > 110 || h.Evicted() != 0 {
		t.Errorf("refused after %d writes of about 100 that fit, %d evicted", n, h.Evicted())
	}
	for i := range 10 {
		if _, err := h.Do(ctx, "DEL", fmt.Sprintf("key-%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := fill(h, "again", 100); err != nil {
		t.Errorf("a write after deleting under the cap: %v", err)
	}
}

// TestSnapshotRestoresAccounting: a restored host counts what it counted when the
// snapshot was taken, and evicts as it would have.
func TestSnapshotRestoresAccounting(t *testing.T) {
	h, _ := capped(t, luahost.AllKeysLRU)
	for i := range 150 {
		if err := fill(h, fmt.Sprintf("key-%04d", i), 100); err != nil {
			t.Fatal(err)
		}
	}
	s := h.Snapshot()
	used := h.MemoryUsage()
	next := func() []string {
		for i := range 50 {
			if err := fill(h, fmt.Sprintf("next-%04d", i), 100); err != nil {
				t.Fatal(err)
			}
		}
		return h.Keys()
	}
	first := next()
	h.Restore(s)
	if h.MemoryUsage() != used {
		t.Errorf("restored host counts %d bytes, %d when the snapshot was taken", h.MemoryUsage(), used)
	}
	if err := h.CheckMemory(); err != nil {
		t.Fatal(err)
	}
	if second := next(); !slices.Equal(first, second) {
		t.Errorf("after Restore the same writes kept other keys")
	}
}

func TestParseEvictionPolicy(t *testing.T) {
	for _, p := range []luahost.EvictionPolicy{luahost.NoEviction, luahost.AllKeysLRU, luahost.VolatileLRU, luahost.AllKeysRandom, luahost.VolatileRandom, luahost.VolatileTTL} {
		got, err := luahost.ParseEvictionPolicy(strings.ToUpper(p.String()))
		if err != nil || got != p {
			t.Errorf("ParseEvictionPolicy(%q) = %v, %v", strings.ToUpper(p.String()), got, err)
		}
	}
	if _, err := luahost.ParseEvictionPolicy("allkeys-lfu"); !errors.Is(err, luahost.ErrEvictionPolicy) || !strings.Contains(err.Error(), "volatile-ttl") {
		t.Errorf("ParseEvictionPolicy(allkeys-lfu): %v", err)
	}
}
