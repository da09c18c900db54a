package engine

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlctl/rlctl/algorithms"
)

// DefaultBatch is the most calls Batched puts in one script call.
const DefaultBatch = 64

// Batched sets how the backend batches the script calls of concurrent decisions to one
// server (group commit; a cluster's: below), as NewRedis does by default: while a call is in
// flight, the calls that arrive queue, and when it returns they go together as one FCALL
// of the library's batch form, at most max calls in one (DefaultBatch when max < 1;
// Batched(1) sends every call alone). A lone call waits for nothing: with nothing in
// flight it goes at once, alone. The server runs a batch's calls one after another, each
// decided and charged all or nothing on its own as it would be alone (lua/dispatch.lua's
// batch), so a batch changes no decision; the command's fixed costs on the server
// (reading and parsing it, starting the function, reading the clock, writing the reply)
// and the round trip are paid once per batch rather than once per call. The calls of a
// batch on the server's clock are decided at the instant the batch starts.
//
// Each caller still waits only until its own deadline: a call still queued when its
// caller gives up is taken out and never sent (nothing is charged); one already sent is
// refused by the server as past its deadline when its batch starts too late. A batch is
// sent with the latest deadline of its calls. A failure of the whole batch (a lost
// connection, a timeout) fails each of its calls as it would fail that call alone, and an
// error of one call (a malformed call, a plugin that raised an error) answers that call
// only.
//
// On a Redis Cluster (*redis.ClusterClient) the calls batch by hash slot: a batch's keys
// all live in one slot, so it runs on the slot's primary like any call, and the calls of
// a hot key (one slot) share script calls. Batching needs a server with functions and no
// Pipelined; other clients, and a server that refuses FCALL, run every call alone.
func Batched(max int) RedisOption {
	return func(r *Redis) {
		if max < 1 {
			max = DefaultBatch
		}
		r.batchMax = max
	}
}

// batching sets up the batching NewRedis's options ask for, once they are all applied.
func (r *Redis) batching() {
	if r.fc == nil || r.ap != nil || r.batchMax == 1 {
		return
	}
	r.batchMax = cmp.Or(r.batchMax, DefaultBatch)
	switch r.c.(type) {
	case *redis.Client:
		r.batch = &batcher{max: r.batchMax}
	case *redis.ClusterClient:
		r.slotBatches = make([]atomic.Pointer[batcher], slots)
	}
}

// slots is the number of hash slots of a Redis Cluster.
const slots = 16384

// batcherFor returns the batcher of the calls whose first key is key (on a cluster, the
// batcher of its slot, made on first use), or nil when calls go alone.
func (r *Redis) batcherFor(key string) *batcher {
	if r.batch != nil || r.slotBatches == nil {
		return r.batch
	}
	p := &r.slotBatches[Slot(key)]
	if b := p.Load(); b != nil {
		return b
	}
	p.CompareAndSwap(nil, &batcher{max: r.batchMax})
	return p.Load()
}

// Batches reports how many calls went to the server in batches of two or more, and in how
// many script calls (calls ÷ batches is the mean batch); a call that went alone counts in
// neither. Both only grow.
func (r *Redis) Batches() (calls, batches uint64) {
	return r.batchedCalls.Load(), r.batches.Load()
}

// batcher is Batched's queue: the calls waiting while one is in flight.
type batcher struct {
	max   int
	mu    sync.Mutex
	busy  bool      // a call or batch is in flight
	queue []*queued // the calls waiting for the next batch, in arrival order
}

// queued is one call waiting in a batcher: its arguments (see prepare) and, once its
// batch returns, its reply.
type queued struct {
	ctx  context.Context
	s    *algorithms.Script
	key  string
	args []any
	done chan struct{} // closed once v and err are set
	v    any
	err  error
}

