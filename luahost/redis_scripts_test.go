package luahost_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// realRedis returns a RESP2 client of the shared redis-server: scripts'
// replies are defined by their RESP2 conversion, which is what the host
// implements (go-redis would negotiate RESP3 by default).
func realRedis(t testing.TB) *redis.Client {
	t.Helper()
	srv := redistest.Shared(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2})
	t.Cleanup(func() { c.Close() })
	return c
}

var prefixSeq atomic.Int64

// keyPrefix returns a prefix no other test (or run of this test) uses, so
// that tests share the server without FLUSHDB.
func keyPrefix(t testing.TB) string {
	return fmt.Sprintf("luahost-test:%s:%d:%d", t.Name(), prefixSeq.Add(1), randomID())
}

// canon renders a reply and its error canonically, so that go-redis's and
// the host's replies compare as strings.
func canon(v any, err error) string {
	if errors.Is(err, redis.Nil) {
		return "nil"
	}
	if err != nil {
		var rerr redis.Error
		if errors.As(err, &rerr) {
			return "(error) " + err.Error()
		}
		return "(client error) " + err.Error()
	}
	return canonValue(v)
}

func canonValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case int64:
		return fmt.Sprintf("%d", v)
	case string:
		return fmt.Sprintf("%q", v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = canonValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case error:
		return "(error) " + v.Error()
	}
	return fmt.Sprintf("(unexpected %T) %v", v, v)
}

// luaMessage matches the message of a Lua runtime error inside a script
// error reply; gopher-lua words these differently from Lua 5.1.
var luaMessage = regexp.MustCompile(`((?:user_script|\[string [^\]]*\]):\d+: ).*?( script: [0-9a-f]{40}, on @user_script:\d+\.| near '[^']*'"?$)`)

// scriptCase is a script run on Redis and on the host with the same KEYS
// (prefixed per test) and ARGV.
type scriptCase struct {
	name string
	src  string
	keys int
	args []string
	// luaWording: compare a script error without the Lua runtime message,
	// which gopher-lua words differently.
	luaWording bool
	// namesCommand is what the host adds to Redis's "Unknown Redis command
	// called from script" error: the command's name.
	namesCommand string
}

