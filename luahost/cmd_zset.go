package luahost

import "math"

// ZADD input flags, as Redis 7.0's zaddGenericCommand names them.
const (
	zaddNX = 1 << iota
	zaddXX
	zaddGT
	zaddLT
	zaddIncr
)

func cmdZadd(c *cmdCtx, args []string) any    { return zaddGeneric(c, args, 0) }
func cmdZincrby(c *cmdCtx, args []string) any { return zaddGeneric(c, args, zaddIncr) }

// zaddGeneric is ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member ... and
// ZINCRBY key increment member, parsed as Redis 7.0 parses them: options,
// then every score (all-or-nothing), then the key's type.
func zaddGeneric(c *cmdCtx, args []string, flags int) any {
	ch := false
	i := 2
options:
	for ; i < len(args); i++ {
		switch lowerOption(args[i]) {
		case "nx":
			flags |= zaddNX
		case "xx":
			flags |= zaddXX
		case "ch":
			ch = true
		case "incr":
			flags |= zaddIncr
		case "gt":
			flags |= zaddGT
		case "lt":
			flags |= zaddLT
		default:
			break options
		}
	}
	incr, nx, xx := flags&zaddIncr != 0, flags&zaddNX != 0, flags&zaddXX != 0
	gt, lt := flags&zaddGT != 0, flags&zaddLT != 0
	elements := len(args) - i
	if elements%2 != 0 || elements == 0 {
		return errSyntax()
	}
	elements /= 2
	if nx && xx {
		return errorf("ERR XX and NX options at the same time are not compatible")
	}
	if (gt && nx) || (lt && nx) || (gt && lt) {
		return errorf("ERR GT, LT, and/or NX options at the same time are not compatible")
	}
	if incr && elements > 1 {
		return errorf("ERR INCR option supports a single increment-element pair")
	}
	scores := make([]float64, elements)
	for j := range scores {
		f, ok := parseFloat(args[i+2*j])
		if !ok {
			return errNotFloat()
		}
		scores[j] = f
	}
	e, err := c.lookupKind(args[1], kindZset)
	if err != nil {
		return err
	}
	var added, updated, processed int64
	var score float64
	if e == nil && !xx {
		e = newZsetEntry(args[i+1])
		c.ks.add(args[1], e, c.now)
	}
	if e != nil {
		z := e.zset()
		for j, s := range scores {
			member := args[i+2*j+1]
			score = s
			cur, exists := z.score(member)
			switch {
			case exists && nx:
				continue
			case exists:
				if incr {
					score += cur
					if math.IsNaN(score) {
						return errorf("ERR resulting score is not a number (NaN)")
					}
				}
				if (lt && score >= cur) || (gt && score <= cur) {
					continue
				}
				if score != cur {
					z.set(score, member)
					updated++
				}
				processed++
			case !xx:
				z.insert(score, member)
				added++
				processed++
			}
		}
	}
	if incr {
		if processed > 0 {
			return formatScore(score)
		}
		return nil
	}
	if ch {
		return added + updated
	}
	return added
}

func cmdZrem(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindZset)
	if err != nil {
		return err
	}
	if e == nil {
		return int64(0)
	}
	var n int64
	for _, m := range args[2:] {
		if e.zset().remove(m) {
			n++
			if e.zset().card() == 0 {
				c.ks.del(args[1])
				break
			}
		}
	}
	return n
}

func cmdZcard(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindZset)
	if err != nil {
		return err
	}
	if e == nil {
		return int64(0)
	}
	return int64(e.zset().card())
}

// parseScoreRange parses ZCOUNT-style bounds: a number, optionally after "("
// for an exclusive end; "-inf" and "+inf" work as strtod reads them.
func parseScoreRange(min, max string) (scoreRange, bool) {
	var r scoreRange
	var ok bool
	if len(min) > 0 && min[0] == '(' {
		r.minEx = true
		min = min[1:]
	}
	if r.min, ok = parseRangeFloat(min); !ok {
		return r, false
	}
	if len(max) > 0 && max[0] == '(' {
		r.maxEx = true
		max = max[1:]
	}
	if r.max, ok = parseRangeFloat(max); !ok {
		return r, false
	}
	return r, true
}

func cmdZcount(c *cmdCtx, args []string) any {
	r, ok := parseScoreRange(args[2], args[3])
	if !ok {
		return errMinMax()
	}
	e, err := c.lookupKind(args[1], kindZset)
	if err != nil {
		return err
	}
	if e == nil {
		return int64(0)
	}
	return int64(e.zset().count(&r))
}

