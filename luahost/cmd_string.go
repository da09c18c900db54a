package luahost

import (
	"math"
	"strconv"
)

func cmdGet(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindString)
	if err != nil {
		return err
	}
	if e == nil {
		return nil
	}
	return e.str
}

func cmdMget(c *cmdCtx, args []string) any {
	out := make([]any, len(args)-1)
	for i, k := range args[1:] {
		if e := c.lookup(k); e != nil && e.kind == kindString {
			out[i] = e.str
		}
	}
	return out
}

// SET flags, as Redis 7.0's parseExtendedStringArgumentsOrReply names them.
const (
	setNX = 1 << iota
	setXX
	setGet
	setKeepTTL
	setEX
	setPX
	setEXAT
	setPXAT
)

// cmdSet is SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL],
// with Redis 7.0's option parsing (a repeated option is accepted; a
// conflicting one is a syntax error).
func cmdSet(c *cmdCtx, args []string) any {
	flags := 0
	var expire string
	for j := 3; j < len(args); j++ {
		opt := lowerASCII(args[j])
		hasNext := j < len(args)-1
		const anyExpire = setKeepTTL | setEX | setPX | setEXAT | setPXAT
		switch {
		case opt == "nx" && flags&setXX == 0:
			flags |= setNX
		case opt == "xx" && flags&setNX == 0:
			flags |= setXX
		case opt == "get":
			flags |= setGet
		case opt == "keepttl" && flags&(anyExpire&^setKeepTTL) == 0:
			flags |= setKeepTTL
		case opt == "ex" && flags&(anyExpire&^setEX) == 0 && hasNext:
			flags |= setEX
			j++
			expire = args[j]
		case opt == "px" && flags&(anyExpire&^setPX) == 0 && hasNext:
			flags |= setPX
			j++
			expire = args[j]
		case opt == "exat" && flags&(anyExpire&^setEXAT) == 0 && hasNext:
			flags |= setEXAT
			j++
			expire = args[j]
		case opt == "pxat" && flags&(anyExpire&^setPXAT) == 0 && hasNext:
			flags |= setPXAT
			j++
			expire = args[j]
		default:
			return errSyntax()
		}
	}
	var when int64
	if flags&(setEX|setPX|setEXAT|setPXAT) != 0 {
		ms, ok := parseInt(expire)
		if !ok {
			return errNotInt()
		}
		seconds := flags&(setEX|setEXAT) != 0
		if ms <= 0 || (seconds && ms > math.MaxInt64/1000) {
			return errExpireTime("set")
		}
		if seconds {
			ms *= 1000
		}
		if flags&(setEX|setPX) != 0 {
			ms += c.now
		}
		if ms <= 0 {
			return errExpireTime("set")
		}
		when = ms
	}
	var reply any = statusReply("OK")
	e := c.lookup(args[1])
	if flags&setGet != 0 {
		if e != nil && e.kind != kindString {
			return errWrongType()
		}
		reply = nil
		if e != nil {
			reply = e.str
		}
	}
	if (flags&setNX != 0 && e != nil) || (flags&setXX != 0 && e == nil) {
		if flags&setGet != 0 {
			return reply
		}
		return nil
	}
	switch {
	case e == nil:
		e = &entry{kind: kindString, str: args[2]}
		c.ks.add(args[1], e, c.now)
	case flags&setKeepTTL != 0:
		*e = entry{kind: kindString, str: args[2], expires: e.expires, expireAt: e.expireAt}
	default:
		*e = entry{kind: kindString, str: args[2]}
	}
	if when != 0 {
		e.expires, e.expireAt = true, when
	}
	return reply
}

func cmdIncr(c *cmdCtx, args []string) any { return incrDecr(c, args[1], 1) }
func cmdDecr(c *cmdCtx, args []string) any { return incrDecr(c, args[1], -1) }

func cmdIncrby(c *cmdCtx, args []string) any {
	n, ok := parseInt(args[2])
	if !ok {
		return errNotInt()
	}
	return incrDecr(c, args[1], n)
}

func cmdDecrby(c *cmdCtx, args []string) any {
	n, ok := parseInt(args[2])
	if !ok {
		return errNotInt()
	}
	if n == math.MinInt64 {
		return errorf("ERR decrement would overflow")
	}
	return incrDecr(c, args[1], -n)
}

// incrDecr adds by to the integer at key (0 when missing), keeping its TTL.
func incrDecr(c *cmdCtx, key string, by int64) any {
	e, err := c.lookupKind(key, kindString)
	if err != nil {
		return err
	}
	var v int64
	if e != nil {
		var ok bool
		if v, ok = parseInt(e.str); !ok {
			return errNotInt()
		}
	}
	if addOverflows(v, by) {
		return errOverflow()
	}
	v += by
	s := strconv.FormatInt(v, 10)
	if e == nil {
		c.ks.add(key, &entry{kind: kindString, str: s}, c.now)
	} else {
		e.str = s
	}
	return v
}

// addOverflows reports whether a+b leaves int64, as Redis checks it.
func addOverflows(a, b int64) bool {
	return (b < 0 && a < 0 && b < math.MinInt64-a) || (b > 0 && a > 0 && b > math.MaxInt64-a)
}
