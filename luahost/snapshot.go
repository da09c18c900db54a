package luahost

// Snapshot is a copy of a host's keyspace and of its scripts' random state, taken by
// Host.Snapshot and put back by Host.Restore. It lets a caller try what a script would
// answer from a state and then carry on as if it had not asked (verify's probes).
type Snapshot struct {
	m    map[string]*entry
	mem  memory
	rand redisRand
}

// Snapshot returns a copy of the keyspace; later changes to the host do not show in it.
func (h *Host) Snapshot() *Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &Snapshot{m: copyEntries(h.ks.m), mem: h.ks.mem.clone(), rand: h.rand}
}

// Restore makes the keyspace what it was when s was taken: its keys, their memory
// accounting and the eviction state. s stays usable: restoring it again gives the same
// keyspace. The count of evicted keys (Evicted) is not turned back.
func (h *Host) Restore(s *Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ks.m = copyEntries(s.m)
	evicted := h.ks.mem.evicted
	h.ks.mem = s.mem.clone()
	h.ks.mem.evicted = evicted
	h.rand = s.rand
}

func copyEntries(m map[string]*entry) map[string]*entry {
	out := make(map[string]*entry, len(m))
	for k, e := range m {
		out[k] = e.clone()
	}
	return out
}

// clone returns a deep copy of e. Strings are immutable and shared.
func (e *entry) clone() *entry {
	c := *e
	switch o := e.obj.(type) {
	case *hashTable:
		c.obj = o.clone()
	case *skiplist:
		c.obj = e.zset().cloneSkiplist()
	case *list:
		c.obj = &list{buf: append([]string(nil), o.buf...), head: o.head, n: o.n, bytes: o.bytes}
	}
	return &c
}