func cmdZscore(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindZset)
	if err != nil {
		return err
	}
	if e == nil {
		return nil
	}
	if s, ok := e.zset().score(args[2]); ok {
		return formatScore(s)
	}
	return nil
}

func cmdZrank(c *cmdCtx, args []string) any    { return zrankGeneric(c, args, false) }
func cmdZrevrank(c *cmdCtx, args []string) any { return zrankGeneric(c, args, true) }

// zrankGeneric is ZRANK and (reverse: from the highest) ZREVRANK.
func zrankGeneric(c *cmdCtx, args []string, reverse bool) any {
	e, err := c.lookupKind(args[1], kindZset)
	if err != nil {
		return err
	}
	if e == nil {
		return nil
	}
	r, ok := e.zset().rank(args[2])
	if !ok {
		return nil
	}
	if reverse {
		r = e.zset().card() - 1 - r
	}
	return int64(r)
}

// cmdZmscore is ZMSCORE key member...: each member's score or nil.
func cmdZmscore(c *cmdCtx, args []string) any {
	e, err := c.lookupKind(args[1], kindZset)
	if err != nil {
		return err
	}
	out := make([]any, len(args)-2)
	if e != nil {
		for i, m := range args[2:] {
			if s, ok := e.zset().score(m); ok {
				out[i] = formatScore(s)
			}
		}
	}
	return out
}

// Range kinds and directions of Redis 7.0's zrangeGenericCommand.
const (
	rangeAuto = iota
	rangeRank
	rangeScore
)

const (
	dirAuto = iota
	dirForward
	dirReverse
)

func cmdZrange(c *cmdCtx, args []string) any { return zrangeGeneric(c, args, rangeAuto, dirAuto) }
func cmdZrevrange(c *cmdCtx, args []string) any {
	return zrangeGeneric(c, args, rangeRank, dirReverse)
}
func cmdZrangebyscore(c *cmdCtx, args []string) any {
	return zrangeGeneric(c, args, rangeScore, dirForward)
}
func cmdZrevrangebyscore(c *cmdCtx, args []string) any {
	return zrangeGeneric(c, args, rangeScore, dirReverse)
}

