package luahost

import "maps"

// Snapshot is a copy of a host's keyspace and of its scripts' random state, taken by
// Host.Snapshot and put back by Host.Restore. It lets a caller try what a script would
// answer from a state and then carry on as if it had not asked (verify's probes).
type Snapshot struct {
	m    map[string]*entry
	rand redisRand
}

// Snapshot returns a copy of the keyspace; later changes to the host do not show in it.
func (h *Host) Snapshot() *Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &Snapshot{m: copyEntries(h.ks.m), rand: h.rand}
}

// Restore makes the keyspace what it was when s was taken. s stays usable: restoring it
// again gives the same keyspace.
func (h *Host) Restore(s *Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ks.m = copyEntries(s.m)
	h.rand = s.rand
}

func copyEntries(m map[string]*entry) map[string]*entry {
	out := make(map[string]*entry, len(m))
	for k, e := range m {
		out[k] = e.clone()
	}
	return out
}

// clone returns a deep copy of e.
func (e *entry) clone() *entry {
	c := *e
	switch e.kind {
	case kindHash:
		c.hash = &hash{fields: append([]string(nil), e.hash.fields...), values: append([]string(nil), e.hash.values...)}
		if e.hash.index != nil {
			c.hash.index = maps.Clone(e.hash.index)
		}
	case kindZset:
		z := newZset()
		for x := e.zset.first(); x != nil; x = x.level[0].forward {
			z.insert(x.score, x.member)
		}
		c.zset = z
	case kindList:
		c.list = &list{buf: append([]string(nil), e.list.buf...), head: e.list.head, n: e.list.n}
	}
	return &c
}
