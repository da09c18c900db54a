package luahost_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rlctl/rlctl/internal/redistest"
	"github.com/rlctl/rlctl/luahost"
)

// functionCase is a sequence of commands run on a server and on a host that both start
// without libraries. "{k}" in an argument becomes the case's key prefix.
type functionCase struct {
	name  string
	steps [][]string
	// luaWording: compare errors without the text of Lua's own messages.
	luaWording bool
}

func load(code string) []string        { return []string{"FUNCTION", "LOAD", code} }
func loadReplace(code string) []string { return []string{"FUNCTION", "LOAD", "REPLACE", code} }
func fcall(args ...string) []string    { return append([]string{"FCALL"}, args...) }
func fcallRO(args ...string) []string  { return append([]string{"FCALL_RO"}, args...) }

// lib is a library named name whose code is body after the "#!" line.
func lib(name, body string) string { return "#!lua name=" + name + "\n" + body }

// registering runs code at a library's top level and then registers a function, so that
// the load fails or succeeds on code alone.
func registering(code string) []string {
	return loadReplace(lib("t", code+"\nredis.register_function('t', function() return 1 end)"))
}

// probe is a library whose function p returns what its first argument evaluates to at
// call time, as {ok, tostring(value), type(value)}.
var probe = lib("probe", `
redis.register_function('p', function(keys, args)
  local ok, v = pcall(loadstring('return ' .. args[1]))
  return {tostring(ok), tostring(v), type(v)}
end)`)

