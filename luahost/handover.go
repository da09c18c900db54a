package luahost

// Value is one key's value and expiry, as TakeKey hands a key out of the keyspace and
// PutKey puts one in: a string or a hash, the two types the built-in algorithms keep. A
// backend that decides some keys in Go and leaves the rest to scripts on the host moves
// keys with them, so that a script finds a key exactly as a Go decision left it.
type Value struct {
	// Hash: the key is a hash of Fields; else a string of Str.
	Hash bool
	Str  string
	// Fields are a hash's fields and values, alternating, in insertion order.
	Fields []string
	// ExpireAt is when the key expires (Unix milliseconds; it lives while the clock's
	// milliseconds are at most ExpireAt), when Expires is set.
	ExpireAt int64
	Expires  bool
}

// Clock returns the host's clock.
func (h *Host) Clock() Clock { return h.clock }

// TakeKey removes key from the keyspace and returns its value, when the key is live and
// a string or a hash; any other key is left as it is, and TakeKey returns false.
func (h *Host) TakeKey(key string) (Value, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.ks.lookup(key, h.clock.Now().UnixMilli())
	if e == nil {
		return Value{}, false
	}
	v := Value{ExpireAt: e.expireAt, Expires: e.expires}
	switch e.kind {
	case kindString:
		v.Str = e.str
	case kindHash:
		v.Hash = true
		e.hashEach(func(f, val string) { v.Fields = append(v.Fields, f, val) })
	default:
		return Value{}, false
	}
	h.ks.del(key)
	return v, true
}

// HasKey reports whether key is live, without touching it (its access time for eviction
// stays as it was).
func (h *Host) HasKey(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.ks.m[key]
	return e != nil && !(e.expires && h.clock.Now().UnixMilli() > e.expireAt)
}

// PutKey makes key hold v, replacing whatever it held. It is counted against the host's
// memory as any write is; the cap is not enforced here (nothing is evicted to make room).
func (h *Host) PutKey(key string, v Value) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var e *entry
	if v.Hash {
		e = newEntry(kindHash)
		e.hashSetPairs(v.Fields)
	} else {
		e = stringEntry(v.Str)
	}
	e.setTTL(v.Expires, v.ExpireAt)
	h.ks.add(key, e, h.clock.Now().UnixMilli())
}

// FormatNumber is the text of a Lua number passed to redis.call (C's "%.17g"), which is
// what a script's HSET or SET of a number stores.
func FormatNumber(f float64) string { return formatG17(f) }
