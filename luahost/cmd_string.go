package luahost

import (
	"math"
	"math/big"
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

// SET and GETEX flags, as Redis 7.0's parseExtendedStringArgumentsOrReply
// names them.
const (
	setNX = 1 << iota
	setXX
	setGet
	setKeepTTL
	setPersist
	setEX
	setPX
	setEXAT
	setPXAT
)

// parseSetOptions parses the options of SET key value [NX|XX] [GET] [EX
// s|PX ms|EXAT s|PXAT ms|KEEPTTL] (getex false) or of GETEX key [EX s|PX
// ms|EXAT s|PXAT ms|PERSIST] (getex true), as Redis 7.0 does: a repeated
// option is accepted (the last expiry wins), a conflicting one is a syntax
// error.
func parseSetOptions(opts []string, getex bool) (flags int, expire string, err *ErrorReply) {
	const anyExpire = setKeepTTL | setPersist | setEX | setPX | setEXAT | setPXAT
	for j := 0; j < len(opts); j++ {
		opt := lowerOption(opts[j])
		hasNext := j < len(opts)-1
		var flag int
		switch opt {
		case "nx", "xx", "get", "keepttl":
			if getex {
				return 0, "", errSyntax()
			}
		case "persist":
			if !getex {
				return 0, "", errSyntax()
			}
		}
		switch {
		case opt == "nx" && flags&setXX == 0:
			flags |= setNX
		case opt == "xx" && flags&setNX == 0:
			flags |= setXX
		case opt == "get":
			flags |= setGet
		case opt == "keepttl" && flags&(anyExpire&^setKeepTTL) == 0:
			flags |= setKeepTTL
		case opt == "persist" && flags&(anyExpire&^setPersist) == 0:
			flags |= setPersist
		case opt == "ex" && hasNext:
			flag = setEX
		case opt == "px" && hasNext:
			flag = setPX
		case opt == "exat" && hasNext:
			flag = setEXAT
		case opt == "pxat" && hasNext:
			flag = setPXAT
		default:
			return 0, "", errSyntax()
		}
		if flag != 0 {
			if flags&(anyExpire&^flag) != 0 {
				return 0, "", errSyntax()
			}
			flags |= flag
			j++
			expire = opts[j]
		}
	}
	return flags, expire, nil
}

// expireTime is Redis 7.0's getExpireMillisecondsOrReply: the absolute
// expire time (Unix ms) that expire gives under flags (EX and PX are
// relative to now, EX and EXAT in seconds), or the error name's command
// replies.
func expireTime(c *cmdCtx, expire string, flags int, name string) (int64, *ErrorReply) {
	ms, ok := parseInt(expire)
	if !ok {
		return 0, errNotInt()
	}
	seconds := flags&(setEX|setEXAT) != 0
	if ms <= 0 || (seconds && ms > math.MaxInt64/1000) {
		return 0, errExpireTime(name)
	}
	if seconds {
		ms *= 1000
	}
	if flags&(setEX|setPX) != 0 {
		ms += c.now // wraps around on overflow, as it does in Redis
	}
	if ms <= 0 {
		return 0, errExpireTime(name)
	}
	return ms, nil
}

// setString stores value under key as SET does: over any value of any
// type, dropping the TTL unless keepTTL; when is a new expire time (0:
// none).
func setString(c *cmdCtx, key, value string, keepTTL bool, when int64) {
	e := c.lookup(key)
	switch {
	case e == nil:
		e = newEntry(kindString)
		e.str = value
		c.ks.add(key, e, c.now)
	default:
		e.kind, e.str, e.obj = kindString, value, nil
		if !keepTTL {
			e.setTTL(false, 0)
		}
	}
	if when != 0 {
		e.expires, e.expireAt = true, when
	}
}

func cmdSet(c *cmdCtx, args []string) any {
	flags, expire, err := parseSetOptions(args[3:], false)
	if err != nil {
		return err
	}
	return setGeneric(c, args[1], args[2], flags, expire, "set", statusReply("OK"), nil)
}

func cmdSetex(c *cmdCtx, args []string) any {
	return setGeneric(c, args[1], args[3], setEX, args[2], "setex", statusReply("OK"), nil)
}

func cmdPsetex(c *cmdCtx, args []string) any {
	return setGeneric(c, args[1], args[3], setPX, args[2], "psetex", statusReply("OK"), nil)
}

func cmdSetnx(c *cmdCtx, args []string) any {
	return setGeneric(c, args[1], args[2], setNX, "", "setnx", int64(1), int64(0))
}

// setGeneric is Redis 7.0's setGenericCommand: it checks the expire time,
// then (GET) the old value's type, then NX/XX, and replies ok, abort when
// NX/XX stopped it, or the old value (GET).
func setGeneric(c *cmdCtx, key, value string, flags int, expire, name string, ok, abort any) any {
	var when int64
	if flags&(setEX|setPX|setEXAT|setPXAT) != 0 {
		var err *ErrorReply
		if when, err = expireTime(c, expire, flags, name); err != nil {
			return err
		}
	}
	e := c.lookup(key)
	if flags&setGet != 0 {
		if e != nil && e.kind != kindString {
			return errWrongType()
		}
		ok, abort = nil, nil
		if e != nil {
			ok, abort = e.str, e.str
		}
	}
	if (flags&setNX != 0 && e != nil) || (flags&setXX != 0 && e == nil) {
		return abort
	}
	setString(c, key, value, flags&setKeepTTL != 0, when)
	return ok
}

func cmdGetset(c *cmdCtx, args []string) any {
	old := cmdGet(c, args)
	if _, ok := old.(*ErrorReply); ok {
		return old
	}
	setString(c, args[1], args[2], false, 0)
	return old
}

func cmdGetdel(c *cmdCtx, args []string) any {
	old := cmdGet(c, args)
	if _, ok := old.(string); ok {
		c.ks.del(args[1])
	}
	return old
}

// cmdGetex is GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST], in Redis
// 7.0's order: options, the key (missing: nil, whatever the expire time),
// its type, then the expire time. An EXAT or PXAT at or before now deletes
// the key.
func cmdGetex(c *cmdCtx, args []string) any {
	flags, expire, err := parseSetOptions(args[2:], true)
	if err != nil {
		return err
	}
	e, err := c.lookupKind(args[1], kindString)
	if err != nil {
		return err
	}
	if e == nil {
		return nil
	}
	v := e.str
	switch {
	case flags&(setEX|setPX|setEXAT|setPXAT) != 0:
		when, err := expireTime(c, expire, flags, "getex")
		if err != nil {
			return err
		}
		if when <= c.now {
			c.ks.del(args[1])
		} else {
			e.expires, e.expireAt = true, when
		}
	case flags&setPersist != 0:
		e.expires, e.expireAt = false, 0
	}
	return v
}

func cmdMset(c *cmdCtx, args []string) any { return msetGeneric(c, args, false) }
func cmdMsetnx(c *cmdCtx, args []string) any {
	return msetGeneric(c, args, true)
}

// msetGeneric is MSET (replies OK) and MSETNX (sets nothing and replies 0
// when any key exists, else 1).
func msetGeneric(c *cmdCtx, args []string, nx bool) any {
	if len(args)%2 == 0 {
		return errArity(lowerASCII(args[0]))
	}
	if nx {
		for i := 1; i < len(args); i += 2 {
			if c.lookup(args[i]) != nil {
				return int64(0)
			}
		}
	}
	for i := 1; i < len(args); i += 2 {
		setString(c, args[i], args[i+1], false, 0)
	}
	if nx {
		return int64(1)
	}
	return statusReply("OK")
}

// maxStringLen is Redis's default proto-max-bulk-len, the longest string
// APPEND may build.
const maxStringLen = 512 << 20

func cmdAppend(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindString)
	if err != nil {
		return err
	}
	if e == nil {
		c.ks.add(args[1], stringEntry(args[2]), c.now)
		return int64(len(args[2]))
	}
	if len(e.str)+len(args[2]) > maxStringLen {
		return errorf("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
	}
	e.str += args[2]
	return int64(len(e.str))
}

func cmdStrlen(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindString)
	if err != nil {
		return err
	}
	if e == nil {
		return int64(0)
	}
	return int64(len(e.str))
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
		c.ks.add(key, stringEntry(s), c.now)
	} else {
		e.str = s
	}
	return v
}

// addOverflows reports whether a+b leaves int64, as Redis checks it.
func addOverflows(a, b int64) bool {
	return (b < 0 && a < 0 && b < math.MinInt64-a) || (b > 0 && a > 0 && b > math.MaxInt64-a)
}

// cmdIncrbyfloat adds in long double (see longdouble.go), keeps the TTL and
// replies with the new value as Redis stores it.
func cmdIncrbyfloat(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindString)
	if err != nil {
		return err
	}
	cur := new(big.Float)
	if e != nil {
		var ok bool
		if cur, ok = parseLongDouble(e.str); !ok {
			return errNotFloat()
		}
	}
	incr, ok := parseLongDouble(args[2])
	if !ok {
		return errNotFloat()
	}
	sum, ok := ldAdd(cur, incr)
	if !ok {
		return errorf("ERR increment would produce NaN or Infinity")
	}
	s := formatLongDoubleHuman(sum)
	if e == nil {
		c.ks.add(args[1], stringEntry(s), c.now)
	} else {
		e.str = s
	}
	return s
}
