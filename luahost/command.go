package luahost

import (
	"sort"
	"strings"
)

// statusReply is a Redis status ("+OK"). Scripts see it as {ok=...}; Go
// callers get it as a plain string, as go-redis returns it.
type statusReply string

// A command's reply is one of: int64 (integer), string (bulk), nil (nil
// bulk), statusReply, []any (array of replies) or *ErrorReply.

// cmdCtx is what a command runs against.
type cmdCtx struct {
	h   *Host
	ks  *keyspace
	now int64 // Unix milliseconds that expiry is judged by
}

// lookup returns key's live entry, or nil.
func (c *cmdCtx) lookup(key string) *entry { return c.ks.lookup(key, c.now) }

// lookupKind returns key's live entry if it holds k, nil if the key is
// missing, and a WRONGTYPE error if it holds another type.
func (c *cmdCtx) lookupKind(key string, k kind) (*entry, *ErrorReply) {
	e := c.lookup(key)
	if e != nil && e.kind != k {
		return nil, errWrongType()
	}
	return e, nil
}

// command describes one Redis command as Redis's command table does.
type command struct {
	name  string // lower case, as error messages spell it
	arity int    // n: exactly n arguments including the name; -n: at least n
	// Key positions: arguments first..last (last < 0 counts from the end)
	// every step. first == 0: no keys.
	first, last, step int
	run               func(c *cmdCtx, args []string) any
}

// arityOK reports whether argc (including the command name) fits.
func (cmd *command) arityOK(argc int) bool {
	if cmd.arity >= 0 {
		return argc == cmd.arity
	}
	return argc >= -cmd.arity
}

// undeclaredKey returns the first key among args that is not in declared.
func (cmd *command) undeclaredKey(args, declared []string) (string, bool) {
	if cmd.first == 0 {
		return "", false
	}
	last := cmd.last
	if last < 0 {
		last += len(args)
	}
next:
	for i := cmd.first; i <= last && i < len(args); i += cmd.step {
		for _, d := range declared {
			if d == args[i] {
				continue next
			}
		}
		return args[i], true
	}
	return "", false
}

