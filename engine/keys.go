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
// Rendered values (shard and key) are request data and may hold anything. They are escaped
// so they can never open or close a hash tag: '{', '}' and '%' and bytes outside printable
// ASCII become %XX. A value longer than maxKeyPart bytes (after escaping) is replaced by
// "#" and the hex SHA-256 of the raw value, so key length stays bounded.
const maxKeyPart = 128

// keyPrefix is the namespace of every engine key.
const keyPrefix = "rl:"

// appendPart appends the escaped form of v to b.
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
	const digits = "0123456789ABCDEF"
	for i := 0; i < len(v); i++ {
		c := v[i]
		if needsEscape(c) {
			b = append(b, '%', digits[c>>4], digits[c&15])
		} else {
			b = append(b, c)
		}
	}
	return b
}

func needsEscape(c byte) bool {
	return c == '{' || c == '}' || c == '%' || c < 0x21 || c > 0x7e
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

// shardTag appends the escaped shard value; an empty value becomes "-" so that the tag is
// never "{}", which Redis would ignore.
func shardTag(b []byte, shard string) []byte {
	if shard == "" {
		return append(b, '-')
	}
	return appendPart(b, shard)
}