// scriptCases cover every reply conversion rule, the redis library, the
// read-only environment and the number formatting of Lua 5.1.
var scriptCases = []scriptCase{
	// Lua -> Redis reply conversion.
	{name: "integer", src: `return 42`},
	{name: "float truncates", src: `return {3.99, -3.99, 0.5, -0.5}`},
	{name: "huge numbers", src: `return {2^53, 2^62, 2^63, -2^63, 2^64, 1e300, -1e300}`},
	{name: "inf and nan", src: `return {1/0, -1/0, 0/0}`},
	{name: "string", src: `return "str"`},
	{name: "binary string", src: `return "a\0b\255"`},
	{name: "true", src: `return true`},
	{name: "false", src: `return false`},
	{name: "nil", src: `return nil`},
	{name: "no value", src: `return`},
	{name: "function", src: `return function() end`},
	{name: "array stops at nil", src: `return {1, 2, nil, 3}`},
	{name: "sparse", src: `return {[1]=1, [2]=2, [4]=4}`},
	{name: "hash only", src: `return {a=1}`},
	{name: "empty", src: `return {}`},
	{name: "nested", src: `return {1, {2, {3, "x"}}, true, false, 4}`},
	{name: "nested status and error", src: `return {1, {ok="st"}, {err="inner"}, 4}`},
	{name: "status", src: `return {ok="fine"}`},
	{name: "status newline", src: `return {ok="a\r\nb"}`},
	{name: "error table", src: `return {err="x"}`},
	{name: "error table newlines", src: `return {err="a\r\nb"}`},
	{name: "error table trailing newline", src: `return {err="x\r\n"}`},
	{name: "error table leading newline", src: `return {err="\nx"}`},
	{name: "err not string", src: `return {err=5}`},
	{name: "ok not string", src: `return {ok=5}`},
	{name: "err beats ok", src: `return {err="e", ok="fine"}`},
	{name: "err number ok string", src: `return {err=5, ok="fine"}`},
	{name: "multiple returns", src: `return 1, 2`},
	{name: "library table", src: `return string`},

	// KEYS and ARGV.
	{name: "keys and args", src: `return {#KEYS, #ARGV, ARGV[1], ARGV[2]}`, keys: 2, args: []string{"a1", "a2"}},
	{name: "keys are strings", src: `return type(KEYS[1])`, keys: 1},
	{name: "modify KEYS", src: `KEYS[1] = "z"; KEYS.foo = 1; return KEYS[1]`, keys: 1},
	{name: "empty args", src: `return {#KEYS, #ARGV}`},

	// redis.call and redis.pcall.
	{name: "call set", src: `return redis.call("set", KEYS[1], "v")`, keys: 1},
	{name: "call status table", src: `local r = redis.call("set", KEYS[1], "v"); return {type(r), r.ok}`, keys: 1},
	{name: "call nil is false", src: `local r = redis.call("get", KEYS[1]); return {type(r), tostring(r)}`, keys: 1},
	{name: "call integer", src: `local r = redis.call("incr", KEYS[1]); return {type(r), r}`, keys: 1},
	{name: "call array", src: `redis.call("hset", KEYS[1], "a", "1"); local r = redis.call("hmget", KEYS[1], "a", "b"); return {type(r), r[1], tostring(r[2]), #r}`, keys: 1},
	{name: "call uppercase", src: `redis.call("SET", KEYS[1], "v"); return redis.call("GeT", KEYS[1])`, keys: 1},
	{name: "call number args", src: `return {redis.call("echo", 3), redis.call("echo", 0.5), redis.call("echo", 1e20), redis.call("echo", 0.1), redis.call("echo", 1/3), redis.call("echo", -0.0)}`},
	{name: "call big number args", src: `return {redis.call("echo", 2^53), redis.call("echo", 2^63), redis.call("echo", 1e15), redis.call("echo", 1e16), redis.call("echo", 1e17), redis.call("echo", 1764472786000000), redis.call("echo", 123456789012)}`},
	{name: "call inf arg", src: `return {redis.call("echo", 1/0), redis.call("echo", -1/0)}`},
	{name: "call boolean arg", src: `return redis.call("echo", true)`},
	{name: "call nil arg", src: `return redis.call("echo", nil)`},
	{name: "call table arg", src: `return redis.call("get", {})`},
	{name: "call no args", src: `return redis.call()`},
	{name: "call number name", src: `return redis.call(5)`, namesCommand: ": '5'"},
	{name: "call unknown", src: `return redis.call("nosuch")`, namesCommand: ": 'nosuch'"},
	{name: "call wrong arity", src: `return redis.call("incr")`},
	{name: "call wrong arity hset", src: `return redis.call("hset", KEYS[1], "a")`, keys: 1},
	{name: "call command arity error", src: `return redis.call("hset", KEYS[1], "a", "1", "b")`, keys: 1},
	{name: "call wrongtype", src: `redis.call("set", KEYS[1], "v"); return redis.call("hget", KEYS[1], "f")`, keys: 1},
	{name: "call wrongtype in function", src: "redis.call('set', KEYS[1], 'v')\nlocal function f()\n  return redis.call('hget', KEYS[1], 'f')\nend\nreturn f()", keys: 1},
	{name: "call syntax error", src: `return redis.call("set", KEYS[1], "a", "ex", "0")`, keys: 1},
	{name: "call not integer", src: `return redis.call("incrby", KEYS[1], "x")`, keys: 1},
	{name: "pcall error table", src: `redis.call("set", KEYS[1], "v"); local r = redis.pcall("hget", KEYS[1], "f"); return {type(r), r.err}`, keys: 1},
	{name: "pcall error returned", src: `redis.call("set", KEYS[1], "v"); return redis.pcall("hget", KEYS[1], "f")`, keys: 1},
	{name: "pcall error nested", src: `redis.call("set", KEYS[1], "v"); return {redis.pcall("hget", KEYS[1], "f")}`, keys: 1},
	{name: "pcall unknown", src: `return redis.pcall("nosuch").err`, namesCommand: ": 'nosuch'"},
	{name: "call unknown newline", src: `return redis.pcall("no\nsuch")`, namesCommand: ": 'no such'"},
	{name: "pcall bad arg", src: `return redis.pcall("get", {}).err`},
	{name: "pcall arity", src: `return redis.pcall("incr")`},
	{name: "pcall ok", src: `return redis.pcall("set", KEYS[1], "v")`, keys: 1},
	{name: "lua pcall catches call error as string", src: `local ok, e = pcall(redis.call, "incr"); return {tostring(ok), type(e), e}`},
	{name: "lua pcall wrongtype string", src: `redis.call("set", KEYS[1], "v"); local ok, e = pcall(redis.call, "hget", KEYS[1], "f"); return {e, #e, string.upper(e)}`, keys: 1},
	{name: "rethrow call error", src: `local ok, e = pcall(redis.call, "incr"); error(e)`},
	{name: "rethrow call error level 0", src: `local ok, e = pcall(redis.call, "incr"); error(e, 0)`},
	{name: "rethrow wrongtype level 0", src: `redis.call("set", KEYS[1], "v"); local ok, e = pcall(redis.call, "hget", KEYS[1], "f"); error(e, 0)`, keys: 1},
	{name: "error_reply of call error", src: `redis.call("set", KEYS[1], "v"); local ok, e = pcall(redis.call, "hget", KEYS[1], "f"); return redis.error_reply(e)`, keys: 1},

	// Commands whose replies scripts see converted: nil arrays, arrays with
	// nils, status replies, long double text.
	{name: "psetex and setex", src: `return {redis.call("psetex", KEYS[1], 100000, "v"), redis.call("get", KEYS[1]), redis.call("pttl", KEYS[1]) > 99000, redis.call("setex", KEYS[1], 100, 7), redis.call("ttl", KEYS[1]), redis.call("type", KEYS[1])}`, keys: 1},
	{name: "psetex invalid", src: `return redis.pcall("psetex", KEYS[1], 0, "v")`, keys: 1},
	{name: "setex float ttl", src: `return redis.pcall("setex", KEYS[1], 1.5, "v")`, keys: 1},
	{name: "setnx getset getdel", src: `return {redis.call("setnx", KEYS[1], "a"), redis.call("setnx", KEYS[1], "b"), redis.call("getset", KEYS[1], "c"), redis.call("getdel", KEYS[1]), redis.call("getdel", KEYS[1]), redis.call("exists", KEYS[1])}`, keys: 1},
	{name: "set get and nx", src: `return {redis.call("set", KEYS[1], "a", "nx", "get"), redis.call("set", KEYS[1], "b", "nx", "get"), redis.call("set", KEYS[1], "c", "xx", "get", "px", 100000), redis.call("pttl", KEYS[1]) > 0, redis.call("set", KEYS[1], "d", "keepttl"), redis.call("pttl", KEYS[1]) > 0}`, keys: 1},
	{name: "getex", src: `redis.call("set", KEYS[1], "v"); return {redis.call("getex", KEYS[1], "px", 100000), redis.call("pttl", KEYS[1]) > 0, redis.call("getex", KEYS[1], "persist"), redis.call("ttl", KEYS[1]), redis.call("getex", KEYS[1], "pxat", 1), redis.call("exists", KEYS[1])}`, keys: 1},
	{name: "expiretime", src: `redis.call("set", KEYS[1], "v", "pxat", 4102444800499); return {redis.call("expiretime", KEYS[1]), redis.call("pexpiretime", KEYS[1]), redis.call("pexpireat", KEYS[1], 4102444800500), redis.call("expiretime", KEYS[1]), redis.call("expiretime", KEYS[2]), redis.call("persist", KEYS[1]), redis.call("pexpiretime", KEYS[1])}`, keys: 2},
	{name: "mset msetnx", src: `return {redis.call("mset", KEYS[1], 1, KEYS[2], 2), redis.call("msetnx", KEYS[2], 3, KEYS[3], 4), redis.call("msetnx", KEYS[3], 5, KEYS[4], 6), redis.call("mget", KEYS[1], KEYS[2], KEYS[3], KEYS[4])}`, keys: 4},
	{name: "mset odd", src: `return redis.pcall("mset", KEYS[1], 1, KEYS[2])`, keys: 2},
	{name: "incr family", src: `return {redis.call("incr", KEYS[1]), redis.call("incrby", KEYS[1], 10), redis.call("decr", KEYS[1]), redis.call("decrby", KEYS[1], 5), redis.call("incrbyfloat", KEYS[1], 0.5), redis.pcall("incr", KEYS[1])}`, keys: 1},
	{name: "rename", src: `redis.call("set", KEYS[1], "a", "PX", 100000) redis.call("hset", KEYS[2], "f", "v") redis.call("set", KEYS[3], "c") return {redis.call("rename", KEYS[1], KEYS[2]), redis.call("get", KEYS[2]), redis.call("exists", KEYS[1]), redis.call("pttl", KEYS[2]) > 90000, redis.pcall("rename", KEYS[1], KEYS[2]), redis.call("rename", KEYS[3], KEYS[3]), redis.call("renamenx", KEYS[2], KEYS[3]), redis.call("renamenx", KEYS[3], KEYS[1]), redis.call("pttl", KEYS[1]), redis.pcall("renamenx", KEYS[3], KEYS[1]), redis.call("rename", KEYS[2], KEYS[1]), redis.call("type", KEYS[1])}`, keys: 3},
	// RENAME and RENAMENX: the expiry moves with the value (an absolute one, so the replies are exact), replaces
	// the destination's or clears it, and a key renamed onto itself is left as it is.
	{name: "rename carries the expiry", src: `redis.call("set", KEYS[1], "a") redis.call("pexpireat", KEYS[1], 4102444800123) redis.call("set", KEYS[2], "b") redis.call("pexpireat", KEYS[2], 4102444900456) return {redis.call("rename", KEYS[1], KEYS[2]), redis.call("pexpiretime", KEYS[2]), redis.call("pexpiretime", KEYS[1]), redis.call("get", KEYS[2]), redis.call("rename", KEYS[2], KEYS[3]), redis.call("pexpiretime", KEYS[3]), redis.call("expiretime", KEYS[3]), redis.call("exists", KEYS[1], KEYS[2], KEYS[3])}`, keys: 3},
	{name: "rename clears the destination's expiry", src: `redis.call("set", KEYS[1], "a") redis.call("set", KEYS[2], "b", "PX", 100000) return {redis.call("rename", KEYS[1], KEYS[2]), redis.call("pttl", KEYS[2]), redis.call("ttl", KEYS[2]), redis.call("get", KEYS[2]), redis.call("exists", KEYS[1])}`, keys: 2},
	{name: "rename overwrites any type", src: `redis.call("rpush", KEYS[1], "x", "y", "z") redis.call("zadd", KEYS[2], 1, "m", 2, "n") redis.call("hset", KEYS[3], "f", "v", "g", "w") local r = {redis.call("rename", KEYS[1], KEYS[2]), redis.call("type", KEYS[2]), redis.call("lrange", KEYS[2], 0, -1), redis.pcall("zscore", KEYS[2], "m"), redis.call("rename", KEYS[3], KEYS[2]), redis.call("type", KEYS[2]), redis.call("hgetall", KEYS[2]), redis.call("renamenx", KEYS[2], KEYS[1]), redis.call("hgetall", KEYS[1])} redis.call("zadd", KEYS[3], 1.5, "a", 0.25, "b") r[#r+1] = redis.call("rename", KEYS[3], KEYS[2]) r[#r+1] = redis.call("zrange", KEYS[2], 0, -1, "withscores") return r`, keys: 3},
	{name: "rename missing source", src: `redis.call("set", KEYS[2], "b", "PX", 100000) return {redis.pcall("rename", KEYS[1], KEYS[2]), redis.pcall("renamenx", KEYS[1], KEYS[2]), redis.pcall("rename", KEYS[1], KEYS[3]), redis.pcall("renamenx", KEYS[1], KEYS[3]), redis.call("get", KEYS[2]), redis.call("pttl", KEYS[2]) > 90000, redis.call("exists", KEYS[1], KEYS[3])}`, keys: 3},
	{name: "rename same key", src: `redis.call("set", KEYS[1], "a") redis.call("pexpireat", KEYS[1], 4102444800123) return {redis.call("rename", KEYS[1], KEYS[1]), redis.call("get", KEYS[1]), redis.call("pexpiretime", KEYS[1]), redis.call("renamenx", KEYS[1], KEYS[1]), redis.call("pexpiretime", KEYS[1]), redis.pcall("rename", KEYS[2], KEYS[2]), redis.pcall("renamenx", KEYS[2], KEYS[2]), redis.call("exists", KEYS[2])}`, keys: 2},
	{name: "renamenx", src: `redis.call("set", KEYS[1], "a") redis.call("pexpireat", KEYS[1], 4102444800123) redis.call("set", KEYS[2], "b") redis.call("pexpireat", KEYS[2], 4102444900456) return {redis.call("renamenx", KEYS[1], KEYS[2]), redis.call("get", KEYS[1]), redis.call("pexpiretime", KEYS[1]), redis.call("get", KEYS[2]), redis.call("pexpiretime", KEYS[2]), redis.call("renamenx", KEYS[1], KEYS[3]), redis.call("get", KEYS[3]), redis.call("pexpiretime", KEYS[3]), redis.call("exists", KEYS[1]), redis.call("renamenx", KEYS[2], KEYS[1]), redis.call("pttl", KEYS[1]) > 0}`, keys: 3},
	{name: "rename of a big hash and an expired-at-once key", src: `for i = 1, 200 do redis.call("hset", KEYS[1], "f" .. i, i) end return {redis.call("rename", KEYS[1], KEYS[2]), redis.call("hlen", KEYS[2]), redis.call("hget", KEYS[2], "f150"), redis.call("exists", KEYS[1]), redis.call("set", KEYS[3], "x"), redis.call("pexpireat", KEYS[3], 1), redis.pcall("rename", KEYS[3], KEYS[1]), redis.call("exists", KEYS[1])}`, keys: 3},
	{name: "rename arity", src: `return {redis.pcall("rename", KEYS[1]), redis.pcall("renamenx", KEYS[1], KEYS[2], KEYS[3]), redis.pcall("RENAME", KEYS[1], KEYS[2], "x")}`, keys: 3},
	{name: "incrbyfloat precision", src: `local t = {} for i = 1, 10 do t[i] = redis.call("incrbyfloat", KEYS[1], "0.1") end t[11] = redis.call("incrbyfloat", KEYS[1], "-1") t[12] = redis.call("incrbyfloat", KEYS[1], 1e17) t[13] = redis.call("incrbyfloat", KEYS[1], "1.0000000000000000001") return t`, keys: 1},
	{name: "incrbyfloat limits", src: `return {redis.pcall("incrbyfloat", KEYS[1], "1e4932"), redis.pcall("incrbyfloat", KEYS[1], "1e4932"), redis.pcall("incrbyfloat", KEYS[1], "inf"), redis.pcall("incrbyfloat", KEYS[2], "nan"), redis.pcall("incrbyfloat", KEYS[2], "1e-4951"), redis.pcall("incrbyfloat", KEYS[2], "1e-5000"), redis.pcall("incrbyfloat", KEYS[2], " 1")}`, keys: 2},
	{name: "hincrbyfloat and hsetnx", src: `return {redis.call("hincrbyfloat", KEYS[1], "f", "2.5"), redis.call("hincrbyfloat", KEYS[1], "f", "-2.5"), redis.pcall("hincrbyfloat", KEYS[1], "f", "inf"), redis.call("hsetnx", KEYS[1], "f", "x"), redis.call("hsetnx", KEYS[1], "g", "x"), redis.pcall("hincrbyfloat", KEYS[1], "g", 1), redis.call("hkeys", KEYS[1]), redis.call("hvals", KEYS[1]), redis.call("hstrlen", KEYS[1], "g"), redis.call("hgetall", KEYS[1])}`, keys: 1},
	{name: "hincrbyfloat limits", src: `return {redis.pcall("hincrbyfloat", KEYS[1], "f", "1e4932"), redis.pcall("hincrbyfloat", KEYS[1], "f", "1e4932"), redis.pcall("hincrbyfloat", KEYS[1], "f", "1e-5000"), redis.pcall("hincrbyfloat", KEYS[1], "f", "-inf"), redis.pcall("hincrbyfloat", KEYS[1], "f", "nan"), redis.call("hset", KEYS[1], "g", "1e-4951"), redis.pcall("hincrbyfloat", KEYS[1], "g", "0"), redis.call("hset", KEYS[1], "g", " 1"), redis.pcall("hincrbyfloat", KEYS[1], "g", "1")}`, keys: 1},
	{name: "list log", src: `for i = 1, 5 do redis.call("lpush", KEYS[1], i) end return {redis.call("ltrim", KEYS[1], 0, 2), redis.call("lrange", KEYS[1], 0, -1), redis.call("llen", KEYS[1]), redis.call("lindex", KEYS[1], -1), redis.call("lindex", KEYS[1], 9), redis.call("rpop", KEYS[1], 2), redis.call("lpop", KEYS[1], 0), redis.call("lpop", KEYS[1]), redis.call("lpop", KEYS[1]), redis.call("lpop", KEYS[1], 3), redis.call("exists", KEYS[1])}`, keys: 1},
	{name: "list edit", src: `redis.call("rpush", KEYS[1], "a", "b", "a", "c", "a") return {redis.call("lrem", KEYS[1], -2, "a"), redis.call("linsert", KEYS[1], "before", "c", "x"), redis.call("linsert", KEYS[1], "after", "zz", "y"), redis.call("lset", KEYS[1], 0, "z"), redis.pcall("lset", KEYS[1], 9, "z"), redis.pcall("lset", KEYS[2], 0, "z"), redis.call("lpushx", KEYS[2], "v"), redis.call("rpushx", KEYS[1], "w"), redis.call("lrange", KEYS[1], 0, -1)}`, keys: 2},
	{name: "list wrongtype", src: `redis.call("set", KEYS[1], "v") redis.call("rpush", KEYS[2], "v") return {redis.pcall("lpush", KEYS[1], "x"), redis.pcall("get", KEYS[2]), redis.pcall("hget", KEYS[2], "f"), redis.pcall("zscore", KEYS[2], "m"), redis.pcall("incrbyfloat", KEYS[2], 1), redis.call("type", KEYS[2])}`, keys: 2},
	{name: "zset additions", src: `redis.call("zadd", KEYS[1], 1, "a", 2, "b", 3, "c") return {redis.call("zrevrank", KEYS[1], "a"), redis.call("zrevrank", KEYS[1], "x"), redis.call("zmscore", KEYS[1], "a", "x", "c"), redis.call("zmscore", KEYS[2], "a"), redis.call("zpopmax", KEYS[1]), redis.call("zpopmax", KEYS[1], 5), redis.call("zpopmax", KEYS[1])}`, keys: 2},
	{name: "keys family", src: `redis.call("set", KEYS[1], 1) redis.call("set", KEYS[2], 2) return {redis.call("touch", KEYS[1], KEYS[2], KEYS[3], KEYS[1]), redis.call("exists", KEYS[1], KEYS[1], KEYS[3]), redis.call("unlink", KEYS[1], KEYS[3]), redis.call("del", KEYS[2]), redis.call("strlen", KEYS[2]), redis.call("append", KEYS[2], "ab"), redis.call("append", KEYS[2], "c")}`, keys: 3},

	// Reply helpers and the rest of the redis library.
	{name: "error_reply plain", src: `return redis.error_reply("x")`},
	{name: "error_reply code", src: `return redis.error_reply("MY thing")`},
	{name: "error_reply dash", src: `return redis.error_reply("-MY thing")`},
	{name: "error_reply dash no space", src: `return redis.error_reply("-x")`},
	{name: "error_reply empty", src: `return redis.error_reply("")`},
	{name: "error_reply newlines", src: `return redis.error_reply("a\nb\r\n")`},
	{name: "error_reply table", src: `return redis.error_reply("x").err`},
	{name: "error_reply bad", src: `return redis.error_reply(5)`},
	{name: "error_reply none", src: `return redis.error_reply()`},
	{name: "status_reply", src: `return redis.status_reply("x")`},
	{name: "status_reply field", src: `return redis.status_reply("x").ok`},
	{name: "status_reply bad", src: `return redis.status_reply(5)`},
	{name: "status_reply newline", src: `return redis.status_reply("x\n")`},
	{name: "sha1hex", src: `return {redis.sha1hex("abc"), redis.sha1hex(""), redis.sha1hex(5)}`},
	{name: "sha1hex no args", src: `return redis.sha1hex()`},
	{name: "sha1hex odd args", src: `return {redis.sha1hex({}), redis.sha1hex(nil), redis.sha1hex(1.5)}`},
	{name: "acl_check_cmd", src: `return {redis.acl_check_cmd("get"), redis.acl_check_cmd("SET")}`},
	{name: "acl_check_cmd unknown", src: `return redis.acl_check_cmd("nosuch")`},
	{name: "breakpoint", src: `return redis.breakpoint()`},
	{name: "setresp no args", src: `return redis.setresp()`},
	{name: "log level not number", src: `return redis.log("x", "y")`},
	{name: "set_repl two", src: `return redis.set_repl(1, 2)`},
	{name: "set_repl bad", src: `return redis.set_repl(9)`},
	{name: "log", src: `return redis.log(redis.LOG_WARNING, "x")`},
	{name: "log levels", src: `return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}`},
	{name: "log bad level", src: `return redis.log(99, "x")`},
	{name: "log no args", src: `return redis.log()`},
	{name: "replicate_commands", src: `return redis.replicate_commands()`},
	{name: "setresp 2", src: `redis.setresp(2); return redis.call("set", KEYS[1], "v")`, keys: 1},
	{name: "setresp 1", src: `return redis.setresp(1)`},
	{name: "repl flags", src: `return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}`},
	{name: "set_repl", src: `redis.set_repl(redis.REPL_ALL); return 1`},
	{name: "redis table keys", src: `local t = {} for k in pairs(redis) do t[#t+1] = k end table.sort(t) return t`},

	// Script errors.
	{name: "error string", src: `error("boom")`},
	{name: "error level 2", src: `error("x", 2)`},
	{name: "error level 2 in function", src: `local function f() error("deep", 2) end f()`},
	{name: "error level 0", src: `error("WRONGTYPE foo", 0)`},
	{name: "error ERR level 0", src: `error("ERR foo", 0)`},
	{name: "error nil", src: `error()`},
	{name: "error explicit nil", src: `error(nil)`},
	{name: "error true", src: `error(true)`},
	{name: "error number", src: `error(5)`},
	{name: "error number level 0", src: `error(5.5, 0)`},
	{name: "error table", src: `error({err="MY custom"})`},
	{name: "error table newline", src: `error({err="a\nb"})`},
	{name: "error newline", src: `error("x\ny")`},
	{name: "error trailing newline", src: `error("x\n")`},
	{name: "error on line 3", src: "local a = 1\nlocal b = 2\nerror('line three')"},
	{name: "error in function on line 2", src: "local function f()\n  error('in f')\nend\nf()"},
	{name: "assert", src: `assert(false)`},
	{name: "assert message", src: `assert(false, "m")`},
	{name: "assert passes", src: `return assert(1, "m")`},
	{name: "pcall error value", src: `return {pcall(error)}`},
	{name: "pcall error tostring", src: `local ok, e = pcall(error) return tostring(e)`},
	{name: "pcall error message", src: `local ok, e = pcall(error, "m") return e`},
	{name: "pcall error table unwrapped", src: `local ok, e = pcall(error, {err="x"}) return e`},
	{name: "pcall error table number", src: `local ok, e = pcall(error, {err=5}) return {type(e), tostring(e)}`},
	{name: "pcall error table no err", src: `local ok, e = pcall(error, {1, 2}) return e`},
	{name: "pcall error table via index", src: `local ok, e = pcall(error, setmetatable({}, {__index={err="y"}})) return type(e)`},
	{name: "pcall error in function", src: `local ok, e = pcall(function() error({err="x"}) end) return type(e)`},
	{name: "xpcall sees error table", src: `return {xpcall(function() redis.call("nosuch") end, function(e) return type(e) end)}`},
	{name: "coroutine sees error table", src: `local co = coroutine.create(function() redis.call("nosuch") end) local ok, e = coroutine.resume(co) return {tostring(ok), type(e), e.err}`, namesCommand: ": 'nosuch'"},
	{name: "pcall redis lib errors", src: `return {select(2, pcall(redis.sha1hex)), select(2, pcall(redis.log)), select(2, pcall(redis.log, 99, "x")), select(2, pcall(redis.setresp, 1)), select(2, pcall(redis.set_repl)), select(2, pcall(redis.call)), select(2, pcall(redis.call, "get", {})), select(2, pcall(redis.setresp))}`},
	{name: "error table number err", src: `error({err=5})`},
	{name: "error table float err", src: `error({err=5.5})`},
	{name: "error table err via index", src: `error(setmetatable({}, {__index={err="viaindex"}}))`},
	{name: "return err via index", src: `return setmetatable({}, {__index={err="viaindex"}})`},
	{name: "return array via index", src: `return setmetatable({}, {__index={1, 2}})`},
	{name: "xpcall", src: `return {xpcall(function() error("m") end, function(e) return "handled: " .. e end)}`},
	{name: "index nil", src: "local function f() local x = nil; return x.y end f()", luaWording: true},
	{name: "arith on table", src: `return 1 + {}`, luaWording: true},
	{name: "call nil", src: `local f; f()`, luaWording: true},

	// The read-only environment.
	{name: "create global", src: `x = 1`},
	{name: "read undefined global", src: `return y`},
	{name: "read undefined global field", src: `return x.y`},
	{name: "assign existing global", src: `redis = nil`},
	{name: "assign library field", src: `string.foo = 1`},
	{name: "assign library function", src: `math.floor = nil`},
	{name: "rawset _G", src: `rawset(_G, "x", 1) return x`},
	{name: "rawset library", src: `rawset(string, "x", 1)`},
	{name: "setmetatable _G", src: `setmetatable(_G, nil) return 1`},
	{name: "metatable of _G", src: `return type(getmetatable(_G))`},
	{name: "modify metatable of _G", src: `local m = getmetatable(_G) m.__index = nil return 1`},
	{name: "global assignment caught", src: `local ok, e = pcall(function() x = 1 end) return e`},
	{name: "undefined global caught", src: `local ok, e = pcall(function() return y end) return e`},
	{name: "table.insert library", src: `table.insert(redis, 1)`},
	{name: "rawget global", src: `return {rawget(_G, "nosuch") == nil, type(rawget(_G, "redis"))}`},
	{name: "_G is _G", src: `return _G._G == _G`},
	{name: "globals", src: `local t = {} for k, v in pairs(_G) do if k ~= "cjson" and k ~= "cmsgpack" and k ~= "struct" and k ~= "__redis__err__handler" then t[#t+1] = k .. "=" .. type(v) end end table.sort(t) return t`},
	{name: "no os", src: `return os`},
	{name: "no io", src: `return io`},
	{name: "no debug", src: `return debug`},
	{name: "no print", src: `return print`},
	{name: "no loadfile", src: `return loadfile`},
	{name: "no dofile", src: `return dofile`},
	{name: "no getfenv", src: `return getfenv`},
	{name: "no require", src: `return require`},
	{name: "string library", src: `local t = {} for k in pairs(string) do t[#t+1] = k end table.sort(t) return t`},
	{name: "math library", src: `local t = {} for k, v in pairs(math) do t[#t+1] = k .. "=" .. type(v) end table.sort(t) return t`},
	{name: "table library", src: `local t = {} for k in pairs(table) do t[#t+1] = k end table.sort(t) return t`},
	{name: "coroutine library", src: `local t = {} for k in pairs(coroutine) do t[#t+1] = k end table.sort(t) return t`},
	{name: "bit library", src: `local t = {} for k in pairs(bit) do t[#t+1] = k end table.sort(t) return t`},
	{name: "version", src: `return _VERSION`},
	{name: "string methods", src: `local s = "Hello" return {s:upper(), s:lower(), s:len(), s:sub(2, 3), s:rep(2), s:byte(1)}`},
	{name: "string metatable", src: `return getmetatable("").__index == string`},
	{name: "modify string metatable", src: `getmetatable("").__index = nil`},
	{name: "loadstring", src: `local f = loadstring("return 1 + 1") return f()`},
	{name: "loadstring global", src: `local f = loadstring("x = 1") f()`, luaWording: true},
	{name: "loadstring syntax error", src: `local f, e = loadstring("x = = 1") return {tostring(f), type(e)}`},
	{name: "coroutine", src: `local co = coroutine.create(function(a) local b = coroutine.yield(a + 1) return b * 2 end) local _, x = coroutine.resume(co, 1) local _, y = coroutine.resume(co, 10) return {x, y, coroutine.status(co)}`},
	{name: "coroutine wrap", src: `local f = coroutine.wrap(function() coroutine.yield(1) coroutine.yield(2) end) return {f(), f()}`},
	// A coroutine's value stack starts small and grows: deep calls and a large unpack.
	{name: "coroutine deep", src: `local function depth(n) if n == 0 then return 0 end local a, b, c = n, n, n return a + depth(n - 1) end local t = {} for i = 1, 2000 do t[i] = i end local co = coroutine.create(function() local s = 0 for _, v in ipairs({unpack(t)}) do s = s + v end coroutine.yield(depth(3000)) return s end) local _, x = coroutine.resume(co) local _, y = coroutine.resume(co) return {x, y}`},

	// Numbers and strings as Lua 5.1 converts them.
	{name: "tostring numbers", src: `return {tostring(0.1), tostring(1/3), tostring(1e15), tostring(1e14), tostring(123456789012345), tostring(2^63), tostring(-0.0), tostring(12345678901234567), tostring(1e100), tostring(5e-324), tostring(0.30000000000000004), tostring(100), tostring(-7)}`},
	{name: "tostring special", src: `return {tostring(1/0), tostring(-1/0), tostring(nil), tostring(true)}`},
	{name: "concat numbers", src: `return {1 .. "", 1e15 .. "", (0.1 + 0.2) .. "x", "a" .. 1/3 .. "b", 1764472786000000 .. ":" .. 1, 2^53 .. ""}`},
	{name: "concat chain", src: `local a, b = 1.5, 2 return a .. "-" .. b .. "-" .. (a + b) .. 7`},
	{name: "concat in function", src: `local function f(n) return "n=" .. n end return f(1e15)`},
	{name: "concat nil", src: `return "a" .. nil`, luaWording: true},
	{name: "table.concat numbers", src: `return table.concat({1, 2.5, 1e15, "x", 1/3}, ",")`},
	{name: "table.concat range", src: `return {table.concat({1, 2, 3}, "-", 2), table.concat({1, 2, 3}, "-", 2, 3), table.concat({}, "x")}`},
	{name: "table.concat bad", src: `return table.concat({1, {}, 3})`},
	{name: "string functions with numbers", src: `return {string.len(1e15), string.sub(12345, 2, 3), string.rep(1.5, 2), string.upper(1e100), ("x"):rep(3), string.find(1e15, "e")}`},
	{name: "tonumber", src: `return {tonumber("10"), tonumber(" 10 "), tonumber("0x10"), tonumber("1e2"), tonumber("x"), tonumber(""), tonumber("10", 16), tonumber("ff", 16), tonumber("1e")}`},
	{name: "string arithmetic", src: `return {"10" + 5, "3" * "4", "0x10" + 0, 10 % 3, -10 % 3, 10 % -3, 5.5 % 2, 2^10}`},
	{name: "float arithmetic", src: `return {tostring(0.1 + 0.2), tostring(1e308 * 10), tostring(-(0/0)), 7 / 2, math.floor(-3.5), math.ceil(-3.5), math.fmod(-7, 3), math.huge}`},
	{name: "math functions", src: `return {math.abs(-3), math.max(1, 5, 3), math.min(4, 2), math.sqrt(16), tostring(math.pi), math.floor(2^40 + 0.5), tostring(math.log(10)), tostring(math.exp(1)), math.pow(2, 10), tostring(math.modf(3.7))}`},
	{name: "format integers", src: `return {string.format("%d", 3.7), string.format("%d", -3.7), string.format("%5d|%-5d|%05d", 42, 42, 42), string.format("%x %X %o", 255, 255, 8), string.format("%#x %#o", 255, 8), string.format("%+d % d", 5, 5), string.format("%.3d", 7), string.format("%i", 12)}`},
	{name: "format big integers", src: `return {string.format("%d", 2^53), string.format("%d", 1764472786000000), string.format("%d", 2^63), string.format("%d", -2^63), string.format("%d", 0/0), string.format("%x", -1), string.format("%u", -1)}`},
	{name: "format floats", src: `return {string.format("%.0f", 1764472786000000), string.format("%.0f", 0.5), string.format("%.0f", 1.5), string.format("%.0f", 2.5), string.format("%f", 1/3), string.format("%.3f", 2.0005), string.format("%e", 12345.678), string.format("%g", 0.0001), string.format("%g", 1e20), string.format("%G", 1e-20), string.format("%10.4f|", math.pi), string.format("%-10.2e|", 1234.5)}`},
	{name: "format float specials", src: `return {string.format("%f", 1/0), string.format("%f", -1/0), string.format("%5.1f|", 1/0), string.format("%+f", 1/0), string.format("%g", 1/0), string.format("%E", -1/0)}`},
	{name: "format strings", src: `return {string.format("%s", 1e15), string.format("%s|%5s|%-5s|", "a", "b", "c"), string.format("%.2s", "abcdef"), string.format("%q", "a\nb\"c\\d\r\0e"), string.format("%%"), string.format("%c%c%c", 76, 117, 97), string.format("%s", 0.1)}`},
	{name: "format long string", src: `return string.format("%s", string.rep("ab", 60)) == string.rep("ab", 60)`},
	{name: "format errors 1", src: `return string.format("%d")`},
	{name: "format errors 2", src: `return string.format("%y", 1)`},
	{name: "format errors 3", src: `return string.format("%d", "x")`},
	{name: "format errors 4", src: `return string.format("%123d", 1)`},
	{name: "format errors 5", src: `return string.format("%------d", 1)`},
	{name: "format number string", src: `return string.format("%d %s", "12", 12)`},
	{name: "string.byte char", src: `return {string.byte("ABC", 1, 3), string.char(72, 105)}`},
	{name: "string patterns", src: `return {string.match("key:123:x", "(%d+)"), string.gsub("hello world", "o", "0"), string.find("a.b", ".", 1, true), string.match("  trim  ", "^%s*(.-)%s*$")}`},
	{name: "string gmatch", src: `local t = {} for w in string.gmatch("one two three", "%a+") do t[#t+1] = w end return t`},
	{name: "upper binary", src: `return string.upper("a\200b\255")`},
	{name: "string reverse", src: `return string.reverse("abc\0")`},
	{name: "bit ops", src: `return {bit.band(0xff, 0x0f), bit.bor(1, 2, 4), bit.bxor(5, 3), bit.bnot(0), bit.lshift(1, 31), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), bit.bswap(0x12345678), bit.tobit(2^32 + 5), bit.tobit(-1), bit.tobit(1.5), bit.tobit(2.5)}`},
	{name: "bit tohex", src: `return {bit.tohex(255), bit.tohex(-1), bit.tohex(255, 2), bit.tohex(255, -4), bit.tohex(0x12345678, 12)}`},
	{name: "unpack select", src: `return {select("#", unpack({1, 2, 3})), select(2, "a", "b", "c")}`},
	{name: "ipairs pairs", src: `local n = 0 for i, v in ipairs({1, 2, nil, 4}) do n = n + v end local m = 0 for k, v in pairs({a=1, b=2}) do m = m + v end return {n, m}`},
	{name: "table.sort and insert", src: `local t = {3, 1, 2} table.insert(t, 0) table.sort(t) table.remove(t, 1) return t`},
	{name: "table.getn maxn", src: `return {table.getn({1, 2, 3}), table.maxn({1, 2, [10]=3})}`},
	{name: "table.foreach", src: `local s = 0 table.foreachi({1, 2, 3}, function(i, v) s = s + v end) return s`},
	{name: "table.setn", src: `table.setn({}, 1)`},
	{name: "collectgarbage", src: `return type(collectgarbage("count"))`},
	{name: "type", src: `return {type(1), type("s"), type({}), type(nil), type(true), type(print == nil), type(redis.call)}`},
	{name: "string.sub indices", src: `local s = "hello" return {s:sub(-3), s:sub(2, -2), s:sub(0), s:sub(10), s:sub(-100, 2), s:sub(3, 2), s:sub(2.7, 3.2)}`},
	{name: "string.find", src: `return {string.find("hello", "l"), string.find("hello", "l", 4), string.find("hello", "xyz"), string.find("hello", "", 10), string.find("a+b", "+", 1, true), string.find("key=val", "(%w+)=(%w+)")}`},
	{name: "string patterns 2", src: `return {string.match("[tag]", "%b[]"), string.gsub("abc", "%w", "%0%0"), string.gsub("hello world", "(%w+)", "<%1>"), string.gsub("abc", "b", {b = "B"}), string.gsub("abc", ".", function(c) return c:upper() end)}`},
	{name: "string.rep edge", src: `return {string.rep("x", 0), string.rep("x", -1), string.rep("ab", 3)}`},
	{name: "string.byte edge", src: `return {string.byte("abc", -1), string.byte("abc", 10), string.byte("")}`},
	{name: "string.char bad", src: `return string.char(256)`, luaWording: true},
	{name: "select negative", src: `return {select(-1, "a", "b", "c"), select("#"), select("#", nil, nil)}`},
	{name: "varargs", src: `local function f(...) return select("#", ...), ... end return {f(1, nil, 3)}`},
	{name: "vararg arg table", src: `local function f(...) return arg.n end return f(1, 2)`},
	{name: "numeric for float step", src: `local n = 0 for i = 0, 1, 0.1 do n = n + 1 end return n`},
	{name: "numeric for reverse", src: `local t = {} for i = 3, 1, -1 do t[#t + 1] = i end return t`},
	{name: "big arithmetic", src: `return {tostring(2^53 + 1), tostring(2^53 + 2), (2^53 + 1) == 2^53, tostring(1e308 + 1e308), tostring(-1e308 * 10)}`},
	{name: "modulo", src: `return {tostring(5.5 % 2), tostring(-5.5 % 2), tostring(5 % -3), tostring(math.fmod(5.5, 2)), tostring(math.fmod(-7, 2))}`},
	{name: "modf frexp", src: `local i, f = math.modf(-3.7) local m, e = math.frexp(8) return {tostring(i), tostring(f), tostring(m), e, math.ldexp(0.5, 4)}`},
	{name: "floor ceil negative zero", src: `return {tostring(math.floor(-0.5)), tostring(math.ceil(-0.5)), tostring(-0.0 == 0.0)}`},
	{name: "literal overflow", src: `return {tostring(1e309), tostring(-1e309), tostring(0x7fffffff), tostring(0xffffffffffff)}`},
	{name: "table length", src: `local t = {1, 2, 3} t[#t + 1] = 4 t[#t] = nil return {#t, #"abc", #{n = 1}}`},
	{name: "table.remove edge", src: `local t = {1, 2, 3} local a = table.remove(t) local b = table.remove(t, 1) local c = table.remove({}) return {a, b, tostring(c), #t}`},
	{name: "table.insert position", src: `local t = {1, 2, 3} table.insert(t, 2, 9) return t`},
	{name: "table.sort comparator", src: `local t = {3, 1, 2} table.sort(t, function(a, b) return a > b end) return t`},
	{name: "table.sort strings", src: `local t = {"b", "B", "a", "10", "9"} table.sort(t) return t`},
	{name: "unpack range", src: `return {unpack({1, 2, 3}, 2)}`},
	{name: "unpack explicit", src: `return {unpack({1, 2, 3}, 2, 3)}`},
	{name: "tonumber no arg", src: `return tonumber()`, luaWording: true},
	{name: "coroutine running", src: `return tostring(coroutine.running())`},
	{name: "math.max none", src: `return math.max()`, luaWording: true},
	{name: "string comparison", src: `return {"a" < "b", "10" < "9", "" < "a", "Z" < "a"}`},
	{name: "mixed comparison", src: `return 1 < "2"`, luaWording: true},
	{name: "method on number", src: `local n = 5 return n:len()`, luaWording: true},
	{name: "string format method", src: `return ("%d-%s"):format(3, "x")`},
	{name: "equality", src: `return {1 == 1.0, "1" == 1, {} == {}, nil == false}`},
	{name: "tostring tiny", src: `return {tostring(1e-310), tostring(2^-1074), tostring(123.456e-10)}`},
	{name: "concat numbers precision", src: `return {1/3 .. "", 100 .. "", -0.0 .. "", 2^63 .. "", 1e100 .. ""}`},
	{name: "string.byte", src: `local function n(...) return select('#', ...) end
return {n(string.byte("abc")), n(string.byte("abc", 1, -1)), n(string.byte("abc", 3, 2)), n(string.byte("", 1)),
  n(string.byte("abc", -10, 10)), string.byte("abc", 2), string.byte("abc", -1), string.byte(123, 2),
  string.byte("abc", "2"), string.byte("\255"), string.byte("abc", 0, 10)}`},
	{name: "recursion", src: `local function f(n) if n == 0 then return 0 end return 1 + f(n - 1) end return f(5000)`},
	{name: "syntax error eof", src: `return 1 +`, luaWording: true},
	{name: "syntax error", src: `local x = = 1`, luaWording: true},
	{name: "goto", src: "for i = 1, 3 do\n  goto continue\nend", luaWording: true},
	{name: "label", src: "::top::\nreturn 1", luaWording: true},
	{name: "loadstring error message", src: `local f, e = loadstring("x = = 1") return e`, luaWording: true},
	{name: "syntax error line 2", src: "local a = 1\nlocal x = = 1", luaWording: true},
}

