package luahost

import "strconv"

func cmdHget(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindHash)
	if err != nil {
		return err
	}
	if e == nil {
		return nil
	}
	if v, ok := e.hash.get(args[2]); ok {
		return v
	}
	return nil
}

func cmdHmget(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindHash)
	if err != nil {
		return err
	}
	out := make([]any, len(args)-2)
	if e != nil {
		for i, f := range args[2:] {
			if v, ok := e.hash.get(f); ok {
				out[i] = v
			}
		}
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
		e = &entry{kind: kindHash, hash: &hash{}}
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
	var created int64
	for i := 2; i < len(args); i += 2 {
		if e.hash.set(args[i], args[i+1]) {
			created++
		}
	}
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
		if e.hash.del(f) {
			n++
			if e.hash.len() == 0 {
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
	out := make([]any, 0, 2*e.hash.len())
	for i, f := range e.hash.fields {
		out = append(out, f, e.hash.values[i])
	}
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
	if s, found := e.hash.get(args[2]); found {
		if v, ok = parseInt(s); !ok {
			return errorf("ERR hash value is not an integer")
		}
	}
	if addOverflows(v, by) {
		return errOverflow()
	}
	v += by
	e.hash.set(args[2], strconv.FormatInt(v, 10))
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
	return int64(e.hash.len())
}

func cmdHexists(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindHash)
	if err != nil {
		return err
	}
	if e == nil {
		return int64(0)
	}
	if _, ok := e.hash.get(args[2]); ok {
		return int64(1)
	}
	return int64(0)
}