// zrangeGeneric serves ZRANGE key min max [BYSCORE] [REV] [LIMIT offset
// count] [WITHSCORES] and its older forms, as Redis 7.0 parses them. BYLEX is
// not implemented.
func zrangeGeneric(c *cmdCtx, args []string, kindOfRange, dir int) any {
	withScores := false
	offset, limit := int64(0), int64(-1)
	for j := 4; j < len(args); j++ {
		left := len(args) - j - 1
		opt := lowerOption(args[j])
		switch {
		case opt == "withscores":
			withScores = true
		case opt == "limit" && left >= 2:
			var ok bool
			if offset, ok = parseInt(args[j+1]); !ok {
				return errNotInt()
			}
			if limit, ok = parseInt(args[j+2]); !ok {
				return errNotInt()
			}
			j += 2
		case dir == dirAuto && opt == "rev":
			dir = dirReverse
		case kindOfRange == rangeAuto && opt == "byscore":
			kindOfRange = rangeScore
		case kindOfRange == rangeAuto && opt == "bylex":
			return errorf("ERR luahost does not implement ZRANGE BYLEX")
		default:
			return errSyntax()
		}
	}
	if dir == dirAuto {
		dir = dirForward
	}
	if kindOfRange == rangeAuto {
		kindOfRange = rangeRank
	}
	if limit != -1 && kindOfRange == rangeRank {
		return errorf("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
	}
	reverse := dir == dirReverse
	minArg, maxArg := args[2], args[3]
	if reverse && kindOfRange == rangeScore {
		minArg, maxArg = maxArg, minArg
	}
	var start, end int64
	var r scoreRange
	if kindOfRange == rangeRank {
		var ok bool
		if start, ok = parseInt(minArg); !ok {
			return errNotInt()
		}
		if end, ok = parseInt(maxArg); !ok {
			return errNotInt()
		}
	} else {
		var ok bool
		if r, ok = parseScoreRange(minArg, maxArg); !ok {
			return errMinMax()
		}
	}
	e, err := c.lookupKind(args[1], kindZset)
	if err != nil {
		return err
	}
	if e == nil {
		return []any{}
	}
	if kindOfRange == rangeRank {
		return zrangeByRank(e.zset(), start, end, withScores, reverse)
	}
	return zrangeByScore(e.zset(), &r, offset, limit, withScores, reverse)
}

// parseIndexes parses the start and stop of a range of ranks or list
// indexes.
func parseIndexes(start, stop string) (int64, int64, *ErrorReply) {
	s, ok := parseInt(start)
	if !ok {
		return 0, 0, errNotInt()
	}
	e, ok := parseInt(stop)
	if !ok {
		return 0, 0, errNotInt()
	}
	return s, e, nil
}

// clampRanks turns Redis start/stop indexes (negative from the end) into a
// valid inclusive 0-based range, or ok=false when it is empty.
func clampRanks(start, end int64, n int) (int, int, bool) {
	llen := int64(n)
	if start < 0 {
		start += llen
	}
	if end < 0 {
		end += llen
	}
	if start < 0 {
		start = 0
	}
	if start > end || start >= llen {
		return 0, 0, false
	}
	if end >= llen {
		end = llen - 1
	}
	return int(start), int(end), true
}

func zrangeByRank(z zset, start, end int64, withScores, reverse bool) any {
	s, e, ok := clampRanks(start, end, z.card())
	if !ok {
		return []any{}
	}
	n := e - s + 1
	out := make([]any, 0, n*(1+boolInt(withScores)))
	if reverse {
		s = z.card() - 1 - s
	}
	z.walk(s, reverse, func(member string, score float64) bool {
		out = append(out, member)
		if withScores {
			out = append(out, formatScore(score))
		}
		n--
		return n > 0
	})
	return out
}

// zrangeByScore lists members in r, skipping offset of them and returning
// at most limit (all when limit < 0; none when offset < 0), as Redis's
// genericZrangebyscoreCommand does.
func zrangeByScore(z zset, r *scoreRange, offset, limit int64, withScores, reverse bool) any {
	out := []any{}
	if offset > 0 && offset >= int64(z.card()) {
		return out
	}
	var x int
	if reverse {
		x = z.lastInRange(r)
	} else {
		x = z.firstInRange(r)
	}
	if x < 0 || offset < 0 || limit == 0 {
		return out
	}
	if reverse {
		x -= int(offset)
	} else {
		x += int(offset)
	}
	z.walk(x, reverse, func(member string, score float64) bool {
		if reverse && !r.gteMin(score) || !reverse && !r.lteMax(score) {
			return false
		}
		out = append(out, member)
		if withScores {
			out = append(out, formatScore(score))
		}
		limit--
		return limit != 0
	})
	return out
}

func cmdZremrangebyscore(c *cmdCtx, args []string) any {
	r, ok := parseScoreRange(args[2], args[3])
	if !ok {
		return errMinMax()
	}
	e, err := c.lookupKind(args[1], kindZset)
	if err != nil {
		return err
	}
	if e == nil {
		return int64(0)
	}
	n := e.zset().deleteRangeByScore(&r)
	if e.zset().card() == 0 {
		c.ks.del(args[1])
	}
	return int64(n)
}

func cmdZremrangebyrank(c *cmdCtx, args []string) any {
	start, end, err := parseIndexes(args[2], args[3])
	if err != nil {
		return err
	}
	e, err := c.lookupKind(args[1], kindZset)
	if err != nil {
		return err
	}
	if e == nil {
		return int64(0)
	}
	s, en, ok := clampRanks(start, end, e.zset().card())
	if !ok {
		return int64(0)
	}
	n := e.zset().deleteRangeByRank(s, en)
	if e.zset().card() == 0 {
		c.ks.del(args[1])
	}
	return int64(n)
}

func cmdZpopmin(c *cmdCtx, args []string) any { return zpopGeneric(c, args, false) }
func cmdZpopmax(c *cmdCtx, args []string) any { return zpopGeneric(c, args, true) }

// zpopGeneric is ZPOPMIN and ZPOPMAX key [count]: a flat member, score
// array, lowest (highest) first.
func zpopGeneric(c *cmdCtx, args []string, highest bool) any {
	if len(args) > 3 {
		return errSyntax()
	}
	count := int64(1)
	if len(args) == 3 {
		var ok bool
		if count, ok = parseInt(args[2]); !ok || count < 0 {
			return errorf("ERR value is out of range, must be positive")
		}
	}
	e, err := c.lookupKind(args[1], kindZset)
	if err != nil {
		return err
	}
	if e == nil || count == 0 {
		return []any{}
	}
	out := []any{}
	z := e.zset()
	for ; count > 0 && z.card() > 0; count-- {
		r := 0
		if highest {
			r = z.card() - 1
		}
		m, s := z.at(r)
		out = append(out, m, formatScore(s))
		z.deleteRangeByRank(r, r)
	}
	if e.zset().card() == 0 {
		c.ks.del(args[1])
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
