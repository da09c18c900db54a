package luahost

import (
	"math"
	"sort"
	"strings"
)

// A sorted set of at most zsetPackEntries members, none longer than zsetPackValue bytes,
// is held packed in its entry's str, as Redis holds it in a listpack
// (zset-max-listpack-entries 128, zset-max-listpack-value 64): one byte for the member
// count n, n scores (IEEE 754 bits, little-endian, 8 bytes each), n member-length bytes,
// then the members, all in (score, member) order. Scores are found by binary search and
// member i at the sum of the lengths before it, so nothing else is stored per member.
//
// As in Redis 7.0, a set is created packed unless its first member is too long, and it
// becomes a skiplist for good when an insertion would make it too long or too big. A
// packed score of -0 is stored as 0, as a listpack stores it; a skiplist keeps -0.
const (
	zsetPackEntries = 128
	zsetPackValue   = 64
)

// packedZset is the packed form of a sorted set.
type packedZset string

func (p packedZset) len() int {
	if p == "" {
		return 0
	}
	return int(p[0])
}

func (p packedZset) score(i int) float64 {
	o := 1 + 8*i
	var bits uint64
	for j := 7; j >= 0; j-- {
		bits = bits<<8 | uint64(p[o+j])
	}
	return math.Float64frombits(bits)
}

// memberLen is the length of member i.
func (p packedZset) memberLen(i int) int { return int(p[1+8*p.len()+i]) }

// offset is where member i starts.
func (p packedZset) offset(i int) int {
	n := p.len()
	off := 1 + 9*n
	for j := 0; j < i; j++ {
		off += int(p[1+8*n+j])
	}
	return off
}

func (p packedZset) member(i int) string {
	o := p.offset(i)
	return string(p[o : o+p.memberLen(i)])
}

// find returns the index of member, or -1.
func (p packedZset) find(member string) int {
	n := p.len()
	off := 1 + 9*n
	for i := 0; i < n; i++ {
		l := int(p[1+8*n+i])
		if l == len(member) && string(p[off:off+l]) == member {
			return i
		}
		off += l
	}
	return -1
}

// rebuild returns the packed set of p's members but those of indexes drop..drop+k-1,
// with (score, member) inserted at index at of the result when at >= 0.
func (p packedZset) rebuild(drop, k, at int, score float64, member string) packedZset {
	n := p.len()
	m := n - k
	if at >= 0 {
		m++
	}
	if m == 0 {
		return ""
	}
	// each calls fn with the result's members in order, by their index in p (-1: the
	// inserted one).
	each := func(fn func(from int)) {
		j := 0
		for i := 0; i < n; i++ {
			if i >= drop && i < drop+k {
				continue
			}
			if j == at {
				fn(-1)
				j++
			}
			fn(i)
			j++
		}
		if j == at {
			fn(-1)
		}
	}
	size := 1 + 9*m
	each(func(from int) {
		if from < 0 {
			size += len(member)
		} else {
			size += p.memberLen(from)
		}
	})
	var b strings.Builder
	b.Grow(size)
	b.WriteByte(byte(m))
	each(func(from int) {
		s := score
		if from >= 0 {
			s = p.score(from)
		}
		bits := math.Float64bits(s)
		for j := 0; j < 8; j++ {
			b.WriteByte(byte(bits >> (8 * j)))
		}
	})
	each(func(from int) {
		if from < 0 {
			b.WriteByte(byte(len(member)))
		} else {
			b.WriteByte(byte(p.memberLen(from)))
		}
	})
	var offsets [zsetPackEntries]int
	off := 1 + 9*n
	for i := 0; i < n; i++ {
		offsets[i] = off
		off += p.memberLen(i)
	}
	each(func(from int) {
		if from < 0 {
			b.WriteString(member)
		} else {
			b.WriteString(string(p[offsets[from] : offsets[from]+p.memberLen(from)]))
		}
	})
	return packedZset(b.String())
}

// zset is a sorted set entry, packed or a skiplist, with Redis's operations on it.
type zset struct{ e *entry }

func (e *entry) zset() zset { return zset{e} }

// newZsetEntry returns an empty sorted set whose first member will be first: packed,
// unless first is too long to pack (Redis 7.0's ZADD decides by the first member).
func newZsetEntry(first string) *entry {
	e := newEntry(kindZset)
	if len(first) > zsetPackValue {
		e.obj = newSkiplist()
	}
	return e
}

// skiplist returns the set's skiplist, or nil when it is packed.
func (z zset) skiplist() *skiplist {
	s, _ := z.e.obj.(*skiplist)
	return s
}

func (z zset) packed() packedZset { return packedZset(z.e.str) }

func (z zset) card() int {
	if s := z.skiplist(); s != nil {
		return s.length
	}
	return z.packed().len()
}

func (z zset) score(member string) (float64, bool) {
	if s := z.skiplist(); s != nil {
		return s.score(member)
	}
	p := z.packed()
	if i := p.find(member); i >= 0 {
		return p.score(i), true
	}
	return 0, false
}

// at returns the member of 0-based rank r (0 <= r < card) and its score.
func (z zset) at(r int) (string, float64) {
	if s := z.skiplist(); s != nil {
		x := s.byRank(r)
		return x.member, x.score
	}
	p := z.packed()
	return p.member(r), p.score(r)
}

