package engine

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/rlctl/rlctl/algorithms"
)

// Key layout. Every key the engine writes is
//
//	rl:{<shard>}:<policy>:<rule>:<algorithm>:<key>   when the policy declares a shard
//	rl:<policy>:<rule>:<algorithm>:<key>             otherwise
//
// With a shard, "{<shard>}" is the Redis Cluster hash tag: all of a request's keys in that
// policy share one slot, so one call decides them atomically. Without one, each key hashes
// whole and lands in a slot of its own.
//
// A rule with further keys, those of its algorithm (algorithms.Algorithm.Keys, a plugin's
// keys), its penalty box (block_for: algorithms.Box) or its overrides (overridable:
// algorithms.Override), is written with its identity in braces:
//
//	rl:{<shard>}:{<policy>:<rule>:<algorithm>:<key>}   with a shard
//	rl:{<policy>:<rule>:<algorithm>:<key>}             without
//
// Each further key is the rule's key, ':' and the further key's name. Without a shard the
// braces are the hash tag, so the further keys hash to the rule key's slot; with one, the
// first braces are, and the second only close the rule's key: no rendered value holds a
// brace (below), so no request's key, whatever it sends, equals another value's further
// key (as "<key>:box" would without them).
//
// <algorithm> is the tag of the algorithm that reads and writes the key (AlgorithmTag), so a
// rule's stored state is only ever read by the algorithm that wrote it: a rule that changes
// algorithm, in one reload or in several, across a restart with new files, or between two
// instances of a fleet running different policies or versions, reads and writes keys of
// its own that start empty, never the other algorithm's state (a WRONGTYPE error, or a
// wrong count, until the old keys expired). A built-in's tag is its name; a plugin's is its
// name, '-' and a hash of its Lua source, so an edited plugin starts its counters over
// too (the edit may change what it stores).
//
// A built-in whose stored layout changes (another type, other fields, other units) must
// get a new tag in the same change, such as "gcra2" (see AlgorithmTag): the tag names a
// layout, not a file, and an instance running the old layout must never read the new one.
//
// Rendered values (shard and key) are request data and may hold anything. Rendering is
// injective: two different values of a rule's key (or of a policy's shard) never give the
// same Redis key, so no client can share, or exhaust, another client's counter by what it
// sends; nor do two rules, or one rule under two algorithms. Policy and rule names are
// identifiers (letters, digits, '_' and '-': no ':', '{' or '}'), so is the algorithm tag
// (a built-in's name has no '-', a plugin's tag always has one, and a plugin cannot take a
// built-in's name), the shard ends at the first '}' and the key is the rest, so each part
// is recovered from the key, and within a part:
//
//   - '{', '}', '%', '#' and bytes outside printable ASCII become %XX (upper-case hex). A
//     rendered value therefore never holds a brace, and can never open or close a hash tag:
//     a sharded policy's keys always land in the slot of "{<shard>}".
//   - A value longer than maxKeyPart bytes after escaping becomes "#" and the hex SHA-256
//     of the raw value, so key length stays bounded. Escaping turns every '#' of a value
//     into %23, so only this form starts with '#' and no value can forge it.
//   - The empty shard is written "-" (the tag is never "{}", which Redis would ignore), so
//     a shard that is "-" itself is written %2D.
//
// Everything else, '-' and ':' included, is kept as is, so common values (addresses,
// identifiers, "tenant:user") appear in keys unchanged. Rendering is injective in the
// string the policy's expression gives; how expressions turn request attributes into that
// string (and which attribute values they merge on purpose, such as lower()) is described
// by dsl.Expr.
//
// Keys written before the algorithm was part of them (rl:[{shard}:]<policy>:<rule>:<key>)
// are not read: after an upgrade every rule's counters start over once, and the old keys
// expire on their own.
const maxKeyPart = 128

// keyPrefix is the namespace of every engine key.
const keyPrefix = "rl:"

// emptyShard is how the empty shard is written; a shard of this value is escaped.
const emptyShard = "-"

// appendPart appends the escaped form of v to b: v itself when it needs no escaping, %XX
// escapes, or the hash form of a long value.
func appendPart(b []byte, v string) []byte {
	n := 0
	for i := 0; i < len(v); i++ {
		if needsEscape(v[i]) {
			n += 3
		} else {
			n++
		}
	}
	if n > maxKeyPart {
		sum := sha256.Sum256([]byte(v))
		b = append(b, '#')
		return hex.AppendEncode(b, sum[:])
	}
	if n == len(v) {
		return append(b, v...)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; needsEscape(c) {
			b = appendEscape(b, c)
		} else {
			b = append(b, c)
		}
	}
	return b
}

// appendEscape appends %XX, the escape of c.
func appendEscape(b []byte, c byte) []byte {
	const digits = "0123456789ABCDEF"
	return append(b, '%', digits[c>>4], digits[c&15])
}

// needsEscape reports whether c is written %XX: the hash tag's braces, the escape and hash
// form markers, and everything but printable ASCII.
func needsEscape(c byte) bool {
	return c == '{' || c == '}' || c == '%' || c == '#' || c < 0x21 || c > 0x7e
}

// pluginHashLen is how many hex digits of the SHA-256 of a plugin's source its tag holds:
// 48 bits, so two edits of one plugin share a tag with a chance of 2^-48.
const pluginHashLen = 12

// AlgorithmTag is the <algorithm> part of the keys a rule of algorithm a reads and writes
// (see the key layout above): a built-in's name, or for any other algorithm (a plugin) its
// name, '-' and the first 12 hex digits of the SHA-256 of its Source, such as
// "my_window-3f2a9c01b4de". Two algorithms with one tag store the same layout.
func AlgorithmTag(a *algorithms.Algorithm) string {
	if b, ok := algorithms.Lookup(a.Name); ok && b == a {
		// A built-in: give it a new tag here (name2, name3…) when its stored layout changes.
		return a.Name
	}
	sum := sha256.Sum256([]byte(a.Source))
	return a.Name + "-" + hex.EncodeToString(sum[:])[:pluginHashLen]
}

// renderKey appends to buf[:0] the Redis key of a rule for one request; tag is its
// algorithm's AlgorithmTag, and shard is used only when sharded is true.
// further is whether the rule uses further keys: its identity is then in braces.
func renderKey(buf []byte, policy, rule, tag string, sharded bool, shard, key string, further bool) []byte {
	buf = append(buf[:0], keyPrefix...)
	wrap := further
	if sharded {
		buf = append(buf, '{')
		buf = shardTag(buf, shard)
		buf = append(buf, '}', ':')
	}
	if wrap {
		buf = append(buf, '{')
	}
	buf = append(buf, policy...)
	buf = append(buf, ':')
	buf = append(buf, rule...)
	buf = append(buf, ':')
	buf = append(buf, tag...)
	buf = append(buf, ':')
	buf = appendPart(buf, key)
	if wrap {
		buf = append(buf, '}')
	}
	return buf
}

// shardTag appends the escaped shard value; the empty value becomes emptyShard so that the
// tag is never "{}", which Redis would ignore, and a value equal to emptyShard is escaped
// so that it stays distinct from the empty one.
func shardTag(b []byte, shard string) []byte {
	switch shard {
	case "":
		return append(b, emptyShard...)
	case emptyShard:
		return appendEscape(b, emptyShard[0])
	}
	return appendPart(b, shard)
}
