package luahost

import (
	"errors"
	"strings"
)

// EvictionPolicy says which keys a host over its memory cap (WithMaxMemory) frees, as
// Redis's maxmemory-policy does.
type EvictionPolicy uint8

const (
	// NoEviction frees nothing: once the keyspace is over the cap, a script's first
	// command that may add memory (SET, INCR, HSET, ZADD, ...; Redis's "denyoom"
	// commands), before the script has written anything, fails with Redis's OOM error,
	// and so does such a command sent with Do. Deleting, expiring and reading commands
	// still run.
	NoEviction EvictionPolicy = iota
	// AllKeysLRU frees the least recently used keys, of any kind.
	AllKeysLRU
	// VolatileLRU frees the least recently used of the keys that have an expire time.
	VolatileLRU
	// AllKeysRandom frees random keys.
	AllKeysRandom
	// VolatileRandom frees random keys among those that have an expire time.
	VolatileRandom
	// VolatileTTL frees the keys that have an expire time, nearest expire time first.
	VolatileTTL
)

var policyNames = [...]string{
	NoEviction:     "noeviction",
	AllKeysLRU:     "allkeys-lru",
	VolatileLRU:    "volatile-lru",
	AllKeysRandom:  "allkeys-random",
	VolatileRandom: "volatile-random",
	VolatileTTL:    "volatile-ttl",
}

// String returns the policy's name in Redis's maxmemory-policy spelling.
func (p EvictionPolicy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return "noeviction"
}

// ErrEvictionPolicy is wrapped by ParseEvictionPolicy's error for a name it does not
// know.
var ErrEvictionPolicy = errors.New("luahost: unknown eviction policy")

// ParseEvictionPolicy returns the policy Redis's maxmemory-policy calls name (any case):
// noeviction, allkeys-lru, volatile-lru, allkeys-random, volatile-random or volatile-ttl.
// The LFU policies are not implemented.
func ParseEvictionPolicy(name string) (EvictionPolicy, error) {
	for p, n := range policyNames {
		if equalFoldASCII(name, n) {
			return EvictionPolicy(p), nil
		}
	}
	return NoEviction, errors.Join(ErrEvictionPolicy, errors.New("luahost: eviction policy "+
		quoteName(name)+" is not one of "+strings.Join(policyNames[:], ", ")))
}

func quoteName(s string) string { return "\"" + s + "\"" }

// memoryLimit is WithMaxMemory's setting.
type memoryLimit struct {
	max    int64
	policy EvictionPolicy
}

// WithMaxMemory caps the keyspace at bytes, as Redis's maxmemory does, with policy to
// choose what to free. Before each script or Do command, a host whose keyspace is over
// the cap frees keys by policy until it is at or under the cap; under NoEviction (or
// when a volatile policy finds no key with an expire time) the script's first command
// that may add memory fails instead, as Redis's scripts do:
//
//	OOM command not allowed when used memory > 'maxmemory'.
//
// A script runs to its end once started, so the keyspace may pass the cap by what one
// script writes; the next script brings it back. The LRU, TTL and random policies pick
// their victims as Redis does, from samples of 5 keys feeding a pool of the 16 best
// candidates, drawn from a random source of the host's own (seeded the same in every
// host, and unrelated to the scripts' math.random), so runs on a virtual clock evict the
// same keys every time. "Recently used" counts script runs and Do commands: keys touched
// by one script are equally recent.
//
// What is counted (MemoryUsage) is the heap the keyspace holds, as the Go runtime
// allocates it: per key a fixed 104 bytes (its map slot and entry), its name, and its
// value's strings and structures rounded up to the allocator's size classes (plus 16
// bytes per key for the eviction pool under an evicting policy). The Lua VM, loaded
// scripts and replies in flight are not counted, nor is the garbage collector's headroom:
// a process holding a capped host typically needs twice the cap (GOGC=100) unless
// GOMEMLIMIT says otherwise.
//
// bytes <= 0 means no cap, the default.
func WithMaxMemory(bytes int64, policy EvictionPolicy) Option {
	return func(o *options) { o.memory = memoryLimit{max: max(bytes, 0), policy: policy} }
}

// MemoryUsage returns the bytes the keyspace holds, as WithMaxMemory counts them. Keys
// expired but not yet freed are counted until they are.
func (h *Host) MemoryUsage() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ks.mem.used
}

