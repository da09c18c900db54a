package luahost

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The Lua environment of Redis 7.0 scripts, rebuilt on gopher-lua:
//
//   - globals: the base library without dofile, loadfile, print, getfenv,
//     setfenv, module, require and newproxy; the string, table, math,
//     coroutine and bit libraries; redis; KEYS and ARGV. No os, io, debug
//     or package. cjson, cmsgpack and struct are not provided.
//   - every global and library table is read-only: assigning to any of them
//     raises "Attempt to modify a readonly table", and reading a global that
//     does not exist raises "Script attempted to access nonexistent global
//     variable '<name>'".
//   - numbers become strings as Lua 5.1 makes them ("%.14g") in tostring,
//     "..", table.concat, string.format and the string functions.
//
// Scripts see the globals through env, an always-empty proxy table whose
// metatable reads from the real globals table and refuses writes. The
// libraries are proxied the same way. Proxies are listed in vm.readonly so
// that rawset, setmetatable and the table library refuse them too, and so
// that rawget, next and pairs see through them.

// vm is the host's Lua state and its Redis environment.
type vm struct {
	h        *Host
	L        *lua.LState
	globals  *lua.LTable // the real globals; scripts never see this table
	env      *lua.LTable // the scripts' _G
	readonly map[*lua.LTable]*lua.LTable
	handler  *lua.LFunction // the error handler of every script run

	keys, argv   *lua.LTable // KEYS and ARGV, reused while scripts leave them alone
	nkeys, nargv int

	// Functions (see functions.go) see fenv, a read-only proxy whose metatable (fenvMeta)
	// reads fglobals: the scripts' globals without KEYS and ARGV. While a library loads,
	// fenvMeta reads loadGlobals instead, which hold only the load-time redis table.
	fenv, fenvMeta, fglobals, loadGlobals *lua.LTable
	runEnv                                *lua.LTable  // what loadstring compiles into: env or fenv
	boxed                                 []lua.LValue // the last FCALL's keys and args as Lua strings (see argTable)

	basePcall, coCreate, coWrap lua.LGFunction
}

// Redis 7.0 messages for read-only tables and unknown globals.
const (
	msgReadonly       = "Attempt to modify a readonly table"
	msgNonexistentFmt = "Script attempted to access nonexistent global variable '%s'"
)

// Limits of the Lua state. Lua 5.1 allows 20000 nested calls
// (LUAI_MAXCALLS); the value stack grows as deep calls and big unpacks need.
const (
	callStackSize    = 20000
	registrySize     = 1024 * 4
	registryMaxSize  = 1024 * 256
	registryGrowStep = 1024
)

func (h *Host) initVM() {
	L := lua.NewState(lua.Options{
		SkipOpenLibs:        true,
		CallStackSize:       callStackSize,
		RegistrySize:        registrySize,
		RegistryMaxSize:     registryMaxSize,
		RegistryGrowStep:    registryGrowStep,
		MinimizeStackMemory: true,
	})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{"", lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
		{lua.CoroutineLibName, lua.OpenCoroutine},
	} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	v := &vm{h: h, L: L, readonly: make(map[*lua.LTable]*lua.LTable)}
	h.vm = v
	gopher := L.G.Global
	lib := func(name string) *lua.LTable { return gopher.RawGetString(name).(*lua.LTable) }
	gfn := func(t *lua.LTable, name string) lua.LGFunction {
		return t.RawGetString(name).(*lua.LFunction).GFunction
	}
	v.basePcall = gfn(gopher, "pcall")

	g := L.NewTable()
	v.globals = g
	for _, name := range []string{
		"assert", "ipairs", "rawequal", "select", "unpack", "getmetatable",
		"xpcall",
	} {
		g.RawSetString(name, gopher.RawGetString(name))
	}
	g.RawSetString("_VERSION", lua.LString("Lua 5.1"))
	v.setFuncs(g, map[string]lua.LGFunction{
		"collectgarbage": luaCollectGarbage,
		"error":          luaError,
		"gcinfo":         luaGcinfo,
		"load":           v.luaLoad,
		"loadstring":     v.luaLoadstring,
		"next":           v.luaNext,
		"pairs":          v.luaPairs,
		"pcall":          v.luaPcall,
		"rawget":         v.luaRawget,
		"rawset":         v.luaRawset,
		"setmetatable":   v.luaSetmetatable,
		"tonumber":       luaTonumber,
		"tostring":       luaTostring,
		"type":           luaType,
		tostrGlobal:      luaConcatOperand,
	})

	str := lib(lua.StringLibName)
	v.initString(str)
	tbl := lib(lua.TabLibName)
	v.initTable(tbl)
	mathLib := lib(lua.MathLibName)
	v.setFuncs(mathLib, map[string]lua.LGFunction{
		"random":     h.luaRandom,
		"randomseed": h.luaRandomseed,
	})
	co := lib(lua.CoroutineLibName)
	v.coCreate = gfn(co, "create")
	v.coWrap = gfn(co, "wrap")
	v.setFuncs(co, map[string]lua.LGFunction{
		"create": v.luaCoCreate,
		"wrap":   v.luaCoWrap,
	})

	g.RawSetString(lua.StringLibName, v.protect(str))
	g.RawSetString(lua.TabLibName, v.protect(tbl))
	g.RawSetString(lua.MathLibName, v.protect(mathLib))
	g.RawSetString(lua.CoroutineLibName, v.protect(co))
	g.RawSetString("bit", v.protect(v.newBitLib()))
	g.RawSetString("redis", v.protect(v.newRedisLib()))

	// Reading a global that does not exist is an error.
	gmt := L.NewTable()
	gmt.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError(msgNonexistentFmt, luaToString(L.Get(2)))
		return 0
	}))
	g.Metatable = gmt

	v.env = v.protect(g)
	g.RawSetString("_G", v.env)
	v.setArgs(nil, nil)

	// Strings index the read-only string library; their metatable is
	// protected too, so getmetatable("") cannot reach a writable table.
	smt := L.NewTable()
	smt.RawSetString("__index", g.RawGetString(lua.StringLibName))
	smt.RawSetString("__metatable", v.protect(smt))
	L.SetMetatable(lua.LString(""), smt)

	v.handler = L.NewFunction(v.luaErrorHandler)
	L.Env = v.env
	v.runEnv = v.env
	v.initFunctionEnv(gmt)
}

