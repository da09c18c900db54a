package httplimit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"maps"
	"math/bits"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rlctl/rlctl/engine"
)

// Canonical header names (textproto.CanonicalMIMEHeaderKey), so http.Header.Get finds them.
const (
	hdrPolicy     = "Ratelimit-Policy"
	hdrRateLimit  = "Ratelimit"
	hdrRetryAfter = "Retry-After"
	hdrLimit      = "X-Ratelimit-Limit"
	hdrRemaining  = "X-Ratelimit-Remaining"
	hdrReset      = "X-Ratelimit-Reset"
)

// setField sets field name, a canonical name, to value: http.Header.Set without
// canonicalizing the name again.
func setField(h http.Header, name, value string) { h[name] = []string{value} }

// fields holds the values a field takes, to hand out one string per value instead of a
// new one per request: a RateLimit-Policy field depends only on the rules that decided
// (names, limits, windows), a few values per policy set. At most fieldsMax values are
// kept; others are made per request.
type fields struct {
	m atomic.Pointer[map[string]string]
}

const fieldsMax = 256

// intern returns b as a string, the one held when b was seen before.
func (f *fields) intern(b []byte) string {
	old := f.m.Load()
	if old != nil {
		if v, ok := (*old)[string(b)]; ok {
			return v
		}
	}
	v := string(b)
	m := map[string]string{v: v}
	if old != nil {
		if len(*old) >= fieldsMax {
			return v
		}
		maps.Copy(m, *old)
	}
	f.m.CompareAndSwap(old, &m) // a value lost to a race is made again next time
	return v
}

// maxSFInt is the largest RFC 9651 Integer (15 digits).
const maxSFInt = 999_999_999_999_999

// pkBytes is the length of a partition key: a truncated HMAC-SHA256.
const pkBytes = 9

// counted reports whether rr is a rule's verdict from a counter: enforcing, and run by a
// backend. A rule decided by on_error "allow" or "deny" without a backend has no counter:
// its Limit is 0, which no real rule has (limits are at least 1).
func counted(rr *engine.RuleResult) bool { return !rr.Shadow && rr.Limit > 0 }

// setHeaders writes the RateLimit fields, Retry-After on a denial and the legacy fields
// for d to h. It returns the Retry-After it set in seconds, or -1 when it set none.
func (c *config) setHeaders(h http.Header, d *engine.Decision) int64 {
	var buf [512]byte
	show := c.closest(d)
	b := buf[:0]
	n := 0
	for i := range d.Rules {
		rr := &d.Rules[i]
		if !counted(rr) {
			continue
		}
		if n > 0 {
			b = append(b, ", "...)
		}
		n++
		b = c.appendName(b, rr)
		b = appendParam(b, "q", rr.Limit)
		if rr.Algorithm == "concurrency" {
			b = append(b, `;qu="concurrent-requests"`...)
		}
		if rr.Window > 0 {
			b = appendParam(b, "w", ceilSeconds(rr.Window))
		}
		b = c.appendPK(b, rr)
	}
	if n > 0 {
		v := ""
		if c.pkSecret == nil && c.policyFields != nil {
			v = c.policyFields.intern(b)
		} else {
			v = string(b) // a partition key per client: nothing to share
		}
		h[hdrPolicy] = []string{v}
	}

	b = buf[:0]
	n = 0
	var maxT int64 = -1
	for i := range d.Rules {
		rr := &d.Rules[i]
		if !counted(rr) || !c.allRules && i != show {
			continue
		}
		if n > 0 {
			b = append(b, ", "...)
		}
		n++
		b = c.appendName(b, rr)
		b = appendParam(b, "r", max(rr.Remaining, 0))
		if t := resetSeconds(d, rr); t >= 0 {
			b = appendParam(b, "t", t)
			maxT = max(maxT, t)
		}
		b = c.appendPK(b, rr)
	}
	if n > 0 {
		h[hdrRateLimit] = []string{string(b)}
	}

	retry := int64(-1)
	if !d.Allowed && d.RetryAfter != engine.Never {
		retry = max(ceilSeconds(d.RetryAfter), maxT)
		setField(h, hdrRetryAfter, strconv.FormatInt(retry, 10))
	}

	if c.legacy && show >= 0 {
		rr := &d.Rules[show]
		setField(h, hdrLimit, strconv.FormatInt(min(rr.Limit, maxSFInt), 10))
		setField(h, hdrRemaining, strconv.FormatInt(min(max(rr.Remaining, 0), maxSFInt), 10))
		if t := resetSeconds(d, rr); t >= 0 {
			setField(h, hdrReset, strconv.FormatInt(t, 10))
		}
	}
	return retry
}

