package luahost

import (
	"math/big"
	"strconv"
)

func cmdHget(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindHash)
	if err != nil {
		return err
	}
	if e == nil {
		return nil
	}
	if v, ok := e.hashGet(args[2]); ok {
		return v
	}
	return nil
}

func cmdHmget(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindHash)
	if err != nil {
		return err
	}
	out := &c.bulks
	out.reset()
	for _, f := range args[2:] {
		var v string
		var ok bool
		if e != nil {
			v, ok = e.hashGet(f)
		}
		out.add(v, ok)
	}
	return out
}

// hashForWrite returns key's hash, creating an empty one if the key is
// missing.
func hashForWrite(c *cmdCtx, key string) (*entry, *ErrorReply) {
	e, err := c.lookupKind(key, kindHash)
	if err != nil {
		return nil, err
	}
	if e == nil {
		e = newEntry(kindHash)
		c.ks.add(key, e, c.now)
	}
	return e, nil
}

// cmdHset is HSET (replies with the number of new fields) and HMSET
// (replies OK).
func cmdHset(c *cmdCtx, args []string) any {
	if len(args)%2 == 1 {
		return errArity(lowerASCII(args[0]))
	}
	e, err := hashForWrite(c, args[1])
	if err != nil {
		return err
	}
	created := int64(e.hashSetPairs(args[2:]))
	if equalFoldASCII(args[0], "hmset") {
		return statusReply("OK")
	}
	return created
}

func cmdHdel(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindHash)
	if err != nil {
		return err
	}
	if e == nil {
		return int64(0)
	}
	var n int64
	for _, f := range args[2:] {
		if e.hashDel(f) {
			n++
			if e.hashLen() == 0 {
				c.ks.del(args[1])
				break
			}
		}
	}
	return n
}

func cmdHgetall(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindHash)
	if err != nil {
		return err
	}
	if e == nil {
		return []any{}
	}
	out := make([]any, 0, 2*e.hashLen())
	e.hashEach(func(f, v string) { out = append(out, f, v) })
	return out
}

func cmdHincrby(c *cmdCtx, args []string) any {
	by, ok := parseInt(args[3])
	if !ok {
		return errNotInt()
	}
	e, err := hashForWrite(c, args[1])
	if err != nil {
		return err
	}
	var v int64
	if s, found := e.hashGet(args[2]); found {
		if v, ok = parseInt(s); !ok {
			return errorf("ERR hash value is not an integer")
		}
	}
	if addOverflows(v, by) {
		return errOverflow()
	}
	v += by
	e.hashSet(args[2], strconv.FormatInt(v, 10))
	return v
}

func cmdHlen(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindHash)
	if err != nil {
		return err
	}
	if e == nil {
		return int64(0)
	}
	return int64(e.hashLen())
}

func cmdHexists(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindHash)
	if err != nil {
		return err
	}
	if e == nil {
		return int64(0)
	}
	if _, ok := e.hashGet(args[2]); ok {
		return int64(1)
	}
	return int64(0)
}

// cmdHincrbyfloat is HINCRBYFLOAT key field increment, in long double (see
// longdouble.go), checked in Redis 7.0's order: the increment, the key's
// type, the field's value, the sum.
func cmdHincrbyfloat(c *cmdCtx, args []string) any {
	incr, ok := parseLongDouble(args[3])
	if !ok {
		return errNotFloat()
	}
	if incr.IsInf() {
		return errorf("ERR value is NaN or Infinity")
	}
	e, err := hashForWrite(c, args[1])
	if err != nil {
		return err
	}
	cur := new(big.Float)
	if s, found := e.hashGet(args[2]); found {
		if cur, ok = parseLongDouble(s); !ok {
			return errorf("ERR hash value is not a float")
		}
	}
	sum, ok := ldAdd(cur, incr)
	if !ok {
		return errorf("ERR increment would produce NaN or Infinity")
	}
	s := formatLongDoubleHuman(sum)
	e.hashSet(args[2], s)
	return s
}

func cmdHsetnx(c *cmdCtx, args []string) any {
	e, err := hashForWrite(c, args[1])
	if err != nil {
		return err
	}
	if _, found := e.hashGet(args[2]); found {
		return int64(0)
	}
	e.hashSet(args[2], args[3])
	return int64(1)
}

func cmdHkeys(c *cmdCtx, args []string) any { return hashColumn(c, args[1], true) }
func cmdHvals(c *cmdCtx, args []string) any { return hashColumn(c, args[1], false) }

// hashColumn lists a hash's fields or its values, in HGETALL's order.
func hashColumn(c *cmdCtx, key string, fields bool) any {
	e, err := c.lookupKind(key, kindHash)
	if err != nil {
		return err
	}
	if e == nil {
		return []any{}
	}
	out := make([]any, 0, e.hashLen())
	e.hashEach(func(f, v string) {
		if fields {
			out = append(out, f)
		} else {
			out = append(out, v)
		}
	})
	return out
}

func cmdHstrlen(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindHash)
	if err != nil {
		return err
	}
	if e == nil {
		return int64(0)
	}
	v, _ := e.hashGet(args[2])
	return int64(len(v))
}