// TestScriptsMatchRedis runs every script case on the real server and on the
// host, and requires identical replies.
func TestScriptsMatchRedis(t *testing.T) {
	t.Parallel()
	rdb := realRedis(t)
	host := luahost.New()
	prefix := keyPrefix(t)
	ctx := context.Background()
	for i, tc := range scriptCases {
		t.Run(tc.name, func(t *testing.T) {
			keys := make([]string, tc.keys)
			for k := range keys {
				keys[k] = fmt.Sprintf("%s:%d:%d", prefix, i, k)
			}
			args := make([]any, len(tc.args))
			for k, a := range tc.args {
				args[k] = a
			}
			want := canon(rdb.Eval(ctx, tc.src, keys, args...).Result())
			got := canon(host.Eval(ctx, tc.src, keys, tc.args))
			if tc.namesCommand != "" {
				const unknown = "Unknown Redis command called from script"
				want = strings.Replace(want, unknown, unknown+tc.namesCommand, 1)
			}
			if tc.luaWording {
				want = luaMessage.ReplaceAllString(want, "${1}<lua message>${2}")
				got = luaMessage.ReplaceAllString(got, "${1}<lua message>${2}")
			}
			if got != want {
				t.Errorf("script %q\n  redis:   %s\n  luahost: %s", tc.src, want, got)
			}
		})
	}
}

