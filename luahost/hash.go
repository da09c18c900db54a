package luahost

import "strings"

// A hash of at most hashPackEntries fields, whose fields and values are all at most
// hashPackValue bytes long, is held packed in its entry's str, as Redis holds it in a
// listpack (hash-max-listpack-entries 128, hash-max-listpack-value 64): one byte for the
// field count n, then n pairs of length bytes (field, value), then each field followed by
// its value, in insertion order. A hash that outgrows either bound becomes a hashTable
// for good, as Redis never converts back. Either way fields keep insertion order (HGETALL
// order), and replacing a value keeps its field's place.
const (
	hashPackEntries = 128
	hashPackValue   = 64
)

// packedHash is the packed form of a hash.
type packedHash string

func (p packedHash) len() int {
	if p == "" {
		return 0
	}
	return int(p[0])
}

// each calls fn with every field and value in order until fn returns false.
func (p packedHash) each(fn func(field, value string) bool) {
	n := p.len()
	off := 1 + 2*n
	for i := 0; i < n; i++ {
		fl, vl := int(p[1+2*i]), int(p[2+2*i])
		if !fn(string(p[off:off+fl]), string(p[off+fl:off+fl+vl])) {
			return
		}
		off += fl + vl
	}
}

func (p packedHash) get(field string) (value string, ok bool) {
	p.each(func(f, v string) bool {
		if f == field {
			value, ok = v, true
			return false
		}
		return true
	})
	return value, ok
}

// hashTable is a hash too big to pack: fields and values in insertion order, with a map
// index from hashIndexMin fields on.
type hashTable struct {
	fields []string
	values []string
	index  map[string]int // field -> position; nil below hashIndexMin fields
	bytes  int64          // the heap the field and value strings take (memory.go)
}

// hashIndexMin is the field count from which a hashTable keeps a map index; below it a
// linear scan over a few fields is faster and smaller.
const hashIndexMin = 16

func (h *hashTable) find(field string) int {
	if h.index != nil {
		if i, ok := h.index[field]; ok {
			return i
		}
		return -1
	}
	for i, f := range h.fields {
		if f == field {
			return i
		}
	}
	return -1
}

// set stores value under field and reports whether the field is new. The table keeps
// copies, never the strings passed (which may be cut from larger ones).
func (h *hashTable) set(field, value string) bool {
	value = strings.Clone(value)
	if i := h.find(field); i >= 0 {
		h.bytes += stringBytes(value) - stringBytes(h.values[i])
		h.values[i] = value
		return false
	}
	field = strings.Clone(field)
	h.fields = append(h.fields, field)
	h.values = append(h.values, value)
	h.bytes += stringBytes(field) + stringBytes(value)
	if h.index != nil {
		h.index[field] = len(h.fields) - 1
	} else if len(h.fields) >= hashIndexMin {
		h.reindex()
	}
	return true
}

// del removes field and reports whether it was there.
func (h *hashTable) del(field string) bool {
	i := h.find(field)
	if i < 0 {
		return false
	}
	h.bytes -= stringBytes(h.fields[i]) + stringBytes(h.values[i])
	h.fields = append(h.fields[:i], h.fields[i+1:]...)
	h.values = append(h.values[:i], h.values[i+1:]...)
	if h.index != nil {
		if len(h.fields) < hashIndexMin/2 {
			h.index = nil
		} else {
			h.reindex()
		}
	}
	return true
}

func (h *hashTable) reindex() {
	h.index = make(map[string]int, len(h.fields))
	for i, f := range h.fields {
		h.index[f] = i
	}
}

func (h *hashTable) clone() *hashTable {
	c := &hashTable{fields: append([]string(nil), h.fields...), values: append([]string(nil), h.values...), bytes: h.bytes}
	if h.index != nil {
		c.reindex()
	}
	return c
}

// table returns e's hashTable, or nil when e is packed.
func (e *entry) table() *hashTable {
	t, _ := e.obj.(*hashTable)
	return t
}

func (e *entry) hashLen() int {
	if t := e.table(); t != nil {
		return len(t.fields)
	}
	return packedHash(e.str).len()
}

func (e *entry) hashGet(field string) (string, bool) {
	if t := e.table(); t != nil {
		if i := t.find(field); i >= 0 {
			return t.values[i], true
		}
		return "", false
	}
	return packedHash(e.str).get(field)
}

