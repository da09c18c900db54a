package serve

import (
	"crypto/rand"
	"encoding/base64"
	"sync"
	"time"

	"github.com/rlctl/rlctl/engine"
)

// maxLeases bounds the decisions the HTTP API keeps for release. Past it a decision is
// still made and its leases still end at their rule's ttl, but it gets no lease id.
const maxLeases = 100_000

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
	l.m[id] = held{e: e, d: d, until: now.Add(ttl)}
	return id
}

// take removes and returns the decision of id; false when unknown, released or expired.
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