// do runs the FCALL args (see prepare) whose first key is key: at once when nothing is in
// flight, else in the next batch.
func (b *batcher) do(ctx context.Context, r *Redis, s *algorithms.Script, key string, args []any) (any, error) {
	b.mu.Lock()
	if !b.busy {
		b.busy = true
		b.mu.Unlock()
		v, err := r.sendLoaded(ctx, s, key, args, nil, true)
		b.next(r)
		return v, err
	}
	q := &queued{ctx: ctx, s: s, key: key, args: args, done: make(chan struct{})}
	b.queue = append(b.queue, q)
	b.mu.Unlock()
	select {
	case <-q.done:
		return q.v, q.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	for i, w := range b.queue {
		if w == q {
			// Not sent: nothing is charged.
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			b.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	b.mu.Unlock()
	// In flight: the server refuses it if it runs after the call's deadline.
	return nil, ctx.Err()
}

// next starts the next batch when calls are queued, else marks the batcher idle. The
// batch runs on a goroutine of its own, which goes on with the batch after it until the
// queue is empty, so the caller whose call just returned is not held up.
func (b *batcher) next(r *Redis) {
	group := b.take()
	if group == nil {
		return
	}
	go func() {
		for ; group != nil; group = b.take() {
			b.send(r, group)
		}
	}()
}

// take removes from the queue the first call and up to max-1 more of the same script (a
// batch runs in one library: engines of different plans, such as one replaced by a reload,
// share the backend) and returns them; the others keep their order. With none queued it
// marks the batcher idle and returns nil.
func (b *batcher) take() []*queued {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.busy = false
		return nil
	}
	s := b.queue[0].s
	group := make([]*queued, 0, min(len(b.queue), b.max))
	rest := b.queue[:0]
	for _, q := range b.queue {
		if len(group) < b.max && q.s.Function == s.Function {
			group = append(group, q)
		} else {
			rest = append(rest, q)
		}
	}
	clear(b.queue[len(rest):])
	b.queue = rest
	return group
}

// send runs group, one call alone or several as one batch, and answers each call.
func (b *batcher) send(r *Redis, group []*queued) {
	ctx, cancel := batchContext(group)
	defer cancel()
	if len(group) == 1 {
		q := group[0]
		q.v, q.err = r.sendLoaded(ctx, q.s, q.key, q.args, nil, true)
		close(q.done)
		return
	}
	r.batches.Add(1)
	r.batchedCalls.Add(uint64(len(group)))
	v, err := r.sendLoaded(ctx, group[0].s, group[0].key, batchArgs(group), nil, true)
	replies, _ := v.([]any)
	if err == nil && len(replies) != len(group) {
		err = errBatchReply(len(replies), len(group))
	}
	for i, q := range group {
		switch {
		case err != nil:
			q.err = err
		default:
			if e, ok := replies[i].(error); ok {
				q.err = e
			} else {
				q.v = replies[i]
			}
		}
		close(q.done)
	}
}

// batchContext is the context a batch is sent with: the latest deadline of its calls (none
// when one has none), cancelled by nothing else, so that no call's caller giving up fails
// the calls of the others.
func batchContext(group []*queued) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, q := range group {
		d, ok := q.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.WithoutCancel(group[0].ctx))
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(group[0].ctx), last)
}

// batchArgs is the FCALL of a batch of group's calls (lua/dispatch.lua's batch form): the
// calls' keys one call after another, then the protocol, "batch", the number of calls and,
// per call, its key count, its ARGV count and its ARGV.
func batchArgs(group []*queued) []any {
	keys, vals := 0, 3
	for _, q := range group {
		k := int(q.args[2].(int64))
		keys += k
		vals += 2 + len(q.args) - 3 - k
	}
	args := make([]any, 3, 3+keys+vals)
	args[0], args[1], args[2] = "fcall", group[0].args[1], int64(keys)
	for _, q := range group {
		k := int(q.args[2].(int64))
		args = append(args, q.args[3:3+k]...)
	}
	args = append(args, algorithms.Protocol, "batch", int64(len(group)))
	for _, q := range group {
		k := int(q.args[2].(int64))
		args = append(args, int64(k), int64(len(q.args)-3-k))
		args = append(args, q.args[3+k:]...)
	}
	return args
}

// errBatchReply is the error of a batch whose reply does not hold one reply per call.
func errBatchReply(got, want int) error {
	return fmt.Errorf("engine: a batch of %d calls was answered with %d replies", want, got)
}
