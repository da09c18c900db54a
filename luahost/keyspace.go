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

// entry is one key's value and expiry.
type entry struct {
	kind     kind
	str      string
	hash     *hash
	zset     *zset
	list     *list
	expires  bool
	expireAt int64 // Unix milliseconds; the key is gone once now > expireAt
}

// keyspace is the host's single database. Keys expire lazily when they are
// looked up, and in sweeps that keep expired keys from piling up when they
// are never touched again.
type keyspace struct {
	m         map[string]*entry
	sweepSize int // sweep when len(m) reaches this
}

const minSweepSize = 1024

func newKeyspace() keyspace {
	return keyspace{m: make(map[string]*entry), sweepSize: minSweepSize}
}

// lookup returns the live entry of key at now (Unix ms), deleting it if it
// has expired. Redis keeps a key while now <= its expire time.
func (ks *keyspace) lookup(key string, now int64) *entry {
	e := ks.m[key]
	if e != nil && e.expires && now > e.expireAt {
		delete(ks.m, key)
		return nil
	}
	return e
}

// add stores a new entry under key (which must not be live).
func (ks *keyspace) add(key string, e *entry, now int64) {
	ks.m[key] = e
	if len(ks.m) >= ks.sweepSize {
		ks.sweep(now)
	}
}

func (ks *keyspace) del(key string) { delete(ks.m, key) }

// sweep deletes every expired key. Sweeping when the map has doubled since
// the last sweep keeps the cost amortised O(1) per added key and memory
// within twice the live keys.
func (ks *keyspace) sweep(now int64) {
	for k, e := range ks.m {
		if e.expires && now > e.expireAt {
			delete(ks.m, k)
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
// head to tail) and its absolute
// expiry. Each string is length-prefixed, so distinct values never render
// alike.
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
		idx := make([]int, e.hash.len())
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return e.hash.fields[idx[a]] < e.hash.fields[idx[b]] })
		for _, i := range idx {
			str(e.hash.fields[i])
			str(e.hash.values[i])
		}
	case kindZset:
		for x := e.zset.first(); x != nil; x = x.level[0].forward {
			str(x.member)
			str(formatScore(x.score))
		}
	case kindList:
		for i := range e.list.len() {
			str(e.list.at(i))
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
