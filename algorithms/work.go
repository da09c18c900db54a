package algorithms

import (
	"fmt"
	"math/bits"
	"strconv"
)

// Work is the worst case of one rule on Redis: what one engine call may cost the server on
// the rule's behalf, and how large the rule's key may grow. Redis runs a script to the end
// before it serves any other client, so a call that touches many elements stalls every
// client of that server for as long as it runs.
//
// The figures are upper bounds for every state the rule's key can reach and every call,
// check and refund alike: a check then a commit, or a check then the peek that follows when
// another rule of the request denies. The engine's call adds one command of its own (TIME)
// whatever its rules.
type Work struct {
	// Commands is the most Redis commands the rule issues in one call.
	Commands int64
	// Elements is the most elements those commands touch one by one: hash fields and string
	// values read or written, sorted-set members and list items added, removed, returned or
	// stepped over (a LIMIT offset), and the elements a DEL frees. A command that searches
	// a sorted set also takes O(log n) steps to find its place, which is not counted: 20
	// for a million members.
	Elements int64
	// Type is what the key holds.
	Type KeyType
	// Entries is the most elements the key holds: hash fields, list items, sorted-set
	// members; 1 for a string.
	Entries int64
	// Memory is the most bytes the key takes, as Redis 7's MEMORY USAGE key SAMPLES 0
	// counts them, less the key's name (see KeyMemory).
	Memory int64
}

// Steps is the work a budget limits: Commands + Elements. A command and an element each
// cost Redis about a microsecond (0.2 to 2 µs measured: see DefaultBudget in dsl).
func (w Work) Steps() int64 { return w.Commands + w.Elements }

// Max returns the larger of w and v figure by figure, the worst case of a rule whose
// parameters may take either set of values; Type is w's, or v's when w has none.
func (w Work) Max(v Work) Work {
	t := w.Type
	if t == 0 {
		t = v.Type
	}
	return Work{Commands: max(w.Commands, v.Commands), Elements: max(w.Elements, v.Elements), Type: t,
		Entries: max(w.Entries, v.Entries), Memory: max(w.Memory, v.Memory)}
}

// KeyType is the Redis type of an algorithm's key.
type KeyType int

const (
	KeyString KeyType = iota + 1
	KeyHash
	KeyList
	KeyZset
)

// KeyTypes are the types, in the order the docs list them.
var KeyTypes = []KeyType{KeyString, KeyHash, KeyList, KeyZset}

// String is the type's name as Redis's TYPE command says it.
func (t KeyType) String() string {
	switch t {
	case KeyString:
		return "string"
	case KeyHash:
		return "hash"
	case KeyList:
		return "list"
	case KeyZset:
		return "zset"
	}
	return "none"
}

// Costs are the costs a rule's requests may charge, which bound how its key grows.
type Costs struct {
	// Min is the smallest positive cost a request charges: the rule's cost when constant,
	// the smallest positive value its expression takes when those are known, else 1.
	// Engine.AllowN(n) charges n times it, never less.
	Min int64
	// Max is the largest cost a request charges; 0 means any cost up to the algorithm's
	// capacity (what Engine.AllowN can charge whatever the rule's cost). A larger cost is
	// denied before anything is written.
	Max int64
}

// Complexity is what an algorithm declares about its worst case on Redis. Built-ins
// declare theirs in the registry; a plugin's comes from its HCL work block.
type Complexity struct {
	// Of computes the worst case for a rule's wire parameters w and the costs c its
	// requests charge (normalised by WorkOf: 1 <= Min <= Max). Nil: not declared.
	Of func(w []int64, c Costs) (Work, error)
	// Fix says, in one sentence, how a rule past a budget can need less, quoted by
	// validate's warning ("" for an algorithm whose work does not grow with its
	// parameters).
	Fix string
}

// WorkOf returns a's worst case for wire parameters w and costs c; ok is false when a
// declares none.
func (a *Algorithm) WorkOf(w []int64, c Costs) (work Work, ok bool, err error) {
	if a.Complexity.Of == nil {
		return Work{}, false, nil
	}
	if len(w) != a.WireLen() {
		return Work{}, false, fmt.Errorf("%s takes %d parameter values, got %d", a.Name, a.WireLen(), len(w))
	}
	capacity := int64(MaxInt)
	i := 0
	for _, p := range a.Params {
		if p.Capacity {
			capacity = w[i]
		}
		i += p.slots()
	}
	if a.MaxCost > 0 {
		capacity = min(capacity, a.MaxCost)
	}
	if c.Max <= 0 || c.Max > capacity {
		c.Max = capacity
	}
	c.Min = min(max(c.Min, 1), max(c.Max, 1))
	c.Max = max(c.Max, c.Min)
	work, err = a.Complexity.Of(w, c)
	if err != nil {
		return Work{}, false, fmt.Errorf("%s's work: %w", a.Name, err)
	}
	if work.Commands < 0 || work.Elements < 0 || work.Entries < 0 || work.Memory < 0 {
		return Work{}, false, fmt.Errorf("%s's work gives %+v for parameters %v: no figure may be negative", a.Name, work, w)
	}
	return work, true, nil
}