var functionCases = []functionCase{
	{name: "load and call", steps: [][]string{
		load(lib("l1", `
local calls = 0
redis.register_function('count', function(keys, args)
  calls = calls + 1
  return {calls, #keys, #args, keys[1], args[1]}
end)
redis.register_function{function_name='named', callback=function(keys, args) return args end, description='d', flags={'no-writes'}}
`)),
		fcall("count", "0"), fcall("count", "1", "{k}a", "x"), fcall("COUNT", "2", "{k}a", "{k}b", "x", "y"),
		fcall("named", "0", "a", "b"), fcallRO("named", "0", "a"),
	}},
	{name: "metadata", steps: [][]string{
		load("lua name=x\n"), load("#!lua name=x"), load("#!js name=x\nreturn"), load("#!lua\n"),
		load("#!lua name=x name=y\n"), load("#!lua name=x foo=bar\n"), load("#!lua name=\n"), load("#!lua name=a-b\n"),
		load("#!LUA NAME=Up\nredis.register_function('up', function() return 1 end)"),
		load("#!lua    name=sp   \nredis.register_function('sp', function() return 1 end)"),
		load("#!lua \"name=q\"\nredis.register_function('q', function() return 1 end)"),
		load("#!lua name=\"q x\"\n"), load("#!lua name=\"qx\n"), load("#!\n"), load("#! name=x\n"),
		load(lib("e", "")), load(lib("e", "return 1")),
		{"FUNCTION", "LOAD"}, {"FUNCTION", "LOAD", "a", "b"}, {"FUNCTION", "LOAD", "REPLACE"},
		fcall("up", "0"), fcall("sp", "0"), fcall("q", "0"),
	}},
	{name: "load sandbox", steps: [][]string{
		registering("local x = math.floor(1.5)"), registering("redis.call('PING')"), registering("x = 1"),
		registering("local e = KEYS"), registering("pcall(print)"), registering("local t = string.format('%d', 3)"),
		registering("local v = redis.setresp"), registering("local v = _G"),
		registering("redis.log(redis.LOG_WARNING, 'loading ' .. redis.REDIS_VERSION_NUM)"),
		registering("local x = redis.LOG_DEBUG + redis.LOG_VERBOSE + redis.LOG_NOTICE"),
		registering("redis.register_function = 1"),
		fcall("t", "0"),
	}},
	{name: "compile error", luaWording: true, steps: [][]string{
		registering("local x = = 1"), registering("local x ="),
	}},
	{name: "register_function arguments", steps: [][]string{
		registering("redis.register_function('a-b', function() end)"),
		registering("redis.register_function('a', function() end) redis.register_function('a', function() end)"),
		registering("redis.register_function()"),
		registering("redis.register_function('a', function() end, 1)"),
		registering("redis.register_function({}, function() end)"),
		registering("redis.register_function(12, function() return 12 end)"),
		registering("redis.register_function('a', 1)"),
		registering("redis.register_function('a')"),
		registering("redis.register_function{function_name='a', callback=function() end, foo=1}"),
		registering("redis.register_function{function_name='a', callback=function() end, flags={'nope'}}"),
		registering("redis.register_function{function_name='a', callback=function() end, flags={1}}"),
		registering("redis.register_function{function_name='a', callback=function() end, flags='no-writes'}"),
		registering("redis.register_function{callback=function() end}"),
		registering("redis.register_function{function_name='a'}"),
		registering("redis.register_function{function_name='a', callback=function() end, description={}}"),
		registering("redis.register_function{function_name='a', callback=function() end, [{}]=1}"),
		registering("redis.register_function{[1]=2}"),
		registering("redis.register_function{function_name='a', callback=1}"),
		registering("redis.register_function{function_name={}, callback=function() end}"),
		registering("redis.register_function{FUNCTION_NAME='b', CALLBACK=function() return 'b' end, FLAGS={'NO-WRITES'}}"),
		fcall("12", "0"), fcallRO("b", "0"),
		registering("local reg = redis.register_function\nredis.register_function('late', function() reg('x', function() end) end)"),
		fcall("late", "0"),
	}},
	{name: "replace and collisions", steps: [][]string{
		load(lib("r1", "redis.register_function('f1', function() return 1 end)")),
		load(lib("r1", "redis.register_function('f1', function() return 2 end)")),
		fcall("f1", "0"),
		loadReplace(lib("r1", "redis.register_function('f1', function() return 3 end)")),
		fcall("f1", "0"),
		loadReplace(lib("r1", "error('x')")),
		loadReplace(lib("r1", "local x = math.pi")),
		fcall("f1", "0"),
		load(lib("r2", "redis.register_function('F1', function() return 4 end)")),
		loadReplace(lib("r2", "redis.register_function('F1', function() return 4 end)")),
		load(lib("R1", "redis.register_function('g1', function() return 5 end)")),
		fcall("G1", "0"),
		{"FUNCTION", "DELETE", "r1"}, fcall("f1", "0"), {"FUNCTION", "DELETE", "r1"}, {"FUNCTION", "DELETE", "r2"},
		{"FUNCTION", "DELETE"}, {"FUNCTION", "DELETE", "a", "b"},
		load(lib("r2", "redis.register_function('f1', function() return 6 end)")),
		fcall("f1", "0"),
	}},
	{name: "fcall arguments", steps: [][]string{
		load(lib("a", "redis.register_function('ret', function(keys, args) return {#keys, #args} end)")),
		{"FCALL"}, {"FCALL", "ret"}, fcall("ret", "x"), fcall("ret", "-1"), fcall("ret", "3", "a"),
		fcall("ret", "01", "a"), fcall("ret", " 1", "a"), fcall("nosuch", "x"), fcall("nosuch", "0"),
		fcall("ret", "1", "{k}a"), fcall("ret", "0", "a", "b"), {"FCALL_RO"}, fcallRO("ret", "0"),
	}},
	{name: "runtime environment", steps: [][]string{
		load(probe),
		fcall("p", "0", "KEYS"), fcall("p", "0", "ARGV"), fcall("p", "0", "redis.register_function"),
		fcall("p", "0", "redis.replicate_commands"), fcall("p", "0", "redis.breakpoint"), fcall("p", "0", "redis.debug"),
		fcall("p", "0", "type(redis.setresp)"), fcall("p", "0", "type(redis.set_repl)"), fcall("p", "0", "redis.REPL_ALL"),
		fcall("p", "0", "type(redis.call)"), fcall("p", "0", "type(redis.sha1hex)"), fcall("p", "0", "type(redis.acl_check_cmd)"),
		fcall("p", "0", "type(_G)"), fcall("p", "0", "_G == _G._G"), fcall("p", "0", "getfenv"),
		fcall("p", "0", "type(string)"), fcall("p", "0", "type(bit)"), fcall("p", "0", "_G.KEYS"),
		fcall("p", "0", "rawget(_G, 'x')"), fcall("p", "0", "redis.REDIS_VERSION_NUM > 0"),
		fcall("p", "0", "#redis.sha1hex('x')"), fcall("p", "0", "redis.status_reply('x').ok"),
		fcall("p", "0", "math.floor(2.5) .. 'x'"), fcall("p", "0", "1/3 .. ''"),
	}},
	{name: "runtime errors", steps: [][]string{
		load(lib("errs", `
redis.register_function('boom', function(keys, args) error('boom') end)
redis.register_function('boomtable', function(keys, args) error({err='XX boom'}) end)
redis.register_function('wrongtype', function(keys, args)
  redis.call('SET', keys[1], 'x')
  return redis.call('HGET', keys[1], 'f')
end)
redis.register_function('caught', function(keys, args) return redis.pcall('HGET', keys[1], 'f') end)
redis.register_function('pcalled', function(keys, args) return {pcall(redis.call, 'HGET', keys[1], 'f')} end)
redis.register_function('global', function(keys, args) x = 1 end)
redis.register_function('loaded', function(keys, args) return loadstring('x = 1')() end)
redis.register_function('reply', function(keys, args) return {err='custom'} end)
redis.register_function('status', function(keys, args) return redis.status_reply('fine') end)
redis.register_function('arity', function(keys, args) return redis.pcall('GET') end)
`)),
		fcall("boom", "0"), fcall("boomtable", "0"), fcall("wrongtype", "1", "{k}s"), fcall("caught", "1", "{k}s"),
		fcall("pcalled", "1", "{k}s"), fcall("global", "0"), fcall("loaded", "0"), fcall("reply", "0"),
		fcall("status", "0"), fcall("arity", "0"),
	}},
	{name: "no-writes", steps: [][]string{
		load(lib("ro", `
redis.register_function{function_name='get', callback=function(keys, args) return redis.call('GET', keys[1]) end, flags={'no-writes'}}
redis.register_function{function_name='set', callback=function(keys, args) return redis.call('SET', keys[1], 'v') end, flags={'no-writes'}}
redis.register_function{function_name='pset', callback=function(keys, args) return redis.pcall('SET', keys[1], 'v') end, flags={'no-writes'}}
redis.register_function('rw', function(keys, args) return redis.call('SET', keys[1], 'v') end)
`)),
		fcall("rw", "1", "{k}a"), fcallRO("rw", "1", "{k}a"), fcallRO("get", "1", "{k}a"), fcall("get", "1", "{k}a"),
		fcallRO("set", "1", "{k}a"), fcall("set", "1", "{k}a"), fcall("pset", "1", "{k}a"),
	}},
	{name: "list and flush", steps: [][]string{
		load(lib("ls", "redis.register_function{function_name='lf', callback=function() return 1 end, description='about', flags={'allow-stale', 'no-writes'}}")),
		load(lib("other", "redis.register_function('of', function() return 1 end)")),
		{"FUNCTION", "LIST", "LIBRARYNAME", "ls"}, {"FUNCTION", "LIST", "libraryname", "L?", "WITHCODE"},
		{"FUNCTION", "LIST", "LIBRARYNAME", "o*"}, {"FUNCTION", "LIST", "LIBRARYNAME", "[a-m]s"},
		{"FUNCTION", "LIST", "LIBRARYNAME", "nothing"}, {"FUNCTION", "LIST", "foo"}, {"FUNCTION", "LIST", "LIBRARYNAME"},
		{"FUNCTION", "LIST", "withcode", "withcode"}, {"FUNCTION", "LIST", "LIBRARYNAME", "a", "LIBRARYNAME", "b"},
		{"FUNCTION", "FLUSH", "x"}, {"FUNCTION", "FLUSH", "ASYNC", "SYNC"}, {"FUNCTION", "FLUSH", "async"},
		{"FUNCTION", "LIST"}, fcall("lf", "0"),
		load(lib("ls", "redis.register_function('lf', function() return 2 end)")), {"FUNCTION", "FLUSH"}, {"FUNCTION", "LIST"},
		{"FUNCTION"}, {"FUNCTION", "FOO"},
	}},
}

