package engine

import (
	"context"
	"sync/atomic"

	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/luahost"
	"github.com/rlctl/rlctl/native"
)

// Native is the embedded Backend for serving: it decides the engine's calls (checks,
// partial admissions, waits, refunds, debts) of the built-in algorithms in Go (package
// native), exactly as the script decides them, and runs everything else (sliding_log,
// concurrency, plugins, penalty boxes, overrides, lists, calendars)
// as the script on a luahost.Host, with the keys handed between the two so that each
// sees what the other wrote. It is what NewLocal is, without the interpreter on the
// common path: engine.New(NewNative(luahost.New()), plan) decides as
// engine.New(NewLocal(luahost.New()), plan) does, reply for reply.
//
// Give the host a memory cap (luahost.WithMaxMemory) and the store one
// (native.WithMaxMemory) when the clients limited are not bounded: see
// WithLocalMaxMemory for what evicting a limiter's key means.
type Native struct {
	store *native.Store
	local *Local
	// seen is the store's eviction count last reported to a hook (evicted).
	seen atomic.Uint64
}

// NewNative returns a Native backend on h, the host its script calls run on and whose
// clock keeps the time of both.
func NewNative(h *luahost.Host, opts ...native.Option) *Native {
	return &Native{store: native.New(h, opts...), local: NewLocal(h)}
}

// inProcess marks backends that the decision deadline does not apply to.
func (*Native) inProcess() {}

// A Native backend is no loader (engine.New does not compile the script on its host):
// most plans never leave a call to the script, and a host that holds the compiled script
// is heap every collection marks, which made a decision in Go about a fifth dearer where
// requests are many (bench/cmd/inproc). The first call the store leaves to the script
// compiles it.

// Eval implements Backend: the call runs as the script on the host, its keys handed
// over first.
func (n *Native) Eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (v any, err error) {
	n.store.Hand(keys, func() { v, err = n.local.Eval(ctx, s, keys, argv) })
	return v, err
}

// Del implements Backend.
func (n *Native) Del(ctx context.Context, keys ...string) error {
	n.store.Del(keys...)
	return n.local.Del(ctx, keys...)
}

// evicted returns how many keys the store and the host evicted since the last call that
// reported some.
func (n *Native) evicted() uint64 {
	return n.local.evicted() + unreported(n.store.Evicted(), &n.seen)
}
