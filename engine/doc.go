// Package engine decides requests by running the rlctl engine script on a Backend: Redis
// in production, or in process. Every backend decides alike, reply for reply.
//
// # Backends
//
//   - NewRedis: Redis, Sentinel or Cluster, the script by FCALL (EVALSHA where functions
//     are missing). Several instances share the counters.
//   - NewNative: in process, for serving one instance: the built-in algorithms' decisions
//     in Go (package native), everything else the script on a luahost.Host beside them. It
//     is the embedded default (the README's, rlctl serve's without -redis) and the
//     on_error = "local" fallback.
//   - NewLocal: in process, every call the script itself on a luahost.Host, as verify,
//     simulate and the playground run it: what they prove is the Lua that Redis runs.
//     About seven times the cost of NewNative per decision (BENCHMARKS.md).
//
// # Quota leases
//
// Quota leases (dsl.Rule.LeaseSize, lease_size in a policy) serve a hot key's decisions
// in process. An engine takes a slice of a leased rule's key from the backend in one call, a partial admission of up to
// the lease's size (algorithms.OpMost) on that rule alone, so the slice is charged in the
// backend as it is taken; it spends the slice on the requests the rule applies to, with no
// call, and gives back, with a refund, what is left when its hold (lease_for) ends before
// its window does. The rest of a request's rules are decided as always, in one call; when
// they deny, the leased units go back to the slice, so a request is still charged all or
// nothing.
//
// The guarantee: the backend's count of a window is never below what every instance
// spent in it, because every unit is charged before it is spent and spent only in the
// window that counted it (a slice ends when its window, or calendar period, does: what is
// left then stops counting with it). So a leased rule never admits above its limit in a
// window, however many instances lease it. What leasing costs is fairness: an instance
// may be denied while others hold unspent units of the same key, at most the lease's size
// each (an instance holds one slice of a key, of at most lease units). An instance whose
// slice the backend could not fill asks again only after its retry-after, or its hold,
// whichever ends first.
//
// A slice's size follows demand: twice what the instance spent of its previous slice,
// at least the request's cost and at most lease; the first is lease. Calls other than
// Allow and AllowN (AllowAtMost, Wait, Reserve, Peek, AllowAll) decide leased rules on
// the backend as unleased ones: the backend's count holds every slice, so they are
// exact too, and a peek's remaining does not count what instances hold unspent.
//
// A take that fails (the backend down, the breaker open) decides the request on the
// backend path, where the policy's on_error decides it, and so the requests that waited
// for that take. A slice taken by an instance that
// dies, or by a call whose reply was lost, is spent as far as the backend knows until its
// window ends: capacity lost, never admitted twice. Engine.ReturnLeases gives back what an
// engine holds before it is dropped (rlctl serve calls it on a reload and a stop);
// Engine.Leased reports what it holds of a key; Decision.Source is FromLease for a
// decision made with no call.
package engine