// commandTable holds every command the host implements, by lower-case name,
// with Redis 7.0's arity and key positions.
var commandTable = buildCommandTable(
	// server
	&command{"ping", -1, 0, 0, 0, cmdPing},
	&command{"echo", 2, 0, 0, 0, cmdEcho},
	&command{"time", 1, 0, 0, 0, cmdTime},
	// keys
	&command{"del", -2, 1, -1, 1, cmdDel},
	&command{"unlink", -2, 1, -1, 1, cmdDel},
	&command{"exists", -2, 1, -1, 1, cmdExists},
	&command{"touch", -2, 1, -1, 1, cmdExists},
	&command{"type", 2, 1, 1, 1, cmdType},
	&command{"expire", -3, 1, 1, 1, cmdExpire},
	&command{"pexpire", -3, 1, 1, 1, cmdPexpire},
	&command{"expireat", -3, 1, 1, 1, cmdExpireat},
	&command{"pexpireat", -3, 1, 1, 1, cmdPexpireat},
	&command{"ttl", 2, 1, 1, 1, cmdTTL},
	&command{"pttl", 2, 1, 1, 1, cmdPTTL},
	&command{"expiretime", 2, 1, 1, 1, cmdExpiretime},
	&command{"pexpiretime", 2, 1, 1, 1, cmdPexpiretime},
	&command{"persist", 2, 1, 1, 1, cmdPersist},
	// strings
	&command{"get", 2, 1, 1, 1, cmdGet},
	&command{"set", -3, 1, 1, 1, cmdSet},
	&command{"setex", 4, 1, 1, 1, cmdSetex},
	&command{"psetex", 4, 1, 1, 1, cmdPsetex},
	&command{"setnx", 3, 1, 1, 1, cmdSetnx},
	&command{"getset", 3, 1, 1, 1, cmdGetset},
	&command{"getdel", 2, 1, 1, 1, cmdGetdel},
	&command{"getex", -2, 1, 1, 1, cmdGetex},
	&command{"mget", -2, 1, -1, 1, cmdMget},
	&command{"mset", -3, 1, -1, 2, cmdMset},
	&command{"msetnx", -3, 1, -1, 2, cmdMsetnx},
	&command{"append", 3, 1, 1, 1, cmdAppend},
	&command{"strlen", 2, 1, 1, 1, cmdStrlen},
	&command{"incr", 2, 1, 1, 1, cmdIncr},
	&command{"decr", 2, 1, 1, 1, cmdDecr},
	&command{"incrby", 3, 1, 1, 1, cmdIncrby},
	&command{"decrby", 3, 1, 1, 1, cmdDecrby},
	&command{"incrbyfloat", 3, 1, 1, 1, cmdIncrbyfloat},
	// hashes
	&command{"hget", 3, 1, 1, 1, cmdHget},
	&command{"hmget", -3, 1, 1, 1, cmdHmget},
	&command{"hset", -4, 1, 1, 1, cmdHset},
	&command{"hmset", -4, 1, 1, 1, cmdHset},
	&command{"hsetnx", 4, 1, 1, 1, cmdHsetnx},
	&command{"hdel", -3, 1, 1, 1, cmdHdel},
	&command{"hgetall", 2, 1, 1, 1, cmdHgetall},
	&command{"hkeys", 2, 1, 1, 1, cmdHkeys},
	&command{"hvals", 2, 1, 1, 1, cmdHvals},
	&command{"hincrby", 4, 1, 1, 1, cmdHincrby},
	&command{"hincrbyfloat", 4, 1, 1, 1, cmdHincrbyfloat},
	&command{"hlen", 2, 1, 1, 1, cmdHlen},
	&command{"hstrlen", 3, 1, 1, 1, cmdHstrlen},
	&command{"hexists", 3, 1, 1, 1, cmdHexists},
	// lists
	&command{"lpush", -3, 1, 1, 1, cmdLpush},
	&command{"rpush", -3, 1, 1, 1, cmdRpush},
	&command{"lpushx", -3, 1, 1, 1, cmdLpushx},
	&command{"rpushx", -3, 1, 1, 1, cmdRpushx},
	&command{"lpop", -2, 1, 1, 1, cmdLpop},
	&command{"rpop", -2, 1, 1, 1, cmdRpop},
	&command{"llen", 2, 1, 1, 1, cmdLlen},
	&command{"lrange", 4, 1, 1, 1, cmdLrange},
	&command{"ltrim", 4, 1, 1, 1, cmdLtrim},
	&command{"lindex", 3, 1, 1, 1, cmdLindex},
	&command{"lset", 4, 1, 1, 1, cmdLset},
	&command{"lrem", 4, 1, 1, 1, cmdLrem},
	&command{"linsert", 5, 1, 1, 1, cmdLinsert},
	// sorted sets
	&command{"zadd", -4, 1, 1, 1, cmdZadd},
	&command{"zincrby", 4, 1, 1, 1, cmdZincrby},
	&command{"zrem", -3, 1, 1, 1, cmdZrem},
	&command{"zcard", 2, 1, 1, 1, cmdZcard},
	&command{"zcount", 4, 1, 1, 1, cmdZcount},
	&command{"zscore", 3, 1, 1, 1, cmdZscore},
	&command{"zmscore", -3, 1, 1, 1, cmdZmscore},
	&command{"zrank", 3, 1, 1, 1, cmdZrank},
	&command{"zrevrank", 3, 1, 1, 1, cmdZrevrank},
	&command{"zrange", -4, 1, 1, 1, cmdZrange},
	&command{"zrevrange", -4, 1, 1, 1, cmdZrevrange},
	&command{"zrangebyscore", -4, 1, 1, 1, cmdZrangebyscore},
	&command{"zrevrangebyscore", -4, 1, 1, 1, cmdZrevrangebyscore},
	&command{"zremrangebyscore", 4, 1, 1, 1, cmdZremrangebyscore},
	&command{"zremrangebyrank", 4, 1, 1, 1, cmdZremrangebyrank},
	&command{"zpopmin", -2, 1, 1, 1, cmdZpopmin},
	&command{"zpopmax", -2, 1, 1, 1, cmdZpopmax},
)

// Commands returns the names of the Redis commands the host implements, in
// upper case, sorted. Scripts calling any other command fail with an
// "ERR Unknown Redis command called from script" error that names it.
func Commands() []string {
	names := make([]string, 0, len(commandTable))
	for name := range commandTable {
		names = append(names, strings.ToUpper(name))
	}
	sort.Strings(names)
	return names
}

func buildCommandTable(cmds ...*command) map[string]*command {
	m := make(map[string]*command, len(cmds))
	for _, c := range cmds {
		m[c.name] = c
	}
	return m
}

// findCommand looks name up case-insensitively, without allocating.
func findCommand(name string) *command {
	if c, ok := commandTable[name]; ok {
		return c
	}
	var buf [32]byte
	if len(name) > len(buf) {
		return nil
	}
	b := buf[:len(name)]
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return commandTable[string(b)]
}

// lowerASCII lower-cases ASCII letters only, as Redis's strcasecmp compares
// options.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// equalFoldASCII reports whether a and b are equal ignoring ASCII case.
func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
