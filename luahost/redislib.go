package luahost

import (
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The version the host reports to scripts: the Redis it emulates.
const (
	redisVersion    = "7.0.0"
	redisVersionNum = 0x070000
)

// maxReplyDepth bounds the nesting of a script's reply, as Redis's Lua stack
// does (a table that contains itself would otherwise never end).
const maxReplyDepth = 1000

// newRedisLib builds the redis table of Redis 7.0's scripting API.
func (v *vm) newRedisLib() *lua.LTable {
	L := v.L
	t := L.NewTable()
	v.setFuncs(t, map[string]lua.LGFunction{
		"call":               func(L *lua.LState) int { return v.h.redisCall(L, true) },
		"pcall":              func(L *lua.LState) int { return v.h.redisCall(L, false) },
		"error_reply":        luaErrorReply,
		"status_reply":       luaStatusReply,
		"sha1hex":            luaSha1hex,
		"log":                luaLog,
		"setresp":            luaSetresp,
		"replicate_commands": luaReplicateCommands,
		"set_repl":           luaSetRepl,
		"breakpoint":         func(L *lua.LState) int { L.Push(lua.LFalse); return 1 },
		"debug":              func(L *lua.LState) int { return 0 },
		"acl_check_cmd":      v.h.luaACLCheckCmd,
	})
	for name, n := range map[string]int{
		"LOG_DEBUG": 0, "LOG_VERBOSE": 1, "LOG_NOTICE": 2, "LOG_WARNING": 3,
		"REPL_NONE": 0, "REPL_AOF": 1, "REPL_SLAVE": 2, "REPL_REPLICA": 2, "REPL_ALL": 3,
		"REDIS_VERSION_NUM": redisVersionNum,
	} {
		t.RawSetString(name, lua.LNumber(n))
	}
	t.RawSetString("REDIS_VERSION", lua.LString(redisVersion))
	return t
}

// redisCall is redis.call (raise) and redis.pcall: arguments must be strings
// or numbers (formatted "%.17g"); the reply is converted to Lua; an error
// reply becomes {err=...}, raised by call and returned by pcall.
func (h *Host) redisCall(L *lua.LState, raise bool) int {
	if h.run.bounded && !h.run.wrote && h.stopped() {
		L.RaiseError("%s", h.run.dl.err.Error())
		return 0
	}
	n := L.GetTop()
	if n == 0 {
		return h.callFailed(L, raise, "ERR Please specify at least one argument for this redis lib call")
	}
	args := h.run.args[:0]
	for i := 1; i <= n; i++ {
		switch a := L.Get(i).(type) {
		case lua.LString:
			args = append(args, string(a))
		case lua.LNumber:
			args = append(args, formatG17(float64(a)))
		default:
			h.run.args = args[:0]
			return h.callFailed(L, raise, "ERR Lua redis lib command arguments must be strings or integers")
		}
	}
	h.run.args = args
	r := h.scriptCommand(args)
	clear(args)
	if e, ok := r.(*ErrorReply); ok {
		return h.callFailed(L, raise, e.Msg)
	}
	L.Push(h.replyToLua(L, r))
	return 1
}

// callFailed raises {err=msg} from redis.call, or returns it from
// redis.pcall. A raised error table keeps its own error code in the
// script's error reply; Lua's pcall turns it into the msg string.
func (h *Host) callFailed(L *lua.LState, raise bool, msg string) int {
	if raise {
		raiseRedisError(L, msg)
		return 0
	}
	L.Push(errorTable(L, msg))
	return 1
}

// raiseRedisError raises {err=msg}, as Redis 7.0's redis library raises its
// errors.
func raiseRedisError(L *lua.LState, msg string) {
	L.Error(errorTable(L, msg), 0)
}

func errorTable(L *lua.LState, msg string) *lua.LTable {
	t := L.CreateTable(0, 1)
	t.RawSetString("err", lua.LString(msg))
	return t
}

// scriptCommand runs a command for a script, with the checks Redis makes
// for script calls plus the host's allowlist and strict keys.
func (h *Host) scriptCommand(args []string) any {
	cmd, allowed := h.lookup(args[0])
	if cmd == nil {
		return unknownScriptCommand(args[0])
	}
	if !cmd.arityOK(len(args)) {
		return errorf("ERR Wrong number of args calling Redis command from script")
	}
	if !allowed {
		return errorf("ERR This Redis command is not allowed from script")
	}
	if h.run.readOnly && cmd.flags&flagWrite != 0 {
		return errorf("ERR Write commands are not allowed from read-only scripts.")
	}
	if h.strict {
		if k, ok := cmd.refusedKey(args, &h.run); ok {
			return errorf("ERR luahost: script accessed key '" + k + "' that is neither in KEYS nor in the cluster slot of one of them (strict keys)")
		}
	}
	if cmd.flags&flagWrite != 0 {
		h.run.wrote = true
	}
	return cmd.run(&h.cc, args)
}

// statusOK is the commonest status reply, boxed once.
var statusOK lua.LValue = lua.LString("OK")

// replyToLua converts a command reply to Lua as Redis 7.0 does (RESP2):
// integer -> number, bulk -> string, nil -> false, array -> table, status ->
// {ok=...}, error -> {err=...}. TIME's seconds are the last TIME's Lua string
// while the second is the same.
func (h *Host) replyToLua(L *lua.LState, r any) lua.LValue {
	switch r := r.(type) {
	case int64:
		return luaNumber(float64(r))
	case string:
		return lua.LString(r)
	case nil:
		return lua.LFalse
	case statusReply:
		t := L.CreateTable(0, 1)
		if r == "OK" {
			t.RawSetString("ok", statusOK)
		} else {
			t.RawSetString("ok", lua.LString(r))
		}
		return t
	case timeReply:
		if h.timeSecText == nil || r.sec != h.timeSec {
			h.timeSec, h.timeSecText = r.sec, lua.LString(strconv.FormatInt(r.sec, 10))
		}
		t := L.CreateTable(2, 0)
		t.RawSetInt(1, h.timeSecText)
		t.RawSetInt(2, lua.LString(strconv.FormatInt(r.usec, 10)))
		return t
	case *bulks:
		t := L.CreateTable(len(r.vals), 0)
		for i, v := range r.vals {
			if r.set[i] {
				t.RawSetInt(i+1, lua.LString(v))
			} else {
				t.RawSetInt(i+1, lua.LFalse)
			}
		}
		return t
	case []any:
		t := L.CreateTable(len(r), 0)
		for i, e := range r {
			t.RawSetInt(i+1, h.replyToLua(L, e))
		}
		return t
	case *ErrorReply:
		return errorTable(L, r.Msg)
	}
	panic("luahost: unknown reply type")
}

// luaToReply converts a script's return value as Redis 7.0 does: number ->
// integer (truncated, as a C cast), string -> bulk, true -> 1, false and nil
// -> nil, a table with a string err field -> error, with a string ok field
// -> status (a plain string here), any other table -> array of its
// elements 1, 2, ... up to the first nil. Functions and other values become
// nil.
func luaToReply(v lua.LValue, depth int) any {
	switch v := v.(type) {
	case lua.LNumber:
		return cInt64(float64(v))
	case lua.LString:
		return string(v)
	case lua.LBool:
		if v {
			return int64(1)
		}
		return nil
	case *lua.LTable:
		if depth >= maxReplyDepth {
			return errorf("ERR reached lua stack limit")
		}
		if e, ok := v.RawGetString("err").(lua.LString); ok {
			return errorf(oneLine(strings.TrimRight(string(e), "\r\n")))
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			return oneLine(string(s))
		}
		out := make([]any, 0, v.Len())
		for i := 1; ; i++ {
			switch e := v.RawGetInt(i).(type) {
			case lua.LNumber: // the commonest element, converted without a call
				out = append(out, cInt64(float64(e)))
			case *lua.LNilType:
				return out
			default:
				out = append(out, luaToReply(e, depth+1))
			}
		}
	}
	return nil
}

// luaErrorReply is redis.error_reply(msg): {err="CODE msg"}, with "ERR" as
// the code when msg does not start with one ("-CODE msg" works too).
func luaErrorReply(L *lua.LState) int {
	s, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errorTable(L, "ERR wrong number or type of arguments"))
		return 1
	}
	msg := strings.TrimPrefix(string(s), "-")
	code := "ERR"
	if c, rest, found := strings.Cut(msg, " "); found {
		code, msg = c, rest
	}
	L.Push(errorTable(L, code+" "+strings.Trim(msg, "\r\n")))
	return 1
}