// Evicted returns how many keys the host has freed to stay under its memory cap since it
// was created (INFO stats' evicted_keys). Keys that expired are not counted, nor are
// Restore's changes undone.
func (h *Host) Evicted() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ks.mem.evicted
}

// The accounting's constants (see WithMaxMemory).
const (
	// keyBytes is what every key costs besides its name and value: its *entry (64 bytes)
	// and its share of the map (a 24-byte slot and a control byte, at the load of a
	// growing Swiss table).
	keyBytes = 104
	// poolSlotBytes is a key's slot in the eviction pool.
	poolSlotBytes = 16
	// evictionSamples and evictionPoolSize are Redis's maxmemory-samples default and
	// EVPOOL_SIZE.
	evictionSamples  = 5
	evictionPoolSize = 16
)

// memory is the keyspace's accounting and its cap.
type memory struct {
	limit   memoryLimit
	used    int64
	evicted uint64
	clock   uint32 // advanced once per script or Do command; entries keep it in lru

	// Per run: the keyspace was over the cap after evicting, and the run has written.
	oom, dirty bool

	// pool holds every key, in no order, when the policy evicts; entries know their slot.
	pool []string
	// candidates are the best keys to evict found so far, best last.
	candidates []candidate
	rnd        uint64 // xorshift64 state for sampling
}

type candidate struct {
	key   string
	score uint64 // higher: evict sooner
}

const memoryRandSeed = 0x2545F4914F6CDD1D

func (m *memory) setLimit(l memoryLimit) {
	m.limit = l
	m.rnd = memoryRandSeed
}

// evicts reports whether keys must be kept in the pool.
func (m *memory) evicts() bool { return m.limit.max > 0 && m.limit.policy != NoEviction }

// stringBytes returns the heap s takes: nothing when empty, else its bytes rounded up
// to the allocator's size class.
func stringBytes(s string) int64 { return allocBytes(int64(len(s))) }

