package luahost_test

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlctl/rlctl/luahost"
)

var ctx = context.Background()

// errMsg returns err's Redis error text, failing the test unless err is an
// *ErrorReply.
func errMsg(t *testing.T, err error) string {
	t.Helper()
	var e *luahost.ErrorReply
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *ErrorReply", err, err)
	}
	return e.Msg
}

func TestReplyTypes(t *testing.T) {
	h := luahost.New()
	for _, tc := range []struct {
		name string
		src  string
		want any
	}{
		{"integer", `return 7`, int64(7)},
		{"float truncated", `return -2.9`, int64(-2)},
		{"out of range", `return 2^64`, int64(-9223372036854775808)},
		{"bulk", `return "x"`, "x"},
		{"true", `return true`, int64(1)},
		{"false", `return false`, nil},
		{"nil", `return nil`, nil},
		{"status", `return redis.status_reply("QUEUED")`, "QUEUED"},
		{"array", `return {1, "two", {3}}`, []any{int64(1), "two", []any{int64(3)}}},
		{"array to first nil", `return {1, nil, 3}`, []any{int64(1)}},
		{"empty array", `return {}`, []any{}},
		{"nested status", `return {{ok="OK"}}`, []any{"OK"}},
		{"nested error", `return {1, {err="ERR inner"}}`, []any{int64(1), &luahost.ErrorReply{Msg: "ERR inner"}}},
		{"redis.call replies", `
			redis.call("SET", KEYS[1], "v")
			local got = redis.call("GET", KEYS[1])
			local missing = redis.call("GET", KEYS[2])
			local st = redis.call("SET", KEYS[1], "w")
			local n = redis.call("EXISTS", KEYS[1], KEYS[2])
			redis.call("HSET", KEYS[3], "f", "1")
			local arr = redis.call("HMGET", KEYS[3], "f", "g")
			return {got, tostring(missing), st.ok, n, arr[1], tostring(arr[2])}`,
			[]any{"v", "false", "OK", int64(1), "1", "false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := h.Eval(ctx, tc.src, []string{"k1", "k2", "k3"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	h := luahost.New()
	for _, tc := range []struct {
		name, src string
		want      string // the whole message, or its start when it ends in "..."
	}{
		{"error reply", `return redis.error_reply("LIMIT over")`, "LIMIT over"},
		{"error table", `return {err="ERR custom"}`, "ERR custom"},
		{"raised string", `error("boom")`, "ERR user_script:1: boom script: 872b3fcb081448525c6141cdfa3df8374d30d162, on @user_script:1."},
		{"raised table keeps code", `error({err="LIMIT no"})`, "LIMIT no script: ..."},
		{"call error keeps code", `redis.call("SET", KEYS[1], "v") return redis.call("HGET", KEYS[1], "f")`, "WRONGTYPE Operation against a key holding the wrong kind of value script: ..."},
		{"pcall error is a reply", `redis.call("SET", KEYS[1], "v") return redis.pcall("HGET", KEYS[1], "f")`, "WRONGTYPE Operation against a key holding the wrong kind of value"},
		{"bad argument", `return redis.call("GET", {})`, "ERR Lua redis lib command arguments must be strings or integers script: ..."},
		{"command the host lacks", `return redis.call("FLUSHALL")`, "ERR Unknown Redis command called from script: luahost does not implement 'FLUSHALL' script: ..."},
		{"command Redis lacks", `return redis.call("SETEXX", KEYS[1], 1, "v")`, "ERR Unknown Redis command called from script: 'SETEXX' script: ..."},
		{"unknown command caught", `return redis.pcall("blpop", KEYS[1], 0)`, "ERR Unknown Redis command called from script: luahost does not implement 'blpop'"},
		{"arity", `return redis.call("GET")`, "ERR Wrong number of args calling Redis command from script script: ..."},
		{"line number", "local a = 1\n\nerror('x')", "ERR user_script:3: x script: ..."},
		{"syntax", `return +`, "ERR Error compiling script (new function): user_script:1: ..."},
		{"resp3", `redis.setresp(3)`, "ERR luahost: RESP3 replies (redis.setresp(3)) are not supported script: ..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.Eval(ctx, tc.src, []string{"k"}, nil)
			if err == nil {
				t.Fatal("no error")
			}
			got := errMsg(t, err)
			if prefix, ok := strings.CutSuffix(tc.want, "..."); ok {
				if !strings.HasPrefix(got, prefix) {
					t.Errorf("got %q, want it to start with %q", got, prefix)
				}
			} else if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestErrorReplyIsARedisError(t *testing.T) {
	h := luahost.New()
	_, err := h.EvalSHA(ctx, strings.Repeat("0", 40), nil, nil)
	if !redis.HasErrorPrefix(err, "NOSCRIPT") {
		t.Errorf("redis.HasErrorPrefix(%v, NOSCRIPT) = false", err)
	}
}

func TestScriptCache(t *testing.T) {
	h := luahost.New()
	const src = `return ARGV[1]`
	sha, err := h.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%x", sha1.Sum([]byte(src))); sha != want {
		t.Fatalf("sha = %q, want %q", sha, want)
	}
	for _, s := range []string{sha, strings.ToUpper(sha)} {
		got, err := h.EvalSHA(ctx, s, nil, []string{"a"})
		if err != nil || got != "a" {
			t.Fatalf("EvalSHA(%s) = %v, %v", s, got, err)
		}
	}
	if again, err := h.Load(src); err != nil || again != sha {
		t.Fatalf("second Load = %q, %v; want %q", again, err, sha)
	}
	h.FlushScripts()
	_, err = h.EvalSHA(ctx, sha, nil, []string{"a"})
	if err == nil || errMsg(t, err) != "NOSCRIPT No matching script. Please use EVAL." {
		t.Fatalf("after FlushScripts: %v", err)
	}
	if _, err := h.Load(`return (`); err == nil || !strings.HasPrefix(errMsg(t, err), "ERR Error compiling script") {
		t.Fatalf("Load of bad syntax: %v", err)
	}
}

// TestEnvironmentIsReadOnly tries every way a script could leave state
// behind for the next script, and checks that the next script still sees
// the pristine environment.
func TestEnvironmentIsReadOnly(t *testing.T) {
	h := luahost.New()
	for _, src := range []string{
		`x = 1`,
		`redis = nil`,
		`redis.call = nil`,
		`string.format = nil`,
		`math.random = function() return 4 end`,
		`_G.tostring = nil`,
		`rawset(_G, "y", 1)`,
		`rawset(string, "z", 1)`,
		`setmetatable(_G, {})`,
		`getmetatable(_G).__index = {}`,
		`getmetatable("").__index = {}`,
		`getmetatable("").__index.upper = nil`,
		`setmetatable("", {})`,
		`table.insert(string, "x")`,
		`table.sort(math)`,
		`table.remove(redis)`,
		`KEYS = {}`,
		`local f = loadstring("w = 1") f()`,
	} {
		if _, err := h.Eval(ctx, src, nil, nil); err == nil {
			t.Errorf("%s: no error", src)
		}
	}
	const check = `
		assert(redis.call and string.format and math.random and tostring and string.upper)
		assert(rawget(_G, "x") == nil and rawget(_G, "y") == nil and rawget(string, "z") == nil)
		assert(("a"):upper() == "A")
		assert(not pcall(function() return w end))
		return #KEYS`
	got, err := h.Eval(ctx, check, []string{"k"}, nil)
	if err != nil || got != int64(1) {
		t.Fatalf("environment changed: %v, %v", got, err)
	}
}

func TestKeysAndArgvAreFreshEachCall(t *testing.T) {
	h := luahost.New(luahost.WithStrictKeys(false))
	sha, err := h.Load(`
		local seen = {#KEYS, #ARGV, tostring(KEYS.extra), tostring(ARGV[3])}
		KEYS[1] = "changed"; KEYS.extra = "x"; ARGV[3] = "y"; KEYS[9] = "z"
		return seen`)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{int64(1), int64(2), "nil", "nil"}
	for i := 0; i < 3; i++ {
		got, err := h.EvalSHA(ctx, sha, []string{"k"}, []string{"a", "b"})
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("call %d: %#v, %v; want %#v", i, got, err, want)
		}
	}
}

func TestDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
	}{
		{"loop", `while true do end`},
		{"loop inside pcall", `while true do pcall(function() while true do end end) end`},
		{"coroutine", `local co = coroutine.create(function() while true do end end) coroutine.resume(co) while true do end`},
		{"recursion with calls", `local function f() redis.call("INCR", KEYS[1]) return f() end f()`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := luahost.New(luahost.WithTimeout(20 * time.Millisecond))
			_, err := h.Eval(ctx, tc.src, []string{"k"}, nil)
			if !errors.Is(err, luahost.ErrTimeout) {
				t.Fatalf("err = %v, want ErrTimeout", err)
			}
			if msg := errMsg(t, err); !strings.HasPrefix(msg, "ERR Script killed by luahost") {
				t.Errorf("message %q", msg)
			}
			// The host is still usable.
			if got, err := h.Eval(ctx, `return 1`, nil, nil); err != nil || got != int64(1) {
				t.Fatalf("after timeout: %v, %v", got, err)
			}
		})
	}
}

func TestContextCancelsScript(t *testing.T) {
	h := luahost.New(luahost.WithTimeout(0))
	c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err := h.Eval(c, `while true do end`, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	done, cancel2 := context.WithCancel(ctx)
	cancel2()
	if _, err := h.Eval(done, `return 1`, nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("done context: err = %v", err)
	}
}

func TestStrictKeys(t *testing.T) {
	for _, tc := range []struct {
		name   string
		strict bool
		src    string
		ok     bool
	}{
		{"declared key", true, `return redis.call("GET", KEYS[1])`, true},
		{"other key", true, `return redis.call("GET", "other")`, false},
		{"second of many keys", true, `return redis.call("DEL", KEYS[1], "other")`, false},
		{"all keys declared", true, `return redis.call("EXISTS", KEYS[1], KEYS[1])`, true},
		{"keyless command", true, `return redis.call("TIME")`, true},
		{"pcall sees the error", true, `return redis.pcall("GET", "other").err`, true},
		{"not strict", false, `return redis.call("GET", "other")`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := luahost.New(luahost.WithStrictKeys(tc.strict))
			_, err := h.Eval(ctx, tc.src, []string{"k"}, nil)
			if tc.ok && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if !tc.ok && (err == nil || !strings.Contains(errMsg(t, err), "neither in KEYS nor in the cluster slot")) {
				t.Fatalf("err = %v, want a strict-keys error", err)
			}
		})
	}
	h := luahost.New()
	if _, err := h.Do(ctx, "SET", "anything", "v"); err != nil {
		t.Fatalf("Do is not limited to KEYS: %v", err)
	}
}

func TestCommandAllowlist(t *testing.T) {
	h := luahost.New(luahost.WithCommands("get", "HSET"))
	for _, tc := range []struct {
		src string
		ok  bool
	}{
		{`return redis.call("GET", KEYS[1])`, true},
		{`return redis.call("hset", KEYS[1], "f", "v")`, true},
		{`return redis.call("SET", KEYS[1], "v")`, false},
		{`return {redis.acl_check_cmd("get"), redis.acl_check_cmd("set")}`, true},
	} {
		got, err := h.Eval(ctx, tc.src, []string{"k"}, nil)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", tc.src, err)
		case !tc.ok && (err == nil || !strings.HasPrefix(errMsg(t, err), "ERR This Redis command is not allowed from script")):
			t.Errorf("%s: got %v, %v; want not allowed", tc.src, got, err)
		}
	}
	got, _ := h.Eval(ctx, `return {redis.acl_check_cmd("get"), redis.acl_check_cmd("set")}`, nil, nil)
	if !reflect.DeepEqual(got, []any{int64(1), nil}) {
		t.Errorf("acl_check_cmd: %#v", got)
	}
	// The host remembers its last command names (Host.lookup): more allowed names than it
	// remembers, in both cases, and then one it must still refuse, and one it must still
	// allow.
	many := luahost.New(luahost.WithCommands("GET", "SET", "HSET", "HGET", "DEL", "EXISTS", "INCR", "DECR", "PEXPIRE", "TTL"))
	cycle := `for i = 1, 3 do
  for _, c in ipairs({'GET', 'set', 'EXISTS', 'ttl', 'PEXPIRE', 'DEL', 'incr', 'DECR', 'get', 'Exists'}) do
    if c == 'set' then
      redis.call(c, KEYS[1], 'v')
    elseif c == 'PEXPIRE' then
      redis.call(c, KEYS[1], 1000)
    elseif c == 'incr' or c == 'DECR' then
      redis.call(c, KEYS[2])
    else
      redis.call(c, KEYS[1])
    end
  end
end
redis.call('SET', KEYS[1], 'v')
`
	if _, err := many.Eval(ctx, cycle+`return redis.call('HDEL', KEYS[1], 'f')`, []string{"k", "n"}, nil); err == nil || !strings.HasPrefix(errMsg(t, err), "ERR This Redis command is not allowed from script") {
		t.Errorf("HDEL after a cycle of allowed commands: %v, want not allowed", err)
	}
	if got, err := many.Eval(ctx, cycle+`return redis.call('TTL', KEYS[1])`, []string{"k", "n"}, nil); err != nil || got != int64(-1) {
		t.Errorf("TTL after a cycle of allowed commands: %v, %v", got, err)
	}
	if _, err := h.Do(ctx, "SET", "k", "v"); err != nil {
		t.Errorf("Do is not limited by the allowlist: %v", err)
	}
}

