package engine

import (
	"github.com/rlctl/rlctl/luahost"
	"github.com/rlctl/rlctl/native"
)

// WithLocalMaxMemory caps the keyspace of the in-process fallback that the engine creates
// for on_error = "local" policies (not one set by WithLocalFallback) at bytes, with policy
// choosing what to free when it is full: luahost.WithMaxMemory, where what is counted is
// defined. Give an embedded backend (NewLocal) the same cap with luahost.WithMaxMemory.
// Hooks.Evicted counts the keys freed.
//
// During an outage every client the service sees leaves state in the fallback; without a
// cap a botnet of distinct addresses grows it without bound. With a cap, evicting a rule's
// key forgets that client's history, so the rule fails open for that client only, never
// denying anyone more:
//
//   - fixed_window, sliding_window, sliding_log: the counts (or the log) in the window are
//     forgotten; the client may send up to the limit again within the window, so at most
//     twice the limit in any window.
//   - token_bucket, leaky_bucket: the bucket is full again (a burst of capacity).
//   - gcra: the theoretical arrival time is forgotten; a whole burst is available again.
//   - concurrency: the client's leases are forgotten; up to max more may be in flight, and
//     releasing a forgotten lease does nothing.
//
// With luahost.AllKeysLRU or luahost.VolatileLRU (every rule key has a TTL), the keys
// evicted are those of the clients seen least recently: under a botnet of one-shot
// addresses, the bots. With luahost.NoEviction a full fallback refuses new state: its
// calls fail with Redis's OOM error, a backend failure, and policies allow (the fallback's
// own failure mode).
func WithLocalMaxMemory(bytes int64, policy luahost.EvictionPolicy) Option {
	return func(e *Engine) {
		e.localOpts = append(e.localOpts, luahost.WithMaxMemory(bytes, policy))
		e.nativeOpts = append(e.nativeOpts, native.WithMaxMemory(bytes, policy))
	}
}