// sizeClasses are the Go allocator's size classes (runtime/sizeclasses.go) to 32 KiB.
var sizeClasses = [...]int64{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048,
	2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880,
	12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

// allocBytes returns what an allocation of n bytes takes.
func allocBytes(n int64) int64 {
	if n <= 0 {
		return 0
	}
	if n > sizeClasses[len(sizeClasses)-1] {
		const page = 8192
		return (n + page - 1) / page * page
	}
	lo, hi := 0, len(sizeClasses)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if sizeClasses[mid] < n {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return sizeClasses[lo]
}

// entryBytes returns what key and its entry take, as WithMaxMemory counts it.
func (m *memory) entryBytes(key string, e *entry) int64 {
	n := keyBytes + stringBytes(key) + stringBytes(e.str)
	switch o := e.obj.(type) {
	case *hashTable:
		n += allocBytes(64) + allocBytes(int64(16*cap(o.fields))) + allocBytes(int64(16*cap(o.values))) + o.bytes
		if o.index != nil {
			n += 48 * int64(len(o.index)) // a 24-byte slot, at the map's load, and its string header
		}
	case *skiplist:
		n += allocBytes(64) + allocBytes(zslMaxLevel*16) + 40*int64(o.length) + o.bytes // the dict's slot share per member
	case *list:
		n += allocBytes(64) + allocBytes(int64(16*cap(o.buf))) + o.bytes
	}
	if e.slot >= 0 {
		n += poolSlotBytes
	}
	return n
}

// nodeBytes is what a skiplist node of level levels holding member takes, besides its
// share of the dict.
func nodeBytes(levels int, member string) int64 {
	return allocBytes(64) + allocBytes(int64(16*levels)) + stringBytes(member)
}

// account brings key's share of the count up to date with its entry.
func (ks *keyspace) account(key string, e *entry) {
	m := &ks.mem
	if m.evicts() && e.slot < 0 {
		e.slot = int32(len(m.pool))
		m.pool = append(m.pool, key)
	}
	n := m.entryBytes(key, e)
	m.used += n - e.size
	e.size = n
}

// forget takes e, about to be deleted, out of the count and the pool.
func (ks *keyspace) forget(e *entry) {
	m := &ks.mem
	m.used -= e.size
	e.size = 0
	if e.slot < 0 {
		return
	}
	last := len(m.pool) - 1
	if moved := m.pool[last]; int(e.slot) != last {
		m.pool[e.slot] = moved
		ks.m[moved].slot = e.slot
	}
	m.pool[last] = ""
	m.pool = m.pool[:last]
	e.slot = -1
}

// write runs cmd, a write command, for its accounting: under the cap's OOM state it
// refuses a command that may add memory as a script's first write, and afterwards it
// counts each of the command's keys anew.
func (ks *keyspace) write(cmd *command, run func(*cmdCtx, []string) any, c *cmdCtx, args []string) any {
	m := &ks.mem
	if cmd.flags&flagDenyOOM != 0 && m.oom && !m.dirty {
		return errorf("OOM command not allowed when used memory > 'maxmemory'.")
	}
	m.dirty = true
	r := run(c, args)
	last := cmd.last
	if last < 0 {
		last += len(args)
	}
	for i := cmd.first; i > 0 && i <= last && i < len(args); i += cmd.step {
		if e := ks.m[args[i]]; e != nil {
			ks.account(args[i], e)
		}
	}
	return r
}

// beginRun starts a script run or a Do command at now (Unix ms): it advances the LRU
// clock and, over the cap, frees keys by the policy, as Redis does before each command.
func (ks *keyspace) beginRun(now int64) {
	m := &ks.mem
	m.clock++
	m.dirty, m.oom = false, false
	if m.limit.max <= 0 || m.used <= m.limit.max {
		return
	}
	for m.used > m.limit.max && m.evicts() && ks.evictOne(now) {
	}
	m.oom = m.used > m.limit.max
}

func (m *memory) next() uint64 {
	m.rnd ^= m.rnd << 13
	m.rnd ^= m.rnd >> 7
	m.rnd ^= m.rnd << 17
	return m.rnd
}

// evictOne frees one key by the policy (or an expired key it comes across) and reports
// whether it found one.
func (ks *keyspace) evictOne(now int64) bool {
	m := &ks.mem
	volatile := m.limit.policy == VolatileLRU || m.limit.policy == VolatileRandom || m.limit.policy == VolatileTTL
	random := m.limit.policy == AllKeysRandom || m.limit.policy == VolatileRandom
	// A volatile policy draws until it has seen a key with an expire time, within a
	// bound: a keyspace with (nearly) none fails as Redis's empty expires dict does.
	for round := 0; round < 16 && len(m.pool) > 0; round++ {
		for range evictionSamples {
			key := m.pool[m.next()%uint64(len(m.pool))]
			e := ks.m[key]
			if e.expires && now > e.expireAt {
				ks.del(key) // dead already: freeing it is expiry, not eviction
				return true
			}
			if volatile && !e.expires {
				continue
			}
			if random {
				ks.evict(key)
				return true
			}
			m.offer(candidate{key, m.score(e)})
		}
		for len(m.candidates) > 0 {
			c := m.candidates[len(m.candidates)-1]
			m.candidates = m.candidates[:len(m.candidates)-1]
			e := ks.m[c.key]
			if e == nil || volatile && !e.expires {
				continue
			}
			if s := m.score(e); s != c.score {
				// Touched (or given another expire time) since it was sampled.
				m.offer(candidate{c.key, s})
				continue
			}
			ks.evict(c.key)
			return true
		}
	}
	return false
}

// score ranks e for eviction: higher goes first.
func (m *memory) score(e *entry) uint64 {
	if m.limit.policy == VolatileTTL {
		return ^uint64(e.expireAt - minInt64) // nearest expire time highest
	}
	return uint64(m.clock - e.lru) // idle runs, wrapping like Redis's LRU clock
}

const minInt64 = -1 << 63

// offer puts c among the candidates, kept sorted by score (best last) and at most
// evictionPoolSize long; a key already there is updated.
func (m *memory) offer(c candidate) {
	for i, x := range m.candidates {
		if x.key == c.key {
			m.candidates = append(m.candidates[:i], m.candidates[i+1:]...)
			break
		}
	}
	i := 0
	for i < len(m.candidates) && m.candidates[i].score <= c.score {
		i++
	}
	if len(m.candidates) == evictionPoolSize {
		if i == 0 {
			return // worse than every candidate
		}
		m.candidates = m.candidates[1:]
		i--
	}
	m.candidates = append(m.candidates, candidate{})
	copy(m.candidates[i+1:], m.candidates[i:])
	m.candidates[i] = c
}

func (ks *keyspace) evict(key string) {
	ks.del(key)
	ks.mem.evicted++
}

// clone returns a copy of m's state for a snapshot.
func (m *memory) clone() memory {
	c := *m
	c.pool = append([]string(nil), m.pool...)
	c.candidates = append([]candidate(nil), m.candidates...)
	return c
}