// luaStatusReply is redis.status_reply(msg): {ok=msg}.
func luaStatusReply(L *lua.LState) int {
	s, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errorTable(L, "ERR wrong number or type of arguments"))
		return 1
	}
	t := L.CreateTable(0, 1)
	t.RawSetString("ok", s)
	L.Push(t)
	return 1
}

// luaSha1hex is redis.sha1hex; like Redis it hashes "" for an argument
// that is neither a string nor a number.
func luaSha1hex(L *lua.LState) int {
	if L.GetTop() != 1 {
		raiseRedisError(L, "ERR wrong number of arguments")
	}
	s := ""
	switch v := L.Get(1).(type) {
	case lua.LString:
		s = string(v)
	case lua.LNumber:
		s = formatG14(float64(v))
	}
	L.Push(lua.LString(sha1hex(s)))
	return 1
}

// luaLog checks its arguments as redis.log does and logs nothing.
func luaLog(L *lua.LState) int {
	if L.GetTop() < 2 {
		raiseRedisError(L, "ERR redis.log() requires two arguments or more.")
	}
	level, ok := L.Get(1).(lua.LNumber)
	if !ok {
		raiseRedisError(L, "ERR First argument must be a number (log level).")
	}
	if level < 0 || level > 3 {
		raiseRedisError(L, "ERR Invalid debug level.")
	}
	return 0
}