// initFunctionEnv builds the globals of functions and of a library's load (see vm.fenv).
// gmt is the metatable that makes reading a missing global an error.
func (v *vm) initFunctionEnv(gmt *lua.LTable) {
	L := v.L
	redisLib := v.target(v.globals.RawGetString("redis").(*lua.LTable))

	// Functions' redis lacks what only EVAL has (replicate_commands, and the debugger's
	// breakpoint and debug).
	fredis := L.NewTable()
	redisLib.ForEach(func(k, val lua.LValue) {
		switch k {
		case lua.LString("replicate_commands"), lua.LString("breakpoint"), lua.LString("debug"):
			return
		}
		fredis.RawSet(k, val)
	})
	fg := L.NewTable()
	v.globals.ForEach(func(k, val lua.LValue) {
		switch k {
		case lua.LString("KEYS"), lua.LString("ARGV"), lua.LString("_G"), lua.LString("redis"):
			return
		}
		fg.RawSet(k, val)
	})
	fg.RawSetString("redis", v.protect(fredis))
	fg.Metatable = gmt
	v.fglobals = fg
	v.fenv = v.protect(fg)
	v.fenvMeta = v.fenv.Metatable.(*lua.LTable)
	fg.RawSetString("_G", v.fenv)

	// At load time: redis.register_function, redis.log, the LOG_* levels and the version;
	// reading anything else, in redis or outside, is the missing-global error.
	lr := L.NewTable()
	lr.RawSetString("register_function", L.NewFunction(v.h.luaRegisterFunction))
	for _, name := range []string{"log", "LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING", "REDIS_VERSION", "REDIS_VERSION_NUM"} {
		lr.RawSetString(name, redisLib.RawGetString(name))
	}
	lr.Metatable = gmt
	lg := L.NewTable()
	lg.RawSetString("redis", v.protect(lr))
	lg.RawSetString(tostrGlobal, v.globals.RawGetString(tostrGlobal))
	lg.Metatable = gmt
	v.loadGlobals = lg
}

// setFuncs stores Go functions in t.
func (v *vm) setFuncs(t *lua.LTable, fns map[string]lua.LGFunction) {
	for name, fn := range fns {
		t.RawSetString(name, v.L.NewFunction(fn))
	}
}

// protect returns a read-only proxy of t: an empty table whose metatable
// reads from t and refuses writes, and whose own metatable is hidden behind
// another read-only proxy.
func (v *vm) protect(t *lua.LTable) *lua.LTable {
	L := v.L
	p := L.NewTable()
	mt := L.NewTable()
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", L.NewFunction(luaReadonlyNewindex))
	p.Metatable = mt
	v.readonly[p] = t
	hidden := L.NewTable()
	hmt := L.NewTable()
	hmt.RawSetString("__newindex", mt.RawGetString("__newindex"))
	hmt.RawSetString("__metatable", hidden)
	hidden.Metatable = hmt
	v.readonly[hidden] = L.NewTable()
	mt.RawSetString("__metatable", hidden)
	return p
}

