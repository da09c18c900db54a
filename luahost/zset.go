package luahost

import "strings"

// A sorted set too big to pack (zsetview.go) is a member -> score map plus a skiplist
// ordered by (score, member bytes), with spans so that ranks are O(log n), as in Redis's
// t_zset.c. Scores are never NaN.

const (
	zslMaxLevel = 32
	zslP        = 0.25
)

type zslLevel struct {
	forward *zslNode
	span    int
}

type zslNode struct {
	member   string
	score    float64
	backward *zslNode
	level    []zslLevel
}

type skiplist struct {
	dict   map[string]float64
	bytes  int64 // the heap the nodes and members take (memory.go)
	header *zslNode
	tail   *zslNode
	length int
	level  int
	rnd    uint64 // xorshift state for node levels; levels never show in replies
}

func newSkiplist() *skiplist {
	return &skiplist{
		dict:   make(map[string]float64),
		header: &zslNode{level: make([]zslLevel, zslMaxLevel)},
		level:  1,
		rnd:    0x9E3779B97F4A7C15,
	}
}

// scoreRange is a score interval; minEx/maxEx make an end exclusive.
type scoreRange struct {
	min, max     float64
	minEx, maxEx bool
}

func (r *scoreRange) gteMin(v float64) bool {
	if r.minEx {
		return v > r.min
	}
	return v >= r.min
}

func (r *scoreRange) lteMax(v float64) bool {
	if r.maxEx {
		return v < r.max
	}
	return v <= r.max
}

// empty reports whether no score can be in the range.
func (r *scoreRange) empty() bool {
	return r.min > r.max || (r.min == r.max && (r.minEx || r.maxEx))
}

// less orders (score, member) pairs as Redis does: by score, then by member
// bytes.
func less(s1 float64, m1 string, s2 float64, m2 string) bool {
	return s1 < s2 || (s1 == s2 && m1 < m2)
}

func (z *skiplist) randomLevel() int {
	level := 1
	for level < zslMaxLevel {
		z.rnd ^= z.rnd << 13
		z.rnd ^= z.rnd >> 7
		z.rnd ^= z.rnd << 17
		if float64(z.rnd&0xFFFF) >= zslP*0xFFFF {
			break
		}
		level++
	}
	return level
}

func (z *skiplist) card() int { return z.length }

func (z *skiplist) score(member string) (float64, bool) {
	s, ok := z.dict[member]
	return s, ok
}

// insert adds a member that is not in the set. A score of -0 stays -0, as in
// Redis's skiplist encoding. The set keeps a copy of member.
func (z *skiplist) insert(score float64, member string) {
	member = strings.Clone(member)
	var update [zslMaxLevel]*zslNode
	var rank [zslMaxLevel]int
	x := z.header
	for i := z.level - 1; i >= 0; i-- {
		if i != z.level-1 {
			rank[i] = rank[i+1]
		}
		for x.level[i].forward != nil && less(x.level[i].forward.score, x.level[i].forward.member, score, member) {
			rank[i] += x.level[i].span
			x = x.level[i].forward
		}
		update[i] = x
	}
	level := z.randomLevel()
	if level > z.level {
		for i := z.level; i < level; i++ {
			rank[i] = 0
			update[i] = z.header
			update[i].level[i].span = z.length
		}
		z.level = level
	}
	x = &zslNode{member: member, score: score, level: make([]zslLevel, level)}
	for i := 0; i < level; i++ {
		x.level[i].forward = update[i].level[i].forward
		update[i].level[i].forward = x
		x.level[i].span = update[i].level[i].span - (rank[0] - rank[i])
		update[i].level[i].span = (rank[0] - rank[i]) + 1
	}
	for i := level; i < z.level; i++ {
		update[i].level[i].span++
	}
	if update[0] != z.header {
		x.backward = update[0]
	}
	if x.level[0].forward != nil {
		x.level[0].forward.backward = x
	} else {
		z.tail = x
	}
	z.length++
	z.dict[member] = score
	z.bytes += nodeBytes(level, member)
}

// unlink removes node x given the update vector that precedes it.
func (z *skiplist) unlink(x *zslNode, update *[zslMaxLevel]*zslNode) {
	for i := 0; i < z.level; i++ {
		if update[i].level[i].forward == x {
			update[i].level[i].span += x.level[i].span - 1
			update[i].level[i].forward = x.level[i].forward
		} else {
			update[i].level[i].span--
		}
	}
	if x.level[0].forward != nil {
		x.level[0].forward.backward = x.backward
	} else {
		z.tail = x.backward
	}
	for z.level > 1 && z.header.level[z.level-1].forward == nil {
		z.level--
	}
	z.length--
	delete(z.dict, x.member)
	z.bytes -= nodeBytes(len(x.level), x.member)
}