// randomID distinguishes runs of the same test binary against a server
// that outlives them.
func randomID() int64 { return time.Now().UnixNano() % 1e9 }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestRandomMatchesFreshRedis compares math.random on a freshly started
// server with a fresh host: Redis 7.0 seeds its generator once, at start,
// and carries its state (and math.randomseed) across scripts.
func TestRandomMatchesFreshRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2})
	t.Cleanup(func() { rdb.Close() })
	host := luahost.New()
	for i, src := range []string{
		`local t = {} for i = 1, 20 do t[i] = math.random(1000000) end return t`,
		`return {tostring(math.random()), math.random(5, 10), math.random(-3, 3), math.random(1)}`,
		`math.randomseed(42) return {math.random(1000), math.random(1000)}`,
		`return {math.random(1000), math.random(2^31 - 1), math.random(-2^31, 2^31 - 1)}`,
		`return math.random(0)`,
		`return math.random(3, 1)`,
		`return math.random(1, 2, 3)`,
	} {
		want := canon(rdb.Eval(ctx, src, nil).Result())
		got := canon(host.Eval(ctx, src, nil, nil))
		want = luaMessage.ReplaceAllString(want, "${1}<lua message>${2}")
		got = luaMessage.ReplaceAllString(got, "${1}<lua message>${2}")
		if got != want {
			t.Errorf("script %d %q\n  redis:   %s\n  luahost: %s", i, src, want, got)
		}
	}
}

