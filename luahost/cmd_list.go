package luahost

import "math"

// listLookup returns key's list entry, nil when the key is missing, or
// WRONGTYPE.
func listLookup(c *cmdCtx, key string) (*entry, *ErrorReply) { return c.lookupKind(key, kindList) }

func cmdLpush(c *cmdCtx, args []string) any  { return pushGeneric(c, args, true, false) }
func cmdRpush(c *cmdCtx, args []string) any  { return pushGeneric(c, args, false, false) }
func cmdLpushx(c *cmdCtx, args []string) any { return pushGeneric(c, args, true, true) }
func cmdRpushx(c *cmdCtx, args []string) any { return pushGeneric(c, args, false, true) }

// pushGeneric is LPUSH, RPUSH and (xx: only onto an existing list) LPUSHX
// and RPUSHX; it replies with the list's length.
func pushGeneric(c *cmdCtx, args []string, front, xx bool) any {
	e, err := listLookup(c, args[1])
	if err != nil {
		return err
	}
	if e == nil {
		if xx {
			return int64(0)
		}
		e = newEntry(kindList)
		e.obj = &list{}
		c.ks.add(args[1], e, c.now)
	}
	for _, v := range args[2:] {
		if front {
			e.asList().pushFront(v)
		} else {
			e.asList().pushBack(v)
		}
	}
	return int64(e.asList().len())
}

func cmdLpop(c *cmdCtx, args []string) any { return popGeneric(c, args, true) }
func cmdRpop(c *cmdCtx, args []string) any { return popGeneric(c, args, false) }

// popGeneric is LPOP and RPOP key [count]: one element (nil when the key is
// missing), or with a count an array of up to count (a nil array when the
// key is missing).
func popGeneric(c *cmdCtx, args []string, front bool) any {
	if len(args) > 3 {
		return errArity(lowerASCII(args[0]))
	}
	count := int64(-1)
	if len(args) == 3 {
		var ok bool
		if count, ok = parseInt(args[2]); !ok || count < 0 {
			return errorf("ERR value is out of range, must be positive")
		}
	}
	e, err := listLookup(c, args[1])
	if err != nil {
		return err
	}
	if e == nil {
		return nil
	}
	pop := func() string {
		if front {
			return e.asList().popFront()
		}
		return e.asList().popBack()
	}
	var reply any
	if count < 0 {
		reply = pop()
	} else {
		out := make([]any, 0, min(count, int64(e.asList().len())))
		for ; count > 0 && e.asList().len() > 0; count-- {
			out = append(out, pop())
		}
		reply = out
	}
	if e.asList().len() == 0 {
		c.ks.del(args[1])
	}
	return reply
}

func cmdLlen(c *cmdCtx, args []string) any {
	e, err := listLookup(c, args[1])
	if err != nil {
		return err
	}
	if e == nil {
		return int64(0)
	}
	return int64(e.asList().len())
}

func cmdLrange(c *cmdCtx, args []string) any {
	start, end, err := parseIndexes(args[2], args[3])
	if err != nil {
		return err
	}
	e, err := listLookup(c, args[1])
	if err != nil {
		return err
	}
	if e == nil {
		return []any{}
	}
	s, en, ok := clampRanks(start, end, e.asList().len())
	if !ok {
		return []any{}
	}
	out := make([]any, 0, en-s+1)
	for i := s; i <= en; i++ {
		out = append(out, e.asList().at(i))
	}
	return out
}

func cmdLtrim(c *cmdCtx, args []string) any {
	start, end, err := parseIndexes(args[2], args[3])
	if err != nil {
		return err
	}
	e, err := listLookup(c, args[1])
	if err != nil {
		return err
	}
	if e == nil {
		return statusReply("OK")
	}
	s, en, ok := clampRanks(start, end, e.asList().len())
	if !ok {
		s, en = 1, 0
	}
	e.asList().trim(s, en)
	if e.asList().len() == 0 {
		c.ks.del(args[1])
	}
	return statusReply("OK")
}

// listIndex turns a Redis list index (negative from the tail) into a
// 0-based one, or ok=false when it is out of range.
func listIndex(index int64, n int) (int, bool) {
	if index < 0 {
		index += int64(n)
	}
	if index < 0 || index >= int64(n) {
		return 0, false
	}
	return int(index), true
}

// cmdLindex looks the key up before it parses the index, as Redis 7.0
// does: a missing key is nil whatever the index.
func cmdLindex(c *cmdCtx, args []string) any {
	e, err := listLookup(c, args[1])
	if err != nil {
		return err
	}
	if e == nil {
		return nil
	}
	index, ok := parseInt(args[2])
	if !ok {
		return errNotInt()
	}
	i, ok := listIndex(index, e.asList().len())
	if !ok {
		return nil
	}
	return e.asList().at(i)
}

func cmdLset(c *cmdCtx, args []string) any {
	e, err := listLookup(c, args[1])
	if err != nil {
		return err
	}
	if e == nil {
		return errorf("ERR no such key")
	}
	index, ok := parseInt(args[2])
	if !ok {
		return errNotInt()
	}
	i, ok := listIndex(index, e.asList().len())
	if !ok {
		return errorf("ERR index out of range")
	}
	e.asList().set(i, args[3])
	return statusReply("OK")
}

// cmdLrem is LREM key count element: removes up to count occurrences from
// the head (count > 0), up to -count from the tail (count < 0), or all.
func cmdLrem(c *cmdCtx, args []string) any {
	count, ok := parseInt(args[2])
	if !ok {
		return errNotInt()
	}
	e, err := listLookup(c, args[1])
	if err != nil {
		return err
	}
	if e == nil {
		return int64(0)
	}
	l := e.asList()
	var removed int64
	limit := count
	if count < 0 {
		limit = -count // stays negative for MinInt64: remove all, as Redis does
	}
	if count >= 0 {
		for i := 0; i < l.len(); {
			if l.at(i) != args[3] {
				i++
				continue
			}
			l.remove(i)
			removed++
			if limit != 0 && removed == limit {
				break
			}
		}
	} else {
		for i := l.len() - 1; i >= 0; i-- {
			if l.at(i) != args[3] {
				continue
			}
			l.remove(i)
			removed++
			if limit != math.MinInt64 && removed == limit {
				break
			}
		}
	}
	if l.len() == 0 {
		c.ks.del(args[1])
	}
	return removed
}

// cmdLinsert is LINSERT key BEFORE|AFTER pivot element: the new length, 0
// for a missing key, -1 when pivot is not in the list.
func cmdLinsert(c *cmdCtx, args []string) any {
	var after bool
	switch lowerOption(args[2]) {
	case "after":
		after = true
	case "before":
	default:
		return errSyntax()
	}
	e, err := listLookup(c, args[1])
	if err != nil {
		return err
	}
	if e == nil {
		return int64(0)
	}
	for i := 0; i < e.asList().len(); i++ {
		if e.asList().at(i) == args[3] {
			if after {
				i++
			}
			e.asList().insert(i, args[4])
			return int64(e.asList().len())
		}
	}
	return int64(-1)
}
