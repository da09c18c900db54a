package luahost

import (
	"sort"
	"strings"
)

// statusReply is a Redis status ("+OK"). Scripts see it as {ok=...}; Go
// callers get it as a plain string, as go-redis returns it.
type statusReply string

// timeReply is TIME's reply, the array {seconds, microseconds} of bulk strings, kept as
// numbers until it is read: a script's TIME formats its seconds only when they changed
// since the last (see Host.replyToLua).
type timeReply struct{ sec, usec int64 }

// bulks is an array reply of bulk strings and nil bulks (HMGET's) held in the command
// context's buffer, which the next such reply reuses: it is read (Host.replyToLua, goReply)
// before another command runs, and a script's table is made from it with no []any between.
type bulks struct {
	vals []string
	set  []bool // vals[i] is a bulk string when set[i], else a nil bulk
}

func (b *bulks) reset() {
	clear(b.vals)
	b.vals, b.set = b.vals[:0], b.set[:0]
}

func (b *bulks) add(v string, ok bool) {
	b.vals = append(b.vals, v)
	b.set = append(b.set, ok)
}

// A command's reply is one of: int64 (integer), string (bulk), nil (nil
// bulk), statusReply, []any (array of replies), timeReply, *bulks or *ErrorReply.

// cmdCtx is what a command runs against.
type cmdCtx struct {
	h     *Host
	ks    *keyspace
	now   int64 // Unix milliseconds that expiry is judged by
	bulks bulks // the buffer of a *bulks reply
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
	flags             cmdFlags
	run               func(c *cmdCtx, args []string) any
}

// cmdFlags are the flags of Redis's command table that the host acts on.
type cmdFlags uint8

const (
	flagWrite   cmdFlags = 1 << iota // "write": the command may change the data set
	flagDenyOOM                      // "denyoom": it may add memory, so it is refused over the cap (memory.go)
)

// The values of command.flags, as the table spells them.
const (
	reads  cmdFlags = 0                       // no "write" flag: the command reads (GET, TTL, ZRANGE) or touches no data (PING, TIME)
	writes          = flagWrite               // "write": DEL, PEXPIRE, ZREM, ...
	grows           = flagWrite | flagDenyOOM // "write" and "denyoom": SET, INCR, HSET, ZADD, ...
)

// arityOK reports whether argc (including the command name) fits.
func (cmd *command) arityOK(argc int) bool {
	if cmd.arity >= 0 {
		return argc == cmd.arity
	}
	return argc >= -cmd.arity
}

// refusedKey returns the first key among args that strict keys refuse in run r: one that is
// neither among r's KEYS nor in the cluster slot of one of them. Keys are compared with
// KEYS first; slots are computed only for a key that is not there.
func (cmd *command) refusedKey(args []string, r *runState) (string, bool) {
	if cmd.first == 0 {
		return "", false
	}
	last := cmd.last
	if last < 0 {
		last += len(args)
	}
next:
	for i := cmd.first; i <= last && i < len(args); i += cmd.step {
		for _, d := range r.keys {
			if d == args[i] {
				continue next
			}
		}
		if !r.inDeclaredSlot(args[i]) {
			return args[i], true
		}
	}
	return "", false
}

