package native

import (
	"errors"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rlctl/rlctl/luahost"
)

// entry is one key the store holds: its layout's fields and its expiry, as Redis would
// hold them for the Lua (see fields).
type entry struct {
	f        [5]float64
	expireAt int64  // Unix ms; the key is gone once the clock's ms pass it (when expires)
	tick     uint32 // the shard's access clock at the key's last use (eviction)
	alg      alg
	has      uint8 // bit i: field i is set
	expires  bool
}

// field is field i, or 0 when unset: the Lua's tonumber(v) or 0.
func (e *entry) field(i int) float64 {
	if e.has&(1<<i) == 0 {
		return 0
	}
	return e.f[i]
}

func (e *entry) set(i int, v float64) {
	e.f[i] = v
	e.has |= 1 << i
}

// expire sets the TTL PEXPIRE (or SET's PX) sets: ttlMs from nowMs.
func (e *entry) expire(nowMs int64, us, slack float64) {
	e.expires, e.expireAt = true, nowMs+ttlMs(us, slack)
}

// shardCount is the number of shards; a power of two.
const shardCount = 64

// entryBytes is what the memory cap counts for a key besides its name: the entry and the
// map's slot for it.
const entryBytes = 96

type shard struct {
	mu    sync.Mutex
	m     map[string]*entry
	tick  uint32
	index uint8 // the shard's place in Store.shards
	bytes int64
	// sweepAt is the key count at which the shard next frees expired keys: twice the live
	// keys after a sweep, so that sweeping costs O(1) per key added.
	sweepAt int
	_       [24]byte // keeps neighbouring shards' locks off one cache line
}

// Store is the keyspace of a Backend: the keys of the rules it decides in Go, sharded by
// key, each shard under its own lock. Keys expire as Redis expires them (lazily when
// looked up, and in sweeps), by the host's clock.
type Store struct {
	shards  [shardCount]shard
	host    *luahost.Host
	clock   luahost.Clock
	max     int64 // bytes per shard; 0: no cap
	noEvict bool
	evicted atomic.Uint64
}

// ErrFull is the error of a decision that would add a key to a store at its memory cap
// whose policy is luahost.NoEviction: Redis's reply to a write past maxmemory.
var ErrFull = errors.New("OOM command not allowed when used memory > 'maxmemory'.")

const minSweep = 256

// shardOf returns the index of key's shard (FNV-1a).
func shardOf(key string) int {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h & (shardCount - 1))
}

// lookup returns key's live entry at nowMs, deleting it when it has expired. sh.mu is
// held.
func (sh *shard) lookup(key string, nowMs int64) *entry {
	e := sh.m[key]
	if e == nil {
		return nil
	}
	if e.expires && nowMs > e.expireAt {
		sh.del(key, e)
		return nil
	}
	sh.tick++
	e.tick = sh.tick
	return e
}

func (sh *shard) del(key string, e *entry) {
	delete(sh.m, key)
	sh.bytes -= int64(len(key)) + entryBytes
}

// add stores e under a copy of key, freeing room first when the shard is at its cap
// (max; 0: none); it fails with ErrFull when the room must be freed and may not be.
func (s *Store) add(sh *shard, key string, e *entry, nowMs int64) error {
	if len(sh.m) >= sh.sweepAt {
		sh.sweep(nowMs)
	}
	size := int64(len(key)) + entryBytes
	if s.max > 0 {
		for sh.bytes+size > s.max && len(sh.m) > 0 {
			if s.noEvict {
				return ErrFull
			}
			sh.evict()
			s.evicted.Add(1)
		}
	}
	sh.tick++
	e.tick = sh.tick
	sh.m[strings.Clone(key)] = e
	sh.bytes += size
	return nil
}

// evictSamples is how many keys an eviction compares, as Redis's maxmemory-samples.
const evictSamples = 5

// evict frees the least recently used of a few keys (Go's map order is random), as
// Redis's approximated LRU does. sh.mu is held and sh.m is not empty.
func (sh *shard) evict() {
	var victim string
	var ve *entry
	var oldest uint32
	n := 0
	for k, e := range sh.m {
		if age := sh.tick - e.tick; ve == nil || age > oldest {
			victim, ve, oldest = k, e, age
		}
		if n++; n == evictSamples {
			break
		}
	}
	sh.del(victim, ve)
}

// sweep frees every expired key of the shard.
func (sh *shard) sweep(nowMs int64) {
	for k, e := range sh.m {
		if e.expires && nowMs > e.expireAt {
			sh.del(k, e)
		}
	}
	sh.sweepAt = max(2*len(sh.m), minSweep)
}

// Evicted reports how many keys the store freed to stay within its memory cap.
func (s *Store) Evicted() uint64 { return s.evicted.Load() }

// Len reports how many keys the store holds, expired ones not yet freed included.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// maxRules is the most rules a call the store decides may have; a larger call goes to the
// Lua.
const maxRules = 8

// lock locks the shards of n keys, in increasing order so that calls over the same shards
// never wait on each other in a cycle, and returns them as a set (bit i: shard i).
func (s *Store) lock(key func(i int) string, n int) uint64 {
	var set uint64
	for i := range n {
		set |= 1 << shardOf(key(i))
	}
	for m := set; m != 0; m &= m - 1 {
		s.shards[bits.TrailingZeros64(m)].mu.Lock()
	}
	return set
}

// lockShards is lock for shards of the store, given.
func (s *Store) lockShards(shards []*shard) uint64 {
	var set uint64
	for _, sh := range shards {
		set |= 1 << sh.index
	}
	for m := set; m != 0; m &= m - 1 {
		s.shards[bits.TrailingZeros64(m)].mu.Lock()
	}
	return set
}

func (s *Store) unlock(set uint64) {
	for m := set; m != 0; m &= m - 1 {
		s.shards[bits.TrailingZeros64(m)].mu.Unlock()
	}
}