// The memory model. MEMORY USAGE key SAMPLES 0 on Redis 7 (jemalloc, the default
// allocator) is the value's allocations as the allocator rounds them, plus the key's name
// and its 24-byte entry in the keyspace. KeyMemory bounds it from the element count and the
// longest element, with Redis's default encoding thresholds (128 entries, 64-byte
// elements, 8 KiB list nodes), for every state a key of at most that many entries can be
// in: a sorted set or hash once converted to its large encoding stays in it, so the large
// encoding is assumed whenever the entries can pass the threshold. Measured on Redis 7.0
// against MEMORY USAGE by TestRedisMemoryModel.
const (
	// keyEntryBytes is the key's entry in the keyspace (24) and, on a cluster node, its
	// slot bookkeeping (16).
	keyEntryBytes = 24 + 16
	robjBytes     = 16 // a Redis object header
	dictBytes     = 56 // a dict without its table
	dictEntry     = 24
	// skiplistNodeBytes is a sorted-set node at its allocation: levels are random (3 in 4
	// nodes have one level, 48 bytes; the mean is 53.3); 64 per node bounds the total of
	// any 129 or more nodes, the fewest a key in the large encoding has held, with a
	// probability of exceeding it below 10^-20, and one node at the top level (32 levels,
	// 640 bytes) is allowed on top.
	skiplistNodeBytes = 64
	listpackMax       = 128 // zset-max-listpack-entries, hash-max-listpack-entries
	listpackValueMax  = 64  // zset-max-listpack-value, hash-max-listpack-value
	listNodeBytes     = 40  // a quicklist node without its listpack
)

// KeyMemory bounds the bytes a key of type t holding at most entries elements, each at most
// elementBytes long, takes by MEMORY USAGE less its name: a sorted-set member; a hash
// field's name plus its value; a list item; a string's value. See KeyNameBytes for the name.
func KeyMemory(t KeyType, entries, elementBytes int64) int64 {
	n, l := max(entries, 0), max(elementBytes, 0)
	switch t {
	case KeyString:
		// An integer is the object alone; up to 44 bytes share one allocation with it
		// (embstr); longer ones have their own, which APPEND may have doubled.
		return keyEntryBytes + max(alloc(robjBytes+3+l+1), robjBytes+alloc(sdsBytes(2*l)))
	case KeyHash:
		if n <= listpackMax && l <= listpackValueMax {
			// Each field and value: its bytes, a header and a back length of 1 or 2 each,
			// or a compact integer of at most 10 bytes.
			return keyEntryBytes + robjBytes + alloc(7+n*(l+6))
		}
		return keyEntryBytes + robjBytes + dictBytes + 8*slots(n) + n*(dictEntry+2*alloc(sdsBytes(l)))
	case KeyList:
		// Items in listpack nodes of up to 8 KiB: each item its bytes and up to 6, each
		// node's listpack 7 more, rounded up by at most a quarter and 16 bytes; and up to a
		// node per item, the sparsest removals in the middle can leave a list.
		return keyEntryBytes + robjBytes + 40 + n*(listNodeBytes+16) + (5*n*(l+13)+3)/4
	case KeyZset:
		if n <= listpackMax && l <= listpackValueMax {
			// Each member (its bytes and up to 3) and its score (a compact integer, or up to
			// 24 characters and 2).
			return keyEntryBytes + robjBytes + alloc(7+n*(l+3+26))
		}
		fixed := int64(robjBytes + 16 + 32 + dictBytes + 640 + 640)
		return keyEntryBytes + fixed + 8*slots(n) + n*(skiplistNodeBytes+dictEntry+alloc(sdsBytes(l)))
	}
	return keyEntryBytes
}

// KeyNameBytes is what a key's name of n bytes adds to MEMORY USAGE: its string as the
// allocator rounds it.
func KeyNameBytes(n int) int64 { return alloc(sdsBytes(int64(n))) }

// slots bounds a dict's table slots for at most n entries: a table grows to twice its size
// when full, and while it rehashes both tables are counted.
func slots(n int64) int64 { return max(4, 3*n) }

// sdsBytes is a Redis string of n bytes with its header and terminator.
func sdsBytes(n int64) int64 {
	switch {
	case n < 32:
		return n + 2
	case n < 256:
		return n + 4
	case n < 65536:
		return n + 6
	}
	return n + 10
}