// rank returns the 0-based rank of member.
func (z zset) rank(member string) (int, bool) {
	if s := z.skiplist(); s != nil {
		return s.rank(member)
	}
	i := z.packed().find(member)
	return i, i >= 0
}

// walk calls fn with the members from rank r on, towards the highest (or, reverse, the
// lowest), until fn returns false or the set ends.
func (z zset) walk(r int, reverse bool, fn func(member string, score float64) bool) {
	if s := z.skiplist(); s != nil {
		if r < 0 || r >= s.length {
			return
		}
		for x := s.byRank(r); x != nil; {
			if !fn(x.member, x.score) {
				return
			}
			if reverse {
				x = x.backward
			} else {
				x = x.level[0].forward
			}
		}
		return
	}
	p := z.packed()
	n := p.len()
	if r < 0 || r >= n {
		return
	}
	off := p.offset(r)
	for i := r; i >= 0 && i < n; {
		l := p.memberLen(i)
		if !fn(string(p[off:off+l]), p.score(i)) {
			return
		}
		if reverse {
			i--
			if i >= 0 {
				off -= p.memberLen(i)
			}
		} else {
			off += l
			i++
		}
	}
}

// firstInRange returns the rank of the lowest member whose score is in r, or -1.
func (z zset) firstInRange(r *scoreRange) int {
	if s := z.skiplist(); s != nil {
		if x, rank := s.firstInRange(r); x != nil {
			return rank
		}
		return -1
	}
	p := z.packed()
	n := p.len()
	if r.empty() || n == 0 {
		return -1
	}
	i := sort.Search(n, func(i int) bool { return r.gteMin(p.score(i)) })
	if i == n || !r.lteMax(p.score(i)) {
		return -1
	}
	return i
}

// lastInRange returns the rank of the highest member whose score is in r, or -1.
func (z zset) lastInRange(r *scoreRange) int {
	if s := z.skiplist(); s != nil {
		if x, rank := s.lastInRange(r); x != nil {
			return rank
		}
		return -1
	}
	p := z.packed()
	n := p.len()
	if r.empty() || n == 0 {
		return -1
	}
	i := sort.Search(n, func(i int) bool { return !r.lteMax(p.score(i)) }) - 1
	if i < 0 || !r.gteMin(p.score(i)) {
		return -1
	}
	return i
}

// count returns how many members have a score in r.
func (z zset) count(r *scoreRange) int {
	f := z.firstInRange(r)
	if f < 0 {
		return 0
	}
	return z.lastInRange(r) - f + 1
}

// insert adds a member that is not in the set, turning a packed set into a skiplist
// first when the member would not fit.
func (z zset) insert(score float64, member string) {
	if s := z.skiplist(); s != nil {
		s.insert(score, member)
		return
	}
	p := z.packed()
	n := p.len()
	if n+1 > zsetPackEntries || len(member) > zsetPackValue {
		s := newSkiplist()
		for i := 0; i < n; i++ {
			s.insert(p.score(i), p.member(i))
		}
		z.e.str, z.e.obj = "", s
		s.insert(score, member)
		return
	}
	if score == 0 {
		score = 0 // -0 is stored as 0
	}
	at := 0
	z.walk(0, false, func(m string, s float64) bool {
		if !less(s, m, score, member) {
			return false
		}
		at++
		return true
	})
	z.e.str = string(p.rebuild(0, 0, at, score, member))
}

// set adds member or changes its score.
func (z zset) set(score float64, member string) {
	if s := z.skiplist(); s != nil {
		s.set(score, member)
		return
	}
	if cur, ok := z.score(member); ok {
		if cur == score {
			return
		}
		z.remove(member)
	}
	z.insert(score, member)
}

// remove deletes member and reports whether it was there.
func (z zset) remove(member string) bool {
	if s := z.skiplist(); s != nil {
		return s.remove(member)
	}
	p := z.packed()
	i := p.find(member)
	if i < 0 {
		return false
	}
	z.e.str = string(p.rebuild(i, 1, -1, 0, ""))
	return true
}

// deleteRangeByRank removes the members of 0-based ranks start..end inclusive (already
// clamped) and returns how many it removed.
func (z zset) deleteRangeByRank(start, end int) int {
	if s := z.skiplist(); s != nil {
		return s.deleteRangeByRank(start, end)
	}
	k := end - start + 1
	z.e.str = string(z.packed().rebuild(start, k, -1, 0, ""))
	return k
}

// deleteRangeByScore removes the members whose score is in r and returns how many it
// removed.
func (z zset) deleteRangeByScore(r *scoreRange) int {
	if s := z.skiplist(); s != nil {
		return s.deleteRangeByScore(r)
	}
	f := z.firstInRange(r)
	if f < 0 {
		return 0
	}
	return z.deleteRangeByRank(f, z.lastInRange(r))
}

// clone returns a deep copy of the set's skiplist, or nil when it is packed.
func (z zset) cloneSkiplist() *skiplist {
	s := z.skiplist()
	if s == nil {
		return nil
	}
	c := newSkiplist()
	for x := s.first(); x != nil; x = x.level[0].forward {
		c.insert(x.score, x.member)
	}
	return c
}