func luaReadonlyNewindex(L *lua.LState) int {
	L.RaiseError(msgReadonly)
	return 0
}

// target returns what t shows: the proxied table for a read-only proxy, t
// itself otherwise.
func (v *vm) target(t *lua.LTable) *lua.LTable {
	if real, ok := v.readonly[t]; ok {
		return real
	}
	return t
}

// checkWritable raises Redis's read-only error, without a position as the C
// functions raise it, when t is read-only.
func (v *vm) checkWritable(L *lua.LState, t *lua.LTable) {
	if _, ok := v.readonly[t]; ok {
		L.Error(lua.LString(msgReadonly), 0)
	}
}

// setArgs makes KEYS and ARGV hold keys and args. The tables of the last run
// are reused when the script left them as it found them and the counts
// match, which saves two tables per run.
func (v *vm) setArgs(keys, args []string) {
	v.keys, v.nkeys = v.fill(v.keys, v.nkeys, keys, "KEYS")
	v.argv, v.nargv = v.fill(v.argv, v.nargv, args, "ARGV")
}

func (v *vm) fill(t *lua.LTable, n int, vals []string, name string) (*lua.LTable, int) {
	reuse := t != nil && n == len(vals) && t.Metatable == lua.LNil && t.MaxN() == n
	if reuse {
		if k, _ := t.Next(lua.LNumber(n)); k != lua.LNil {
			reuse = false
		}
	}
	if !reuse {
		t = v.L.CreateTable(len(vals), 0)
		v.globals.RawSetString(name, t)
	}
	for i, s := range vals {
		if cur, ok := t.RawGetInt(i + 1).(lua.LString); !ok || string(cur) != s {
			t.RawSetInt(i+1, lua.LString(s))
		}
	}
	return t, len(vals)
}

// luaErrorHandler runs when a script fails, before its stack unwinds, and
// records where the error was raised as Redis's __redis__err__handler
// does: in the innermost function, or in its caller when that is a Go
// (in Redis, C) function such as error or redis.call.
func (v *vm) luaErrorHandler(L *lua.LState) int {
	run := &v.h.run
	level := 1
	if isGoFrame(L, level) {
		level = 2
	}
	if dbg, ok := L.GetStack(level); ok {
		if _, err := L.GetInfo("Sl", dbg, lua.LNil); err == nil && dbg.CurrentLine > 0 {
			run.errLine = dbg.CurrentLine
			run.errSource = chunkSource(dbg.Source)
		}
	}
	L.Push(L.Get(1))
	return 1
}

// isGoFrame reports whether the function running at level is a Go function.
func isGoFrame(L *lua.LState, level int) bool {
	dbg, ok := L.GetStack(level)
	if !ok {
		return false
	}
	fn, err := L.GetInfo("f", dbg, lua.LNil)
	if err != nil {
		return false
	}
	f, _ := fn.(*lua.LFunction)
	return f != nil && f.IsG
}

// luaToString converts v to a string as Lua 5.1's tostring does, minus
// __tostring metamethods.
func luaToString(v lua.LValue) string {
	if n, ok := v.(lua.LNumber); ok {
		return formatG14(float64(n))
	}
	return v.String()
}

// chunkSource turns a chunk's display name back into its source name, as
// Redis prints it in "on <source>:<line>.": "@user_script" for scripts, the
// code itself for a loadstring chunk (when its name was not truncated).
func chunkSource(display string) string {
	if display == chunkName || display == functionChunkName {
		return "@" + display
	}
	if inner, ok := strings.CutPrefix(display, `[string "`); ok {
		if inner, ok := strings.CutSuffix(inner, `"]`); ok && !strings.HasSuffix(inner, "...") {
			return inner
		}
	}
	return display
}

// chunkID renders a chunk name as Lua 5.1's luaO_chunkid does for messages
// (LUA_IDSIZE 60).
func chunkID(name string) string {
	if strings.HasPrefix(name, "=") || strings.HasPrefix(name, "@") {
		return name[1:]
	}
	const max = 60 - len(` [string "..."] `) - 1
	n := strings.IndexAny(name, "\n\r")
	if n < 0 {
		n = len(name)
	}
	n = min(n, max)
	if n < len(name) {
		return `[string "` + name[:n] + `..."]`
	}
	return `[string "` + name + `"]`
}
