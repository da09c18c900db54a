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

// KeyCopy is a copy of some of a host's keys, taken by Host.CopyKeys and made another
// host's keyspace by Host.ReplaceKeys: a script that reads only those keys answers from it
// on the other host as it would have on the first (verify's probes, run beside the
// simulation that takes them).
type KeyCopy struct {
	keys    []string
	entries []*entry
}

// CopyKeys returns a copy of those of keys the host holds at its clock's now, each with
// its value and TTL; later changes to the host do not show in it. It changes nothing on
// the host: not a key's expiry, nor the state eviction keeps.
func (h *Host) CopyKeys(keys ...string) *KeyCopy {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now().UnixMilli()
	c := &KeyCopy{keys: make([]string, 0, len(keys)), entries: make([]*entry, 0, len(keys))}
	for _, k := range keys {
		e := h.ks.m[k]
		if e == nil || e.expires && now > e.expireAt {
			continue
		}
		e = e.clone()
		e.size, e.slot = 0, -1 // accounted anew by the host it is put on
		c.keys = append(c.keys, k)
		c.entries = append(c.entries, e)
	}
	return c
}

// ReplaceKeys makes c the host's whole keyspace: every key the host held is deleted and
// c's keys are added, with their TTLs, counted against the host's memory as any key is
// (the cap is not enforced: nothing is evicted to make room). c stays usable.
func (h *Host) ReplaceKeys(c *KeyCopy) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.ks.m {
		h.ks.del(k)
	}
	now := h.clock.Now().UnixMilli()
	for i, k := range c.keys {
		e := c.entries[i].clone()
		h.ks.add(k, e, now)
	}
}