// TestCommandTableMatchesRedis checks the host's commands against the
// server's COMMAND INFO: every command the host implements is a Redis
// command with the same arity and key positions (which strict keys and the
// arity check rely on), the same "write" flag (which IsWrite reports, and
// rlctl's plugin checks rely on) and "denyoom" flag (which the memory cap
// acts on), and the host's list of Redis 7.0 command names is the server's
// when the server is a 7.0.
func TestCommandTableMatchesRedis(t *testing.T) {
	t.Parallel()
	rdb := realRedis(t)
	info, err := rdb.Command(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range luahost.Commands() {
		lower := strings.ToLower(name)
		ci := info[lower]
		if ci == nil {
			t.Errorf("%s: the host implements it; Redis has no such command", name)
			continue
		}
		arity, first, last, step, _ := luahost.CommandSpec(name)
		got := fmt.Sprint(arity, first, last, step)
		want := fmt.Sprint(ci.Arity, ci.FirstKeyPos, ci.LastKeyPos, ci.StepCount)
		if got != want {
			t.Errorf("%s: arity and keys %s, Redis %s", name, got, want)
		}
		if write := slices.Contains(ci.Flags, "write"); luahost.IsWrite(name) != write {
			t.Errorf("%s: IsWrite %v; Redis's flags are %v", name, luahost.IsWrite(name), ci.Flags)
		}
		if deny := slices.Contains(ci.Flags, "denyoom"); luahost.DenyOOM(name) != deny {
			t.Errorf("%s: refused over the memory cap %v; Redis's flags are %v", name, luahost.DenyOOM(name), ci.Flags)
		}
		if !luahost.RedisCommands()[lower] {
			t.Errorf("%s: not among the host's Redis command names", name)
		}
	}
	version, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(version, "redis_version:7.0.") {
		t.Logf("the server is not a Redis 7.0; not comparing its command names")
		return
	}
	known := luahost.RedisCommands()
	for name := range info {
		if !known[name] {
			t.Errorf("%s: a Redis 7.0 command missing from the host's names", name)
		}
	}
	for name := range known {
		if info[name] == nil {
			t.Errorf("%s: among the host's Redis command names; the server does not have it", name)
		}
	}
}