// hashEach calls fn with every field and value, in HGETALL's order.
func (e *entry) hashEach(fn func(field, value string)) {
	if t := e.table(); t != nil {
		for i, f := range t.fields {
			fn(f, t.values[i])
		}
		return
	}
	packedHash(e.str).each(func(f, v string) bool { fn(f, v); return true })
}

// hashSet stores value under field and reports whether the field is new.
func (e *entry) hashSet(field, value string) bool {
	return e.hashSetPairs([]string{field, value}) == 1
}

// hashSetPairs stores pairs (field, value, field, value, ...) in order, as HSET does, and
// returns how many fields are new. A packed hash is rewritten once, however many pairs.
func (e *entry) hashSetPairs(pairs []string) int {
	if e.table() == nil {
		if created, ok := e.packPairs(pairs); ok {
			return created
		}
		e.unpackHash()
	}
	t := e.table()
	created := 0
	for i := 0; i < len(pairs); i += 2 {
		if t.set(pairs[i], pairs[i+1]) {
			created++
		}
	}
	return created
}

// packPairs applies pairs to the packed form and returns how many fields are new, or
// reports false (changing nothing) when the result would be too big to pack.
func (e *entry) packPairs(pairs []string) (created int, ok bool) {
	p := packedHash(e.str)
	n := p.len()
	// latest returns the last value pairs give field, if any.
	latest := func(field string) (string, bool) {
		for i := len(pairs) - 2; i >= 0; i -= 2 {
			if pairs[i] == field {
				return pairs[i+1], true
			}
		}
		return "", false
	}
	// added reports whether pairs[i] is a new field's first appearance.
	added := func(i int) bool {
		if _, ok := p.get(pairs[i]); ok {
			return false
		}
		for j := 0; j < i; j += 2 {
			if pairs[j] == pairs[i] {
				return false
			}
		}
		return true
	}
	count, size, fits := n, 1+2*n, true
	p.each(func(f, v string) bool {
		if nv, ok := latest(f); ok {
			v = nv
		}
		size += len(f) + len(v)
		fits = fits && len(v) <= hashPackValue
		return true
	})
	for i := 0; i < len(pairs); i += 2 {
		if added(i) {
			v, _ := latest(pairs[i])
			count++
			size += 2 + len(pairs[i]) + len(v)
			fits = fits && len(pairs[i]) <= hashPackValue && len(v) <= hashPackValue
		}
	}
	if !fits || count > hashPackEntries {
		return 0, false
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteByte(byte(count))
	// emit calls write with the new hash's fields and values in order.
	emit := func(write func(f, v string)) {
		p.each(func(f, v string) bool {
			if nv, ok := latest(f); ok {
				v = nv
			}
			write(f, v)
			return true
		})
		for i := 0; i < len(pairs); i += 2 {
			if added(i) {
				v, _ := latest(pairs[i])
				write(pairs[i], v)
			}
		}
	}
	emit(func(f, v string) { b.WriteByte(byte(len(f))); b.WriteByte(byte(len(v))) })
	emit(func(f, v string) { b.WriteString(f); b.WriteString(v) })
	e.str = b.String()
	return count - n, true
}

// unpackHash turns a packed hash into a hashTable with the same fields in order.
func (e *entry) unpackHash() {
	t := &hashTable{}
	packedHash(e.str).each(func(f, v string) bool { t.set(f, v); return true })
	e.str, e.obj = "", t
}

// hashDel removes field and reports whether it was there.
func (e *entry) hashDel(field string) bool {
	if t := e.table(); t != nil {
		return t.del(field)
	}
	p := packedHash(e.str)
	if _, ok := p.get(field); !ok {
		return false
	}
	n := p.len()
	var b strings.Builder
	b.Grow(len(p) - 2 - len(field))
	b.WriteByte(byte(n - 1))
	p.each(func(f, v string) bool {
		if f != field {
			b.WriteByte(byte(len(f)))
			b.WriteByte(byte(len(v)))
		}
		return true
	})
	p.each(func(f, v string) bool {
		if f != field {
			b.WriteString(f)
			b.WriteString(v)
		}
		return true
	})
	e.str = b.String()
	if n == 1 {
		e.str = ""
	}
	return true
}
