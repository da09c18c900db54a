package serve

import (
	"crypto/rand"
	"encoding/base64"
	"sync"
	"time"

	"github.com/rlctl/rlctl/engine"
)

// maxLeases bounds the decisions the HTTP API keeps for release, and the reservations it
// keeps for settlement. Past it a decision is still made and its leases still end at
// their rule's ttl, but it gets no lease id; a reservation is refused (503).
const maxLeases = 100_000

// ReservationTTL is how long the HTTP API keeps a reservation for /v1/settle. A
// reservation not settled by then is forgotten: it keeps its estimate as its cost
// (engine.Reservation), and /v1/settle answers 404.
const ReservationTTL = 10 * time.Minute

// leases are the allowed decisions holding concurrency leases, by the id the HTTP API
// returned, until released or past every lease's ttl.
type leases struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]held
}

type held struct {
	e     *engine.Engine // the engine that decided, which may have been reloaded since
	d     *engine.Decision
	res   *engine.Reservation // a reservation to settle, in the reservations table
	until time.Time
}

// keep stores d and returns its id, or "" when d holds no lease or the table is full.
func (l *leases) keep(e *engine.Engine, d *engine.Decision) string {
	if !d.Holds() {
		return ""
	}
	var ttl time.Duration
	for _, r := range d.Rules {
		ttl = max(ttl, r.ResetAfter)
	}
	return l.put(held{e: e, d: d}, ttl)
}

// reserve stores res for settlement until ReservationTTL and returns its id, or "" when
// the table is full.
func (l *leases) reserve(res *engine.Reservation) string {
	return l.put(held{res: res}, ReservationTTL)
}

// put stores h until ttl from now and returns its id, or "" when the table is full.
func (l *leases) put(h held, ttl time.Duration) string {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]held{}
	}
	if len(l.m) >= maxLeases {
		for id, h := range l.m {
			if !h.until.After(now) {
				delete(l.m, id)
			}
		}
		if len(l.m) >= maxLeases {
			return ""
		}
	}
	var b [15]byte
	_, _ = rand.Read(b[:])
	id := base64.RawURLEncoding.EncodeToString(b[:])
	h.until = now.Add(ttl)
	l.m[id] = h
	return id
}

// take removes and returns what id holds; false when unknown, taken or expired.
func (l *leases) take(id string) (held, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.m[id]
	delete(l.m, id)
	if !ok || !h.until.After(l.now()) {
		return held{}, false
	}
	return h, true
}

// restore puts back under id what take returned, when what it held is still to be done
// (a settlement refused before it charged anything).
func (l *leases) restore(id string, h held) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[id] = h
}
