package luahost

import (
	"sort"
	"strconv"
	"strings"
)

// kind is the Redis type of a value.
type kind uint8

const (
	kindString kind = iota + 1
	kindHash
	kindZset
	kindList
)

func (k kind) String() string {
	switch k {
	case kindString:
		return "string"
	case kindHash:
		return "hash"
	case kindZset:
		return "zset"
	case kindList:
		return "list"
	}
	return "none"
}

// entry is one key's value and expiry. Values are held the way Redis holds small
// ones: a string as itself, a small hash or sorted set packed into one string (hash.go,
// zset.go), so that a rate limiter's key costs a map slot, this struct and one or two
// exactly sized strings.
type entry struct {
	// str is a string's value, or the packed form of a small hash or sorted set.
	str string
	// obj holds a value that is not packed: a *hashTable, a *skiplist or a *list.
	obj      any
	expireAt int64  // Unix milliseconds; the key is gone once now > expireAt (when expires)
	size     int64  // the bytes accounted to the key (memory.go)
	lru      uint32 // the keyspace's access clock at the key's last lookup (memory.go)
	slot     int32  // the key's index in the eviction pool, or -1 (memory.go)
	kind     kind
	expires  bool
}

func newEntry(k kind) *entry { return &entry{kind: k, slot: -1} }

// setTTL makes the key expire at when (Unix ms), or never when expires is false.
func (e *entry) setTTL(expires bool, when int64) {
	if !expires {
		when = 0
	}
	e.expires, e.expireAt = expires, when
}

// keyspace is the host's single database. Keys expire lazily when they are
// looked up, and in sweeps that keep expired keys from piling up when they
// are never touched again.
type keyspace struct {
	m         map[string]*entry
	sweepSize int // sweep when len(m) reaches this
	mem       memory
}

const minSweepSize = 1024

func newKeyspace() keyspace {
	return keyspace{m: make(map[string]*entry), sweepSize: minSweepSize}
}

// lookup returns the live entry of key at now (Unix ms), deleting it if it
// has expired. Redis keeps a key while now <= its expire time.
func (ks *keyspace) lookup(key string, now int64) *entry {
	e := ks.m[key]
	if e == nil {
		return nil
	}
	if e.expires && now > e.expireAt {
		ks.del(key)
		return nil
	}
	e.lru = ks.mem.clock
	return e
}

// add stores a new entry under key (which must not be live). The key is copied, so
// the keyspace holds exactly its bytes and never a larger string it was cut from.
func (ks *keyspace) add(key string, e *entry, now int64) {
	if old := ks.m[key]; old != nil {
		ks.del(key)
	}
	key = strings.Clone(key)
	e.lru = ks.mem.clock
	ks.m[key] = e
	ks.account(key, e)
	if len(ks.m) >= ks.sweepSize {
		ks.sweep(now)
	}
}

// del deletes key, if it is there.
func (ks *keyspace) del(key string) {
	e := ks.m[key]
	if e == nil {
		return
	}
	ks.forget(e)
	delete(ks.m, key)
}

// sweep deletes every expired key. Sweeping when the map has doubled since
// the last sweep keeps the cost amortised O(1) per added key and memory
// within twice the live keys.
func (ks *keyspace) sweep(now int64) {
	for k, e := range ks.m {
		if e.expires && now > e.expireAt {
			ks.del(k)
		}
	}
	ks.sweepSize = max(2*len(ks.m), minSweepSize)
}

// keys returns the live keys, sorted.
func (ks *keyspace) keys(now int64) []string {
	ks.sweep(now)
	out := make([]string, 0, len(ks.m))
	for k := range ks.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// dump renders an entry canonically: its type, its contents (hash fields
// sorted, sorted-set members in order with %.17g scores, list elements from
// head to tail) and its absolute expiry. Each string is length-prefixed, so
// distinct values never render alike.
func dump(e *entry) string {
	var b strings.Builder
	str := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
		b.WriteByte(',')
	}
	b.WriteString(e.kind.String())
	b.WriteByte('|')
	switch e.kind {
	case kindString:
		str(e.str)
	case kindHash:
		var fields, values []string
		e.hashEach(func(f, v string) {
			fields = append(fields, f)
			values = append(values, v)
		})
		idx := make([]int, len(fields))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return fields[idx[a]] < fields[idx[b]] })
		for _, i := range idx {
			str(fields[i])
			str(values[i])
		}
	case kindZset:
		z := e.zset()
		for i := range z.card() {
			m, s := z.at(i)
			str(m)
			str(formatScore(s))
		}
	case kindList:
		l := e.asList()
		for i := range l.len() {
			str(l.at(i))
		}
	}
	b.WriteString("|ttl:")
	if e.expires {
		b.WriteString("at ")
		b.WriteString(strconv.FormatInt(e.expireAt, 10))
		b.WriteString("ms")
	} else {
		b.WriteString("none")
	}
	return b.String()
}

// stringEntry returns a new string value.
func stringEntry(s string) *entry {
	e := newEntry(kindString)
	e.str = s
	return e
}
