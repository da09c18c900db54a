package engine

import (
	"crypto/sha256"
	"encoding/hex"
)

// Key layout. Every key the engine writes is
//
//	rl:{<shard>}:<policy>:<rule>:<key>   when the policy declares a shard
//	rl:<policy>:<rule>:<key>             otherwise
//
// With a shard, "{<shard>}" is the Redis Cluster hash tag: all of a request's keys in that
// policy share one slot, so one call decides them atomically. Without one, each key hashes
// whole and lands in a slot of its own.
//
// Rendered values (shard and key) are request data and may hold anything. Rendering is
// injective: two different values of a rule's key (or of a policy's shard) never give the
// same Redis key, so no client can share, or exhaust, another client's counter by what it
// sends. Policy and rule names are identifiers (no ':', '{' or '}'), the shard ends at the
// first '}' and the key is the rest, so each part is recovered from the key, and within a
// part:
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

// renderKey appends to buf[:0] the Redis key of a rule for one request; shard is used only
// when sharded is true.
func renderKey(buf []byte, policy, rule string, sharded bool, shard, key string) []byte {
	buf = append(buf[:0], keyPrefix...)
	if sharded {
		buf = append(buf, '{')
		buf = shardTag(buf, shard)
		buf = append(buf, '}', ':')
	}
	buf = append(buf, policy...)
	buf = append(buf, ':')
	buf = append(buf, rule...)
	buf = append(buf, ':')
	return appendPart(buf, key)
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
