// Package native decides the built-in algorithms in Go, in process: the rules of the
// embedded backend (engine.NewNative) without a Lua interpreter on every request.
//
// A Store decides a check, a partial admission, a call that may wait, a refund or a debt
// (algorithms.OpCheck, OpMost, OpDelay, OpRefund, OpOwe) of up to eight rules of gcra,
// token_bucket, leaky_bucket, fixed_window and sliding_window that have no penalty box,
// override, lists or calendar, all or nothing, exactly as the engine script decides it on
// Redis: the same replies, and the same state, to the bit (the kernels are the Lua's fast
// checks and commits, refunds and owes in the Lua's float64 arithmetic; see kernels.go
// and settle.go). Everything else (the other ops, other algorithms and plugins, the
// rules' further keys) runs the engine script on the store's luahost.Host,
// which holds the keys the store does not: a key moves between the two as Redis would
// hold it (see Hand), so a call the Lua decides sees what the Go decisions before it
// wrote, and the other way round. verify and simulate keep running the Lua itself:
// proving the script is their point.
//
// Keys expire by the host's clock at millisecond precision, as on Redis. With a memory
// cap (WithMaxMemory) the store frees the least recently used of a few sampled keys (as
// Redis's approximated LRU) to make room, or refuses a new key with ErrFull under
// luahost.NoEviction; the cap is the store's, besides the host's own for the keys the
// host holds.
package native

import (
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/luahost"
)

// Option configures a Store.
type Option func(*Store)

// WithMaxMemory caps the store's keys at about bytes (each key counts its name and 96
// bytes), freeing keys by policy when it is full: luahost.AllKeysLRU and
// luahost.VolatileLRU free the least recently used (every key the store holds has a
// TTL), luahost.NoEviction refuses new keys (ErrFull).
func WithMaxMemory(bytes int64, policy luahost.EvictionPolicy) Option {
	return func(s *Store) {
		s.max, s.noEvict = 0, policy == luahost.NoEviction
		if bytes > 0 {
			s.max = max(bytes/shardCount, 1)
		}
	}
}

// New returns an empty Store beside h, whose clock it keeps time by and which holds the
// keys the store does not.
func New(h *luahost.Host, opts ...Option) *Store {
	s := &Store{host: h, clock: h.Clock()}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*entry)
		s.shards[i].sweepAt = minSweep
		s.shards[i].index = uint8(i)
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Decide decides c in Go and returns its reply as DecodeCallReply would return the
// script's, or false when the store leaves c to the script (then run it through Hand):
// an op other than a check, more than eight rules, a rule of another algorithm or with a
// penalty box, an override, lists or a calendar, a cost, instant or parameters the
// script refuses, keys that repeat, a deadline, or a key the host holds in a form the
// store does not take. A call it leaves has changed nothing but where its keys are held.
// The error is ErrFull: the call wrote nothing.
func (s *Store) Decide(c *algorithms.Call) (algorithms.Reply, bool, error) { return s.decide(c) }

// Hand runs fn, a script call on the host over keys, with those keys held by the host
// and no decision of the store touching them until fn returns.
func (s *Store) Hand(keys []string, fn func()) {
	set := s.lock(func(i int) string { return keys[i] }, len(keys))
	defer s.unlock(set)
	s.give(keys, s.clock.Now().UnixMilli())
	fn()
}

// Del deletes keys from the store (the host's copies are the caller's to delete).
func (s *Store) Del(keys ...string) {
	set := s.lock(func(i int) string { return keys[i] }, len(keys))
	defer s.unlock(set)
	for _, key := range keys {
		sh := &s.shards[shardOf(key)]
		if e := sh.m[key]; e != nil {
			sh.del(key, e)
		}
	}
}