// compileWording matches the part of a library's compile error that gopher-lua words
// differently from Lua 5.1.
var compileWording = regexp.MustCompile(`(Error compiling function: user_function:\d+: ).*( near '[^']*')$`)

// TestFunctionsMatchRedis runs every function case on a server of its own (the cases
// flush its libraries) and on a new host, and requires identical replies.
func TestFunctionsMatchRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	prefix := keyPrefix(t)
	for _, tc := range functionCases {
		t.Run(tc.name, func(t *testing.T) {
			if err := rdb.FunctionFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			host := luahost.New()
			for i, step := range tc.steps {
				cmd := make([]string, len(step))
				args := make([]any, len(step))
				for j, a := range step {
					cmd[j] = strings.ReplaceAll(a, "{k}", prefix+":"+tc.name+":")
					args[j] = cmd[j]
				}
				want := canon(rdb.Do(ctx, args...).Result())
				got := canon(host.Do(ctx, cmd...))
				if tc.luaWording {
					want = compileWording.ReplaceAllString(want, "${1}<lua message>${2}")
					got = compileWording.ReplaceAllString(got, "${1}<lua message>${2}")
				}
				if got != want {
					t.Errorf("step %d %q\n  redis:   %s\n  luahost: %s", i, cmd, want, got)
				}
			}
		})
	}
}