// resetSeconds is a RateLimit item's t for rr, or -1 for none: for a rule that refused the
// request its retry-after (none when it can never pass); for a rule that allowed it, the
// time until its key is back to full, except on a refused request, where t would point
// past Retry-After while that rule is not what the client waits for, and for a
// concurrency rule, whose quota comes back when requests finish, not at a time (its
// reset is when the last lease would expire unreleased).
func resetSeconds(d *engine.Decision, rr *engine.RuleResult) int64 {
	switch {
	case !rr.Allowed && rr.RetryAfter == engine.Never:
		return -1
	case !rr.Allowed:
		return ceilSeconds(rr.RetryAfter)
	case !d.Allowed, rr.Algorithm == "concurrency":
		return -1
	default:
		return ceilSeconds(rr.ResetAfter)
	}
}

// closest returns the index of the rule RateLimit shows by default, or -1 when no rule
// has a counter. On a denial it is the refusing rule with the longest wait (Never longest
// of all), so that its t is the Retry-After; otherwise the rule with the lowest
// remaining/limit, the first of equals.
func (c *config) closest(d *engine.Decision) int {
	best := -1
	for i := range d.Rules {
		rr := &d.Rules[i]
		if !counted(rr) {
			continue
		}
		if !d.Allowed {
			if rr.Allowed {
				continue
			}
			if best < 0 || longerWait(rr.RetryAfter, d.Rules[best].RetryAfter) {
				best = i
			}
			continue
		}
		if best < 0 || lowerShare(rr, &d.Rules[best]) {
			best = i
		}
	}
	return best
}

func longerWait(a, b time.Duration) bool {
	if b == engine.Never {
		return false
	}
	return a == engine.Never || a > b
}

// lowerShare reports whether a.Remaining/a.Limit < b.Remaining/b.Limit, exactly.
func lowerShare(a, b *engine.RuleResult) bool {
	ah, al := bits.Mul64(uint64(max(a.Remaining, 0)), uint64(b.Limit))
	bh, bl := bits.Mul64(uint64(max(b.Remaining, 0)), uint64(a.Limit))
	return ah < bh || ah == bh && al < bl
}

// ceilSeconds is d in whole seconds rounded up, capped to an RFC 9651 Integer.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return min((int64(d)+int64(time.Second)-1)/int64(time.Second), maxSFInt)
}

// itemName returns the quota policy name of rr.
func (c *config) itemName(rr *engine.RuleResult) string {
	if c.shortNames {
		return rr.Rule
	}
	return rr.Policy + "." + rr.Rule
}

// appendName appends rr's quota policy name as an RFC 9651 String.
func (c *config) appendName(b []byte, rr *engine.RuleResult) []byte {
	b = append(b, '"')
	if !c.shortNames {
		b = appendSFChars(b, rr.Policy)
		b = append(b, '.')
	}
	b = appendSFChars(b, rr.Rule)
	return append(b, '"')
}

// appendSFChars appends s as the inside of an RFC 9651 String: '"' and '\' escaped, and
// any byte outside printable ASCII (which a String cannot hold) as '?'. Policy and rule
// names are printable ASCII; the replacement only keeps a field valid whatever happens.
func appendSFChars(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '"' || ch == '\\':
			b = append(b, '\\', ch)
		case ch < 0x20 || ch > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, ch)
		}
	}
	return b
}

// appendParam appends ;key=v with v capped to an RFC 9651 Integer.
func appendParam(b []byte, key string, v int64) []byte {
	b = append(b, ';')
	b = append(b, key...)
	b = append(b, '=')
	return strconv.AppendInt(b, min(v, maxSFInt), 10)
}

// appendPK appends ;pk=:<base64>: when partition keys are on: the first pkBytes of
// HMAC-SHA256(secret, the counter's key). The counter key holds request data (an address,
// a user name); the secret keeps it from being recovered by hashing guesses.
func (c *config) appendPK(b []byte, rr *engine.RuleResult) []byte {
	if c.pkSecret == nil {
		return b
	}
	m := hmac.New(sha256.New, c.pkSecret)
	m.Write([]byte(rr.Key))
	var sum [sha256.Size]byte
	b = append(b, ";pk=:"...)
	b = base64.StdEncoding.AppendEncode(b, m.Sum(sum[:0])[:pkBytes])
	return append(b, ':')
}

// Headers writes to h the fields Middleware sets for d: RateLimit-Policy and RateLimit for
// the enforcing rules that applied, Retry-After when d denies, and the X-RateLimit fields
// with WithLegacyHeaders. Of opts only those that shape the fields count (WithAllRules,
// WithShortNames, WithLegacyHeaders, WithPartitionKeys). It is for servers that decide
// outside Middleware, such as a gateway's rate limit service returning headers for the
// gateway to add.
func Headers(h http.Header, d *engine.Decision, opts ...Option) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	c.setHeaders(h, d)
}
