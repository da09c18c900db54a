package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/internal/keyslot"
)

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the key, or of its
// hash tag (the text between the first '{' and the next '}', when not empty), mod 16384.
func Slot(key string) int { return int(keyslot.Of(key)) }

// slotRefreshEvery is the least time between two refreshes of a Redis Cluster client's
// slot map that the engine asks for: a storm of failed calls costs the cluster one
// CLUSTER SLOTS per interval, and a failover is seen within one interval of the first
// failure after it.
const slotRefreshEvery = 250 * time.Millisecond

// slotMap decides when the engine refreshes a cluster client's map of slots to nodes (the
// map go-redis otherwise reloads every minute, or on a MOVED that an open breaker keeps
// calls from seeing). It has two states, and its transitions are:
//
//	Fresh      --stale(now)-->                              Refreshing(since now)  a refresh is sent
//	Refreshing --stale(now), now before since+every-->      Refreshing(since)      nothing is sent
//	Refreshing --stale(now), now at or after since+every--> Refreshing(since now)  a refresh is sent
//
// A refresh is due at once again when now is before since: the engines sharing the map
// may run on different clocks. The refresh itself runs on the client (refresh, in the
// background; reload, in the caller's time, for a call about to be resent).
type slotMap struct {
	every   time.Duration
	refresh func(context.Context)       // ClusterClient.ReloadState
	reload  func(context.Context) error // a refresh that returns once the map is new

	since atomic.Int64 // Unix ns of the last refresh sent; 0: Fresh
	sent  atomic.Uint64
}

// due reports whether a refresh is due at now and, when it is, records it as sent.
func (m *slotMap) due(now time.Time) bool {
	at := now.UnixNano()
	for {
		since := m.since.Load()
		if since != 0 && at >= since && at-since < int64(m.every) {
			return false
		}
		if m.since.CompareAndSwap(since, at) {
			m.sent.Add(1)
			return true
		}
	}
}

// stale tells the map that a call at now failed in a way that a moved slot explains (a
// node that refused it, failed or whose breaker is open), and refreshes the map when a
// refresh is due: in the background, or, with wait, before it returns (within ctx), for
// a call that will be resent. It reports whether it refreshed.
func (m *slotMap) stale(ctx context.Context, now time.Time, wait bool) bool {
	if m == nil || !m.due(now) {
		return false
	}
	if wait && m.reload != nil && m.reload(ctx) == nil {
		return true
	}
	m.refresh(context.WithoutCancel(ctx))
	return true
}

// reloadNow returns a refresh of c's slot map that returns once the map is reloaded:
// go-redis reloads the map before ForEachMaster runs its function, here one that does
// nothing (TestMovedSlotIsResent pins that behaviour).
func reloadNow(c *redis.ClusterClient) func(context.Context) error {
	return func(ctx context.Context) error {
		return c.ForEachMaster(ctx, func(context.Context, *redis.Client) error { return nil })
	}
}
