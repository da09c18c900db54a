package luahost

import (
	"math"
)

func cmdPing(c *cmdCtx, args []string) any {
	switch len(args) {
	case 1:
		return statusReply("PONG")
	case 2:
		return args[1]
	}
	return errArity("ping")
}

func cmdEcho(c *cmdCtx, args []string) any { return args[1] }

// cmdTime answers the host's clock: seconds and microseconds, as bulk
// strings.
func cmdTime(c *cmdCtx, args []string) any {
	us := c.h.clock.Now().UnixMicro()
	sec, usec := us/1e6, us%1e6
	if usec < 0 {
		sec, usec = sec-1, usec+1e6
	}
	return timeReply{sec, usec}
}

func cmdDel(c *cmdCtx, args []string) any {
	var n int64
	for _, k := range args[1:] {
		if c.lookup(k) != nil {
			c.ks.del(k)
			n++
		}
	}
	return n
}

// cmdRename moves src's value and expiry to dst, replacing what dst held.
func cmdRename(c *cmdCtx, args []string) any {
	src, dst := args[1], args[2]
	e := c.lookup(src)
	if e == nil {
		return errorf("ERR no such key")
	}
	if src != dst {
		c.ks.del(src)
		c.ks.add(dst, e, c.now)
	}
	return statusReply("OK")
}

// cmdRenamenx renames src to dst only when dst does not exist: 1 when it did, else 0.
func cmdRenamenx(c *cmdCtx, args []string) any {
	src, dst := args[1], args[2]
	e := c.lookup(src)
	if e == nil {
		return errorf("ERR no such key")
	}
	if c.lookup(dst) != nil {
		return int64(0)
	}
	c.ks.del(src)
	c.ks.add(dst, e, c.now)
	return int64(1)
}

func cmdExists(c *cmdCtx, args []string) any {
	var n int64
	for _, k := range args[1:] {
		if c.lookup(k) != nil {
			n++
		}
	}
	return n
}

func cmdType(c *cmdCtx, args []string) any {
	e := c.lookup(args[1])
	if e == nil {
		return statusReply("none")
	}
	return statusReply(e.kind.String())
}

const (
	unitSeconds = 1000
	unitMillis  = 1
)

func cmdExpire(c *cmdCtx, args []string) any { return expireGeneric(c, args, c.now, unitSeconds) }
func cmdPexpire(c *cmdCtx, args []string) any {
	return expireGeneric(c, args, c.now, unitMillis)
}
func cmdExpireat(c *cmdCtx, args []string) any { return expireGeneric(c, args, 0, unitSeconds) }
func cmdPexpireat(c *cmdCtx, args []string) any {
	return expireGeneric(c, args, 0, unitMillis)
}

// expireGeneric is Redis 7.0's expireGenericCommand: EXPIRE, PEXPIRE,
// EXPIREAT and PEXPIREAT with the NX/XX/GT/LT options. An expire time at or
// before now deletes the key.
func expireGeneric(c *cmdCtx, args []string, base int64, unit int64) any {
	var nx, xx, gt, lt bool
	for _, opt := range args[3:] {
		switch lowerOption(opt) {
		case "nx":
			nx = true
		case "xx":
			xx = true
		case "gt":
			gt = true
		case "lt":
			lt = true
		default:
			return errorf("ERR Unsupported option " + opt)
		}
	}
	if (nx && xx) || (nx && gt) || (nx && lt) {
		return errorf("ERR NX and XX, GT or LT options at the same time are not compatible")
	}
	if gt && lt {
		return errorf("ERR GT and LT options at the same time are not compatible")
	}
	when, ok := parseInt(args[2])
	if !ok {
		return errNotInt()
	}
	if unit == unitSeconds {
		if when > math.MaxInt64/1000 || when < math.MinInt64/1000 {
			return errExpireTime(lowerASCII(args[0]))
		}
		when *= 1000
	}
	if when > math.MaxInt64-base {
		return errExpireTime(lowerASCII(args[0]))
	}
	when += base
	e := c.lookup(args[1])
	if e == nil {
		return int64(0)
	}
	cur := int64(-1)
	if e.expires {
		cur = e.expireAt
	}
	switch {
	case nx && cur != -1,
		xx && cur == -1,
		gt && (cur == -1 || when <= cur),
		lt && cur != -1 && when >= cur:
		return int64(0)
	}
	if when <= c.now {
		c.ks.del(args[1])
		return int64(1)
	}
	e.expires, e.expireAt = true, when
	return int64(1)
}

func cmdTTL(c *cmdCtx, args []string) any  { return ttlGeneric(c, args[1], false, false) }
func cmdPTTL(c *cmdCtx, args []string) any { return ttlGeneric(c, args[1], true, false) }
func cmdExpiretime(c *cmdCtx, args []string) any {
	return ttlGeneric(c, args[1], false, true)
}
func cmdPexpiretime(c *cmdCtx, args []string) any {
	return ttlGeneric(c, args[1], true, true)
}

// ttlGeneric is Redis 7.0's ttlGenericCommand: -2 for a missing key, -1 for
// a key without expiry, and otherwise the time left (abs: the expire time as
// a Unix time) in milliseconds, or in seconds rounded to nearest.
//
// Redis rounds with (ttl+500)/1000 in a long long, which overflows for an
// expire time within 500ms of 2^63 (PEXPIREAT k 9223372036854775807); gcc,
// knowing ttl >= 0, divides unsigned, so Redis on x86-64 answers the
// quotient of the true sum (9223372036854776), as the host does.
func ttlGeneric(c *cmdCtx, key string, ms, abs bool) any {
	e := c.lookup(key)
	if e == nil {
		return int64(-2)
	}
	if !e.expires {
		return int64(-1)
	}
	ttl := e.expireAt
	if !abs {
		ttl -= c.now
	}
	ttl = max(ttl, 0)
	if ms {
		return ttl
	}
	return int64((uint64(ttl) + 500) / 1000)
}

func cmdPersist(c *cmdCtx, args []string) any {
	e := c.lookup(args[1])
	if e == nil || !e.expires {
		return int64(0)
	}
	e.expires, e.expireAt = false, 0
	return int64(1)
}