// commandTable holds every command the host implements, by lower-case name,
// with Redis 7.0's arity, key positions and write flag.
var commandTable = buildCommandTable(
	// server
	&command{"ping", -1, 0, 0, 0, reads, cmdPing},
	&command{"echo", 2, 0, 0, 0, reads, cmdEcho},
	&command{"time", 1, 0, 0, 0, reads, cmdTime},
	// keys
	&command{"del", -2, 1, -1, 1, writes, cmdDel},
	&command{"rename", 3, 1, 2, 1, writes, cmdRename},
	&command{"renamenx", 3, 1, 2, 1, writes, cmdRenamenx},
	&command{"unlink", -2, 1, -1, 1, writes, cmdDel},
	&command{"exists", -2, 1, -1, 1, reads, cmdExists},
	&command{"touch", -2, 1, -1, 1, reads, cmdExists},
	&command{"type", 2, 1, 1, 1, reads, cmdType},
	&command{"expire", -3, 1, 1, 1, writes, cmdExpire},
	&command{"pexpire", -3, 1, 1, 1, writes, cmdPexpire},
	&command{"expireat", -3, 1, 1, 1, writes, cmdExpireat},
	&command{"pexpireat", -3, 1, 1, 1, writes, cmdPexpireat},
	&command{"ttl", 2, 1, 1, 1, reads, cmdTTL},
	&command{"pttl", 2, 1, 1, 1, reads, cmdPTTL},
	&command{"expiretime", 2, 1, 1, 1, reads, cmdExpiretime},
	&command{"pexpiretime", 2, 1, 1, 1, reads, cmdPexpiretime},
	&command{"persist", 2, 1, 1, 1, writes, cmdPersist},
	// strings
	&command{"get", 2, 1, 1, 1, reads, cmdGet},
	&command{"set", -3, 1, 1, 1, grows, cmdSet},
	&command{"setex", 4, 1, 1, 1, grows, cmdSetex},
	&command{"psetex", 4, 1, 1, 1, grows, cmdPsetex},
	&command{"setnx", 3, 1, 1, 1, grows, cmdSetnx},
	&command{"getset", 3, 1, 1, 1, grows, cmdGetset},
	&command{"getdel", 2, 1, 1, 1, writes, cmdGetdel},
	&command{"getex", -2, 1, 1, 1, writes, cmdGetex},
	&command{"mget", -2, 1, -1, 1, reads, cmdMget},
	&command{"mset", -3, 1, -1, 2, grows, cmdMset},
	&command{"msetnx", -3, 1, -1, 2, grows, cmdMsetnx},
	&command{"append", 3, 1, 1, 1, grows, cmdAppend},
	&command{"strlen", 2, 1, 1, 1, reads, cmdStrlen},
	&command{"incr", 2, 1, 1, 1, grows, cmdIncr},
	&command{"decr", 2, 1, 1, 1, grows, cmdDecr},
	&command{"incrby", 3, 1, 1, 1, grows, cmdIncrby},
	&command{"decrby", 3, 1, 1, 1, grows, cmdDecrby},
	&command{"incrbyfloat", 3, 1, 1, 1, grows, cmdIncrbyfloat},
	// hashes
	&command{"hget", 3, 1, 1, 1, reads, cmdHget},
	&command{"hmget", -3, 1, 1, 1, reads, cmdHmget},
	&command{"hset", -4, 1, 1, 1, grows, cmdHset},
	&command{"hmset", -4, 1, 1, 1, grows, cmdHset},
	&command{"hsetnx", 4, 1, 1, 1, grows, cmdHsetnx},
	&command{"hdel", -3, 1, 1, 1, writes, cmdHdel},
	&command{"hgetall", 2, 1, 1, 1, reads, cmdHgetall},
	&command{"hkeys", 2, 1, 1, 1, reads, cmdHkeys},
	&command{"hvals", 2, 1, 1, 1, reads, cmdHvals},
	&command{"hincrby", 4, 1, 1, 1, grows, cmdHincrby},
	&command{"hincrbyfloat", 4, 1, 1, 1, grows, cmdHincrbyfloat},
	&command{"hlen", 2, 1, 1, 1, reads, cmdHlen},
	&command{"hstrlen", 3, 1, 1, 1, reads, cmdHstrlen},
	&command{"hexists", 3, 1, 1, 1, reads, cmdHexists},
	// lists
	&command{"lpush", -3, 1, 1, 1, grows, cmdLpush},
	&command{"rpush", -3, 1, 1, 1, grows, cmdRpush},
	&command{"lpushx", -3, 1, 1, 1, grows, cmdLpushx},
	&command{"rpushx", -3, 1, 1, 1, grows, cmdRpushx},
	&command{"lpop", -2, 1, 1, 1, writes, cmdLpop},
	&command{"rpop", -2, 1, 1, 1, writes, cmdRpop},
	&command{"llen", 2, 1, 1, 1, reads, cmdLlen},
	&command{"lrange", 4, 1, 1, 1, reads, cmdLrange},
	&command{"ltrim", 4, 1, 1, 1, writes, cmdLtrim},
	&command{"lindex", 3, 1, 1, 1, reads, cmdLindex},
	&command{"lset", 4, 1, 1, 1, grows, cmdLset},
	&command{"lrem", 4, 1, 1, 1, writes, cmdLrem},
	&command{"linsert", 5, 1, 1, 1, grows, cmdLinsert},
	// sorted sets
	&command{"zadd", -4, 1, 1, 1, grows, cmdZadd},
	&command{"zincrby", 4, 1, 1, 1, grows, cmdZincrby},
	&command{"zrem", -3, 1, 1, 1, writes, cmdZrem},
	&command{"zcard", 2, 1, 1, 1, reads, cmdZcard},
	&command{"zcount", 4, 1, 1, 1, reads, cmdZcount},
	&command{"zscore", 3, 1, 1, 1, reads, cmdZscore},
	&command{"zmscore", -3, 1, 1, 1, reads, cmdZmscore},
	&command{"zrank", 3, 1, 1, 1, reads, cmdZrank},
	&command{"zrevrank", 3, 1, 1, 1, reads, cmdZrevrank},
	&command{"zrange", -4, 1, 1, 1, reads, cmdZrange},
	&command{"zrevrange", -4, 1, 1, 1, reads, cmdZrevrange},
	&command{"zrangebyscore", -4, 1, 1, 1, reads, cmdZrangebyscore},
	&command{"zrevrangebyscore", -4, 1, 1, 1, reads, cmdZrevrangebyscore},
	&command{"zremrangebyscore", 4, 1, 1, 1, writes, cmdZremrangebyscore},
	&command{"zremrangebyrank", 4, 1, 1, 1, writes, cmdZremrangebyrank},
	&command{"zpopmin", -2, 1, 1, 1, writes, cmdZpopmin},
	&command{"zpopmax", -2, 1, 1, 1, writes, cmdZpopmax},
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

// IsWrite reports whether name (in any case) is a command the host implements
// that Redis flags "write": one that may change the data set, such as SET, DEL,
// PEXPIRE or ZPOPMIN. Reads (GET, HMGET, TTL, ZRANGE, ...), commands that touch
// no data (PING, TIME) and commands the host lacks are not.
func IsWrite(name string) bool {
	c := findCommand(name)
	return c != nil && c.flags&flagWrite != 0
}

// buildCommandTable indexes cmds by name, with each write command run through the
// keyspace's memory accounting (keyspace.write), so that no command accounts for itself.
func buildCommandTable(cmds ...*command) map[string]*command {
	m := make(map[string]*command, len(cmds))
	for _, c := range cmds {
		if c.flags&flagWrite != 0 {
			cmd, run := c, c.run
			c.run = func(cc *cmdCtx, args []string) any { return cc.ks.write(cmd, run, cc, args) }
		}
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

// optionWords are the options commands take, by their upper-case spelling, which is how
// scripts write them: lowerOption finds those without allocating.
var optionWords = func() map[string]string {
	m := map[string]string{}
	for _, w := range []string{"nx", "xx", "gt", "lt", "ch", "incr", "get", "keepttl", "persist", "ex", "px",
		"exat", "pxat", "withscores", "limit", "rev", "byscore", "bylex", "before", "after"} {
		m[strings.ToUpper(w)] = w
	}
	return m
}()

// lowerOption is lowerASCII for a command's option, without allocating for the options
// commands know spelt in upper case.
func lowerOption(s string) string {
	if w, ok := optionWords[s]; ok {
		return w
	}
	return lowerASCII(s)
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