// alloc rounds a request of n bytes up to jemalloc's size class: 8, then multiples of 16
// up to 128, then four classes per doubling (160, 192, 224, 256, 320, …).
func alloc(n int64) int64 {
	switch {
	case n <= 8:
		return 8
	case n <= 128:
		return (n + 15) &^ 15
	}
	k := int64(bits.Len64(uint64(n-1))) - 1 // 2^k < n <= 2^(k+1)
	step := int64(1) << (k - 2)
	return (n + step - 1) / step * step
}

// FormatBytes prints a byte count for people: "104 B", "9.6 KiB", "173.3 KiB", "1.5 MiB".
func FormatBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s + " " + unit
}

// fixedWork declares an algorithm whose key holds a fixed few elements and whose every
// call touches a fixed few: commands and elements per call, entries of elementBytes each.
func fixedWork(commands, elements int64, t KeyType, entries, elementBytes int64) Complexity {
	w := Work{Commands: commands, Elements: elements, Type: t, Entries: entries, Memory: KeyMemory(t, entries, elementBytes)}
	return Complexity{Of: func([]int64, Costs) (Work, error) { return w, nil }}
}

// The sorted-set algorithms keep one entry per instant charged (sliding_log) or per lease
// held (concurrency), so a key holds at most e = amount / (smallest cost) entries: what it
// holds never passes the amount. The figures follow the paths of their Lua (see its Work
// lines) for a key of that layout; a key the per-unit layout of an earlier version wrote is
// read member by member, and rewritten by its first charge, once.

// slidingLogWork declares lua/sliding_log.lua for the limit at wire slot 0. Members are
// "<before>+<cost>", at most 33 bytes. The worst call is a charge: the check's two reads,
// then commit trims every entry that expired (all of them after a quiet spell), may
// renumber the rest (read them in pages of 10000, clear them and rewrite them in ZADDs of
// 500, once the running total nears 2^52) and may insert behind the newest entry for a
// caller whose clock runs behind (read the entries after it, remove them in ZREMs of 1000
// and rewrite them): each entry touched at most six times. A denial reads the first and newest entries, counts the entries
// before the window and probes by rank for the entry that places the retry-after,
// galloping then bisecting: at most 2⌈log2(e+1)⌉ probes. A refund reads, removes and
// rewrites the entries after its instant.
func slidingLogWork(w []int64, c Costs) (Work, error) {
	e := max(1, w[0]/c.Min)
	l := log2Ceil(e)
	return Work{
		Commands: max(5+2*l, 8+e/10000+cdiv(e, 500)+cdiv(e, 1000)+cdiv(e+1, 500)),
		Elements: max(4+2*l, 6*e+4),
		Type:     KeyZset,
		Entries:  e,
		Memory:   KeyMemory(KeyZset, e, 33),
	}, nil
}

// concurrencyWork declares lua/concurrency.lua for the maximum at wire slot 0. Members are
// a lease id, or "<cost>*<lease>" for a lease of cost above 1: at most 48 bytes for the
// engine's lease ids (26 bytes). A check counts the leases of cost 1, reads every lease of
// a larger cost and the newest; a denial bisects over those leases' instants with counts
// (at most ⌈log2(e+1)⌉) and reads one more by rank. A commit trims the expired leases and
// adds one. The worst calls are a check and the peek that follows another rule's denial
// (every lease read twice), and the release of a lease that has expired: its cost is
// removed unit by unit, in ZREMs of 1000, as the per-unit layout stored it.
func concurrencyWork(w []int64, c Costs) (Work, error) {
	e := max(1, w[0]/c.Min)
	return Work{
		Commands: max(5+log2Ceil(e), 6, 1+cdiv(c.Max, 1000)),
		Elements: max(2*e+2, c.Max+1),
		Type:     KeyZset,
		Entries:  e,
		Memory:   KeyMemory(KeyZset, e, 48),
	}, nil
}

// log2Ceil is ⌈log2(n+1)⌉ for n >= 0: the steps a bisection over n items takes.
func log2Ceil(n int64) int64 { return int64(bits.Len64(uint64(n))) }

// cdiv is ⌈a/b⌉ for a >= 0, b > 0.
func cdiv(a, b int64) int64 { return (a + b - 1) / b }

// hashElementBytes is the longest field and value of the built-ins' hashes: a one-letter
// field and an integer of at most 16 digits (every value stays within 2^53); tatBytes is
// gcra's string, "<µs>:<remainder>" at its longest.
const (
	hashElementBytes = 1 + 16
	tatBytes         = 16 + 1 + 16
)