// remove deletes member and reports whether it was there.
func (z *skiplist) remove(member string) bool {
	score, ok := z.dict[member]
	if !ok {
		return false
	}
	var update [zslMaxLevel]*zslNode
	x := z.header
	for i := z.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && less(x.level[i].forward.score, x.level[i].forward.member, score, member) {
			x = x.level[i].forward
		}
		update[i] = x
	}
	x = x.level[0].forward
	z.unlink(x, &update)
	return true
}

// set adds member or changes its score.
func (z *skiplist) set(score float64, member string) {
	if cur, ok := z.dict[member]; ok {
		if cur == score {
			return
		}
		z.remove(member)
	}
	z.insert(score, member)
}

// rank returns the 0-based rank of member.
func (z *skiplist) rank(member string) (int, bool) {
	score, ok := z.dict[member]
	if !ok {
		return 0, false
	}
	r := 0
	x := z.header
	for i := z.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && !less(score, member, x.level[i].forward.score, x.level[i].forward.member) {
			r += x.level[i].span
			x = x.level[i].forward
		}
		if x != z.header && x.member == member {
			return r - 1, true
		}
	}
	return 0, false
}

// byRank returns the node at 0-based rank r (0 <= r < length).
func (z *skiplist) byRank(r int) *zslNode {
	target := r + 1
	traversed := 0
	x := z.header
	for i := z.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && traversed+x.level[i].span <= target {
			traversed += x.level[i].span
			x = x.level[i].forward
		}
		if traversed == target {
			return x
		}
	}
	return nil
}

// firstInRange returns the first node whose score is in r, and its 0-based
// rank.
func (z *skiplist) firstInRange(r *scoreRange) (*zslNode, int) {
	if r.empty() || z.length == 0 {
		return nil, 0
	}
	rank := 0
	x := z.header
	for i := z.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && !r.gteMin(x.level[i].forward.score) {
			rank += x.level[i].span
			x = x.level[i].forward
		}
	}
	x = x.level[0].forward
	if x == nil || !r.lteMax(x.score) {
		return nil, 0
	}
	return x, rank
}

// lastInRange returns the last node whose score is in r, and its 0-based
// rank.
func (z *skiplist) lastInRange(r *scoreRange) (*zslNode, int) {
	if r.empty() || z.length == 0 {
		return nil, 0
	}
	rank := 0
	x := z.header
	for i := z.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && r.lteMax(x.level[i].forward.score) {
			rank += x.level[i].span
			x = x.level[i].forward
		}
	}
	if x == z.header || !r.gteMin(x.score) {
		return nil, 0
	}
	return x, rank - 1
}

// count returns how many members have a score in r.
func (z *skiplist) count(r *scoreRange) int {
	first, fr := z.firstInRange(r)
	if first == nil {
		return 0
	}
	_, lr := z.lastInRange(r)
	return lr - fr + 1
}

// deleteRangeByScore removes the members whose score is in r and returns
// how many it removed.
func (z *skiplist) deleteRangeByScore(r *scoreRange) int {
	if r.empty() {
		return 0
	}
	var update [zslMaxLevel]*zslNode
	x := z.header
	for i := z.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && !r.gteMin(x.level[i].forward.score) {
			x = x.level[i].forward
		}
		update[i] = x
	}
	x = x.level[0].forward
	removed := 0
	for x != nil && r.lteMax(x.score) {
		next := x.level[0].forward
		z.unlink(x, &update)
		removed++
		x = next
	}
	return removed
}

// deleteRangeByRank removes the members of 0-based ranks start..end
// inclusive (already clamped) and returns how many it removed.
func (z *skiplist) deleteRangeByRank(start, end int) int {
	var update [zslMaxLevel]*zslNode
	traversed := 0
	x := z.header
	for i := z.level - 1; i >= 0; i-- {
		for x.level[i].forward != nil && traversed+x.level[i].span < start+1 {
			traversed += x.level[i].span
			x = x.level[i].forward
		}
		update[i] = x
	}
	traversed++
	x = x.level[0].forward
	removed := 0
	for x != nil && traversed <= end+1 {
		next := x.level[0].forward
		z.unlink(x, &update)
		removed++
		traversed++
		x = next
	}
	return removed
}

// first returns the lowest node, or nil.
func (z *skiplist) first() *zslNode { return z.header.level[0].forward }