// TestIsWrite checks the write flag's accessor: case-insensitive, false for
// reads, for commands that touch no data and for commands the host lacks
// (TestCommandTableMatchesRedis holds every flag to a real server's).
func TestIsWrite(t *testing.T) {
	for name, want := range map[string]bool{
		"SET": true, "hset": true, "PExpire": true, "DEL": true, "ZPOPMIN": true, "GETDEL": true,
		"GET": false, "hmget": false, "PTTL": false, "ZRANGE": false, "TOUCH": false,
		"PING": false, "TIME": false, "BLPOP": false, "nosuch": false, "": false,
	} {
		if got := luahost.IsWrite(name); got != want {
			t.Errorf("IsWrite(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestExpiryFollowsClock checks Redis's expiry rule on a manual clock: a key
// lives while now <= its expire time, in milliseconds.
func TestExpiryFollowsClock(t *testing.T) {
	start := time.UnixMilli(1764472786000).Add(400 * time.Microsecond)
	clock := luahost.NewManualClock(start)
	h := luahost.New(luahost.WithClock(clock))
	do := func(args ...string) any {
		t.Helper()
		r, err := h.Do(ctx, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return r
	}
	do("SET", "a", "1", "PX", "100")
	do("HSET", "b", "f", "1")
	do("PEXPIRE", "b", "250")
	do("SET", "c", "1")
	for _, step := range []struct {
		advance time.Duration
		pttlA   int64
		keys    []string
	}{
		{0, 100, []string{"a", "b", "c"}},
		{99 * time.Millisecond, 1, []string{"a", "b", "c"}},
		{600 * time.Microsecond, 0, []string{"a", "b", "c"}}, // same millisecond as the expire time
		{time.Millisecond, -2, []string{"b", "c"}},
		{200 * time.Millisecond, -2, []string{"c"}},
	} {
		clock.Advance(step.advance)
		if got := do("PTTL", "a"); got != step.pttlA {
			t.Errorf("at %v: PTTL a = %v, want %d", clock.Now().Sub(start), got, step.pttlA)
		}
		if got := h.Keys(); !reflect.DeepEqual(got, step.keys) {
			t.Errorf("at %v: Keys() = %v, want %v", clock.Now().Sub(start), got, step.keys)
		}
		if got := h.Len(); got != len(step.keys) {
			t.Errorf("at %v: Len() = %d, want %d", clock.Now().Sub(start), got, len(step.keys))
		}
	}
	// TTL rounds to the nearest second; non-positive TTLs delete.
	do("SET", "d", "1", "PX", "1500")
	if got := do("TTL", "d"); got != int64(2) {
		t.Errorf("TTL of 1500ms = %v, want 2", got)
	}
	if got := do("EXPIRE", "d", "0"); got != int64(1) || do("EXISTS", "d") != int64(0) {
		t.Errorf("EXPIRE 0 did not delete the key")
	}
}

func TestTimeAnswersClock(t *testing.T) {
	clock := luahost.NewManualClock(time.Unix(1764472786, 123456789))
	h := luahost.New(luahost.WithClock(clock))
	got, err := h.Eval(ctx, `return redis.call("TIME")`, nil, nil)
	if err != nil || !reflect.DeepEqual(got, []any{"1764472786", "123456"}) {
		t.Fatalf("TIME = %#v, %v", got, err)
	}
	// Within a second, into the next, and backwards: the seconds' text follows the clock.
	for _, step := range []time.Duration{876543 * time.Microsecond, time.Microsecond, 2 * time.Second, -3 * time.Second} {
		clock.Advance(step)
		us := clock.Now().UnixMicro()
		want := []any{strconv.FormatInt(us/1e6, 10), strconv.FormatInt(us%1e6, 10)}
		got, err := h.Eval(ctx, `local t = redis.call("TIME") return {t[1], t[2]}`, nil, nil)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("after %v: TIME = %#v, %v; want %v", step, got, err, want)
		}
		if got, err := h.Do(ctx, "TIME"); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("after %v: Do(TIME) = %#v, %v; want %v", step, got, err, want)
		}
	}
}

func TestSweepFreesIdleKeys(t *testing.T) {
	clock := luahost.NewManualClock(time.Unix(1e9, 0))
	h := luahost.New(luahost.WithClock(clock))
	sha, err := h.Load(`redis.call("SET", KEYS[1], "x", "PX", 1000)`)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10000; i++ {
		if _, err := h.EvalSHA(ctx, sha, []string{"k" + itoa(int64(i))}, nil); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Millisecond)
	}
	// Keys set at 9000ms..9999ms live until 10000ms..10999ms; it is 10000ms.
	if n := h.Len(); n != 1000 {
		t.Errorf("Len() = %d, want the 1000 keys set in the last second", n)
	}
}

func TestDump(t *testing.T) {
	clock := luahost.NewManualClock(time.UnixMilli(1000))
	h := luahost.New(luahost.WithClock(clock))
	h.Do(ctx, "HSET", "h", "b", "2", "a", "1")
	h.Do(ctx, "HSET", "h2", "a", "1", "b", "2")
	h.Do(ctx, "ZADD", "z", "0.1", "m", "2", "n")
	h.Do(ctx, "SET", "s", "v", "PX", "500")
	for _, tc := range []struct{ key, want string }{
		{"h", "hash|1:a,1:1,1:b,1:2,|ttl:none"},
		{"h2", "hash|1:a,1:1,1:b,1:2,|ttl:none"},
		{"z", "zset|1:m,19:0.10000000000000001,1:n,1:2,|ttl:none"},
		{"s", "string|1:v,|ttl:at 1500ms"},
	} {
		got, ok := h.Dump(tc.key)
		if !ok || got != tc.want {
			t.Errorf("Dump(%q) = %q, %v; want %q", tc.key, got, ok, tc.want)
		}
	}
	if _, ok := h.Dump("missing"); ok {
		t.Error("Dump of a missing key reports it live")
	}
}

// TestConcurrentScriptsAreAtomic runs a read-modify-write script from many
// goroutines: without atomicity increments would be lost.
func TestConcurrentScriptsAreAtomic(t *testing.T) {
	h := luahost.New()
	sha, err := h.Load(`
		local v = tonumber(redis.call("GET", KEYS[1]) or "0")
		redis.call("SET", KEYS[1], v + 1)
		return v + 1`)
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 200
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := h.EvalSHA(ctx, sha, []string{"n"}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got, _ := h.Do(ctx, "GET", "n"); got != itoa(workers*each) {
		t.Fatalf("counter = %v, want %d", got, workers*each)
	}
}

// An instruction limit stops a runaway script at the same instruction on every run,
// whatever the machine's speed, keeping its writes as Redis keeps a killed script's;
// a script within the limit runs as usual.
func TestInstructionLimit(t *testing.T) {
	ctx := context.Background()
	var writes []any
	for range 2 {
		h := luahost.New(luahost.WithTimeout(0), luahost.WithInstructionLimit(10_000))
		_, err := h.Eval(ctx, "local i = 0 while true do i = i + 1 redis.call('SET', KEYS[1], i) end", []string{"k"}, nil)
		if !errors.Is(err, luahost.ErrInstructionLimit) || !strings.Contains(err.Error(), "ran past 10000 Lua instructions") {
			t.Fatalf("runaway script: %v", err)
		}
		v, _ := h.Do(ctx, "GET", "k")
		writes = append(writes, v)
		if r, err := h.Eval(ctx, "return redis.call('INCR', KEYS[1])", []string{"k"}, nil); err != nil || r == nil {
			t.Fatalf("short script after a killed one: %v %v", r, err)
		}
	}
	if writes[0] != writes[1] || writes[0] == nil {
		t.Fatalf("killed at different instructions: %v", writes)
	}
}