// luaSetresp accepts RESP2 only.
func luaSetresp(L *lua.LState) int {
	if L.GetTop() != 1 {
		raiseRedisError(L, "ERR redis.setresp() requires one argument.")
	}
	switch checkLuaInt(L, 1, "setresp") {
	case 2:
		return 0
	case 3:
		raiseRedisError(L, "ERR luahost: RESP3 replies (redis.setresp(3)) are not supported")
	}
	raiseRedisError(L, "ERR RESP version must be 2 or 3.")
	return 0
}

func luaReplicateCommands(L *lua.LState) int {
	L.Push(lua.LTrue)
	return 1
}

// luaSetRepl checks its argument as redis.set_repl does; the host does not
// replicate.
func luaSetRepl(L *lua.LState) int {
	if L.GetTop() != 1 {
		raiseRedisError(L, "ERR redis.set_repl() requires two arguments.")
	}
	if f := checkLuaInt(L, 1, "set_repl"); f < 0 || f > 3 {
		raiseRedisError(L, "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
	}
	return 0
}

// luaACLCheckCmd is redis.acl_check_cmd: true when the command exists and
// scripts may call it.
func (h *Host) luaACLCheckCmd(L *lua.LState) int {
	if L.GetTop() < 1 {
		raiseRedisError(L, "ERR Please specify at least one argument for this redis lib call")
	}
	cmd := findCommand(checkLuaString(L, 1))
	if cmd == nil {
		raiseRedisError(L, "ERR Invalid command passed to redis.acl_check_cmd()")
	}
	L.Push(lua.LBool(h.allowed == nil || h.allowed[cmd]))
	return 1
}
