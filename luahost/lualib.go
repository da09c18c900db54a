package luahost

import (
	"math"
	"math/bits"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Base-library functions replaced to behave as Lua 5.1 in Redis 7.0 does.

// luaError is Lua 5.1's error: a string or number message gets the position
// of the function at level (1: error's caller) in front, when that is a Lua
// function. gopher-lua's error is off by one level and rejects error().
func luaError(L *lua.LState) int {
	obj := L.Get(1)
	level := L.OptInt(2, 1)
	if level > 0 {
		switch obj.(type) {
		case lua.LString, lua.LNumber:
			obj = lua.LString(where(L, level) + luaToString(obj))
		}
	}
	L.Error(obj, 0)
	return 0
}

// where is Lua 5.1's luaL_where: "source:line: " of the function running at
// level (0: the current Go function), or "" when that is not a Lua
// function.
func where(L *lua.LState, level int) string {
	dbg, ok := L.GetStack(level)
	if !ok || isGoFrame(L, level) {
		return ""
	}
	if _, err := L.GetInfo("Sl", dbg, lua.LNil); err != nil || dbg.CurrentLine <= 0 {
		return ""
	}
	return dbg.Source + ":" + strconv.Itoa(dbg.CurrentLine) + ": "
}

// luaTostring is tostring with Lua 5.1's "%.14g" for numbers.
func luaTostring(L *lua.LState) int {
	v := L.CheckAny(1)
	if n, ok := v.(lua.LNumber); ok {
		L.Push(lua.LString(formatG14(float64(n))))
		return 1
	}
	L.Push(L.ToStringMeta(v))
	return 1
}

// luaConcatOperand is the helper compile wraps concatenation operands in:
// numbers become "%.14g" strings, anything else passes through.
func luaConcatOperand(L *lua.LState) int {
	v := L.Get(1)
	if n, ok := v.(lua.LNumber); ok {
		v = lua.LString(formatG14(float64(n)))
	}
	L.SetTop(0)
	L.Push(v)
	return 1
}

// luaTonumber is Lua 5.1's tonumber: base 10 converts as the language
// does (strtod, surrounding space allowed); other bases use strtoul.
func luaTonumber(L *lua.LState) int {
	v := L.CheckAny(1)
	base := 10
	if L.Get(2) != lua.LNil {
		base = int(checkLuaInt(L, 2, "tonumber"))
	}
	if base == 10 {
		switch v := v.(type) {
		case lua.LNumber:
			L.Push(v)
			return 1
		case lua.LString:
			if f, ok := luaStringToNumber(string(v)); ok {
				L.Push(luaNumber(f))
				return 1
			}
		}
		L.Push(lua.LNil)
		return 1
	}
	s := checkLuaString(L, 1)
	if base < 2 || base > 36 {
		L.RaiseError("bad argument #2 to 'tonumber' (base out of range)")
	}
	if n, ok := strtoul(s, base); ok {
		L.Push(luaNumber(float64(n)))
	} else {
		L.Push(lua.LNil)
	}
	return 1
}

// strtoul parses s as C's strtoul(s, &end, base) followed by Lua's check
// that only space follows: leading space, an optional sign (a minus negates
// modulo 2^64), "0x" for base 16, saturating at 2^64-1.
func strtoul(s string, base int) (uint64, bool) {
	i := 0
	for i < len(s) && cIsSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if base == 16 && i+2 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && digitVal(s[i+2]) < 16 {
		i += 2
	}
	var n uint64
	overflow := false
	start := i
	for ; i < len(s); i++ {
		d := digitVal(s[i])
		if d >= base {
			break
		}
		hi, lo := bits.Mul64(n, uint64(base))
		lo, carry := bits.Add64(lo, uint64(d), 0)
		if hi != 0 || carry != 0 {
			overflow = true
		}
		n = lo
	}
	if i == start {
		return 0, false
	}
	for i < len(s) && cIsSpace(s[i]) {
		i++
	}
	if i != len(s) {
		return 0, false
	}
	if overflow {
		return math.MaxUint64, true
	}
	if neg {
		n = -n
	}
	return n, true
}

// digitVal is the value of c as a digit in bases up to 36, or 99.
func digitVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'z':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'Z':
		return int(c-'A') + 10
	}
	return 99
}

// luaCollectGarbage accepts Lua 5.1's options but does nothing: Go's
// collector runs on its own, and a script must not be able to force a
// collection of the whole process.
func luaCollectGarbage(L *lua.LState) int {
	opt := L.OptString(1, "collect")
	switch opt {
	case "count":
		L.Push(lua.LNumber(0))
	case "step":
		L.Push(lua.LTrue)
	case "setpause", "setstepmul":
		L.Push(lua.LNumber(200))
	case "stop", "restart", "collect":
		L.Push(lua.LNumber(0))
	default:
		L.RaiseError("bad argument #1 to 'collectgarbage' (invalid option '%s')", opt)
	}
	return 1
}

func luaGcinfo(L *lua.LState) int {
	L.Push(lua.LNumber(0))
	return 1
}

// luaLoadstring compiles a chunk as scripts are compiled, in the scripts'
// environment.
func (v *vm) luaLoadstring(L *lua.LState) int {
	src := checkLuaString(L, 1)
	name := src
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		name = checkLuaString(L, 2)
	}
	return v.loadChunk(L, src, name)
}

// luaLoad is Lua 5.1's load(func [, chunkname]).
func (v *vm) luaLoad(L *lua.LState) int {
	fn := L.CheckFunction(1)
	name := "=(load)"
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		name = checkLuaString(L, 2)
	}
	var src strings.Builder
	for {
		L.Push(fn)
		L.Call(0, 1)
		piece := L.Get(-1)
		L.Pop(1)
		if piece == lua.LNil {
			break
		}
		s, ok := piece.(lua.LString)
		if !ok {
			L.RaiseError("reader function must return a string")
		}
		if s == "" {
			break
		}
		src.WriteString(string(s))
	}
	return v.loadChunk(L, src.String(), name)
}

func (v *vm) loadChunk(L *lua.LState, src, name string) int {
	id := chunkID(name)
	proto, err := compile(src, id)
	if err != nil {
		L.Push(lua.LNil)
		L.Push(lua.LString(compileErrorDetail(src, id, err)))
		return 2
	}
	fn := L.NewFunctionFromProto(proto)
	fn.Env = v.runEnv
	L.Push(fn)
	return 1
}

// luaNext is next, seeing through read-only proxies.
func (v *vm) luaNext(L *lua.LState) int {
	t := v.target(L.CheckTable(1))
	k, val := t.Next(L.Get(2))
	if (t == v.globals || t == v.fglobals) && k == lua.LString(tostrGlobal) {
		k, val = t.Next(k) // the concatenation helper is not a global
	}
	if k == lua.LNil {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(k)
	L.Push(val)
	return 2
}

// luaPairs is Lua 5.1's pairs: next, t, nil.
func (v *vm) luaPairs(L *lua.LState) int {
	t := L.CheckTable(1)
	L.Push(v.globals.RawGetString("next"))
	L.Push(t)
	L.Push(lua.LNil)
	return 3
}

// luaPcall is Redis 7.0's pcall: an error that is a table with a string
// or number err field (as redis.call raises) is caught as that field, so
// scripts see redis.call errors as strings.
func (v *vm) luaPcall(L *lua.LState) int {
	n := v.basePcall(L)
	if n == 2 && L.Get(-2) == lua.LFalse {
		if t, ok := L.Get(-1).(*lua.LTable); ok {
			switch e := L.GetField(t, "err").(type) {
			case lua.LString, lua.LNumber:
				L.Replace(-1, e)
			}
		}
	}
	return n
}

// coroutineRegistrySize is the value stack a coroutine starts with; it grows as the main
// state's does (registryGrowStep, up to registryMaxSize). A coroutine with the main
// state's initial size would allocate 64 KB whatever it runs.
const coroutineRegistrySize = 128

// smallThread runs create, gopher-lua's coroutine.create or wrap, so that the new thread
// starts with coroutineRegistrySize slots.
func smallThread(L *lua.LState, create lua.LGFunction) int {
	size := L.Options.RegistrySize
	L.Options.RegistrySize = coroutineRegistrySize
	defer func() { L.Options.RegistrySize = size }()
	return create(L)
}

// luaCoCreate and luaCoWrap put new coroutines under the running script's
// deadline: gopher-lua derives a coroutine's context with
// context.WithCancel, which cannot see the host's deadline.
func (v *vm) luaCoCreate(L *lua.LState) int {
	n := smallThread(L, v.coCreate)
	if th, ok := L.Get(-1).(*lua.LState); ok {
		v.underDeadline(L, th)
	}
	return n
}

func (v *vm) luaCoWrap(L *lua.LState) int {
	n := smallThread(L, v.coWrap)
	if fn, ok := L.Get(-1).(*lua.LFunction); ok && len(fn.Upvalues) > 0 {
		if th, ok := fn.Upvalues[0].Value().(*lua.LState); ok {
			v.underDeadline(L, th)
		}
	}
	return n
}

func (v *vm) underDeadline(L, th *lua.LState) {
	if ctx := L.Context(); ctx != nil {
		th.SetContext(ctx)
	}
}

// luaRawget is rawget, seeing through read-only proxies.
func (v *vm) luaRawget(L *lua.LState) int {
	t := v.target(L.CheckTable(1))
	L.Push(t.RawGet(L.CheckAny(2)))
	return 1
}

// luaRawset is rawset, refusing read-only tables.
func (v *vm) luaRawset(L *lua.LState) int {
	t := L.CheckTable(1)
	k := L.CheckAny(2)
	val := L.CheckAny(3)
	v.checkWritable(L, t)
	checkKey(L, k)
	t.RawSet(k, val)
	L.SetTop(1)
	return 1
}

// checkKey raises Lua's errors for keys a table cannot have.
func checkKey(L *lua.LState, k lua.LValue) {
	switch k := k.(type) {
	case *lua.LNilType:
		L.RaiseError("table index is nil")
	case lua.LNumber:
		if math.IsNaN(float64(k)) {
			L.RaiseError("table index is NaN")
		}
	}
}

// luaSetmetatable is Lua 5.1's setmetatable: tables only (gopher-lua would
// set the shared metatable of a whole type), refusing read-only tables.
func (v *vm) luaSetmetatable(L *lua.LState) int {
	t := L.CheckTable(1)
	mt := L.Get(2)
	if _, ok := mt.(*lua.LTable); !ok && mt != lua.LNil {
		L.RaiseError("bad argument #2 to 'setmetatable' (nil or table expected)")
	}
	v.checkWritable(L, t)
	if m, ok := t.Metatable.(*lua.LTable); ok && m.RawGetString("__metatable") != lua.LNil {
		L.RaiseError("cannot change a protected metatable")
	}
	t.Metatable = mt
	L.SetTop(1)
	return 1
}

// initString adapts gopher-lua's string library to Lua 5.1's.
func (v *vm) initString(str *lua.LTable) {
	L := v.L
	v.setFuncs(str, map[string]lua.LGFunction{
		"byte":   luaByte,
		"char":   luaChar,
		"format": luaFormat,
		"lower":  luaLower,
		"upper":  luaUpper,
		"dump": func(L *lua.LState) int {
			L.RaiseError("unable to dump given function")
			return 0
		},
	})
	// Numbers passed where strings are expected become "%.14g" strings.
	for name, pos := range map[string][]int{
		"find": {1, 2}, "gmatch": {1, 2}, "gsub": {1, 2, 3}, "len": {1},
		"match": {1, 2}, "rep": {1}, "reverse": {1}, "sub": {1},
	} {
		orig := str.RawGetString(name).(*lua.LFunction)
		upvalues := make([]lua.LValue, len(orig.Upvalues))
		for i, uv := range orig.Upvalues {
			upvalues[i] = uv.Value()
		}
		str.RawSetString(name, L.NewClosure(strArgs(orig.GFunction, pos...), upvalues...))
	}
	str.RawSetString("gfind", str.RawGetString("gmatch"))
	str.RawSetString("__index", lua.LNil) // gopher-lua's string metatable; ours is separate
}

// luaByte is Lua 5.1's string.byte(s [, i [, j]]): the bytes s[i..j], with i 1 and j
// i by default (gopher-lua's returns every byte from i on) and negative positions
// counted from the end.
func luaByte(L *lua.LState) int {
	s := checkLuaString(L, 1)
	l := int64(len(s))
	posrelat := func(pos int64) int64 {
		if pos < 0 {
			pos += l + 1
		}
		return max(pos, 0)
	}
	i := int64(1)
	if L.Get(2) != lua.LNil {
		i = int64(checkLuaInt(L, 2, "byte"))
	}
	i = posrelat(i)
	j := i
	if L.Get(3) != lua.LNil {
		j = posrelat(int64(checkLuaInt(L, 3, "byte")))
	}
	i = max(i, 1)
	j = min(j, l)
	if i > j {
		return 0
	}
	for k := i; k <= j; k++ {
		L.Push(smallInts[s[k-1]])
	}
	return int(j - i + 1)
}

// luaChar is Lua 5.1's string.char, which rejects values outside a byte.
func luaChar(L *lua.LState) int {
	n := L.GetTop()
	b := make([]byte, n)
	for i := 1; i <= n; i++ {
		c := checkLuaInt(L, i, "char")
		if c < 0 || c > 255 {
			L.RaiseError("bad argument #%d to 'char' (invalid value)", i)
		}
		b[i-1] = byte(c)
	}
	L.Push(lua.LString(b))
	return 1
}

// strArgs wraps fn so that number arguments at positions become strings as
// Lua 5.1 converts them.
func strArgs(fn lua.LGFunction, positions ...int) lua.LGFunction {
	return func(L *lua.LState) int {
		top := L.GetTop()
		for _, i := range positions {
			if i > top {
				break
			}
			if n, ok := L.Get(i).(lua.LNumber); ok {
				L.Replace(i, lua.LString(formatG14(float64(n))))
			}
		}
		return fn(L)
	}
}

// luaLower and luaUpper change ASCII letters only, byte by byte, as C's
// tolower/toupper do; gopher-lua's are Unicode-aware and rewrite invalid
// UTF-8.
func luaLower(L *lua.LState) int {
	L.Push(lua.LString(mapASCII(checkLuaString(L, 1), 'A', 'Z', 'a'-'A')))
	return 1
}

func luaUpper(L *lua.LState) int {
	L.Push(lua.LString(mapASCII(checkLuaString(L, 1), 'a', 'z', -('a' - 'A'))))
	return 1
}

func mapASCII(s string, lo, hi byte, delta int) string {
	b := []byte(s)
	for i, c := range b {
		if lo <= c && c <= hi {
			b[i] = byte(int(c) + delta)
		}
	}
	return string(b)
}

// initTable adapts gopher-lua's table library to Lua 5.1's: read-only tables
// cannot be changed through it, concat formats numbers with "%.14g", and
// the deprecated foreach, foreachi and setn exist.
func (v *vm) initTable(tbl *lua.LTable) {
	get := func(name string) lua.LGFunction {
		return tbl.RawGetString(name).(*lua.LFunction).GFunction
	}
	guard := func(fn lua.LGFunction) lua.LGFunction {
		return func(L *lua.LState) int {
			v.checkWritable(L, L.CheckTable(1))
			return fn(L)
		}
	}
	v.setFuncs(tbl, map[string]lua.LGFunction{
		"concat": luaTableConcat,
		"insert": guard(get("insert")),
		"remove": guard(get("remove")),
		"sort":   guard(get("sort")),
		"setn": func(L *lua.LState) int {
			L.RaiseError("'setn' is obsolete")
			return 0
		},
		"foreach":  luaForeach,
		"foreachi": luaForeachi,
	})
}

// luaTableConcat is Lua 5.1's table.concat.
func luaTableConcat(L *lua.LState) int {
	t := L.CheckTable(1)
	sep := ""
	if L.Get(2) != lua.LNil {
		sep = checkLuaString(L, 2)
	}
	i := 1
	if L.Get(3) != lua.LNil {
		i = int(checkLuaInt(L, 3, "concat"))
	}
	j := t.Len()
	if L.Get(4) != lua.LNil {
		j = int(checkLuaInt(L, 4, "concat"))
	}
	var b strings.Builder
	for k := i; k <= j; k++ {
		switch e := t.RawGet(lua.LNumber(k)).(type) {
		case lua.LString:
			b.WriteString(string(e))
		case lua.LNumber:
			b.WriteString(formatG14(float64(e)))
		default:
			L.RaiseError("invalid value (%s) at index %d in table for 'concat'", e.Type().String(), k)
		}
		if k != j {
			b.WriteString(sep)
		}
	}
	L.Push(lua.LString(b.String()))
	return 1
}

// luaForeach is Lua 5.1's table.foreach(t, f): f(k, v) for every pair until
// f returns non-nil, which foreach returns.
func luaForeach(L *lua.LState) int {
	t := L.CheckTable(1)
	f := L.CheckFunction(2)
	for k, val := t.Next(lua.LNil); k != lua.LNil; k, val = t.Next(k) {
		L.Push(f)
		L.Push(k)
		L.Push(val)
		L.Call(2, 1)
		if r := L.Get(-1); r != lua.LNil {
			return 1
		}
		L.Pop(1)
	}
	return 0
}

// luaForeachi is Lua 5.1's table.foreachi(t, f) over 1..#t.
func luaForeachi(L *lua.LState) int {
	t := L.CheckTable(1)
	f := L.CheckFunction(2)
	n := t.Len()
	for i := 1; i <= n; i++ {
		L.Push(f)
		L.Push(lua.LNumber(i))
		L.Push(t.RawGetInt(i))
		L.Call(2, 1)
		if r := L.Get(-1); r != lua.LNil {
			return 1
		}
		L.Pop(1)
	}
	return 0
}

// luaRandom is Redis 7.0's math.random over its lrand48 generator.
func (h *Host) luaRandom(L *lua.LState) int {
	r := h.rand.float()
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(r))
	case 1:
		u := checkLuaInt(L, 1, "random")
		if u < 1 {
			L.RaiseError("bad argument #1 to 'random' (interval is empty)")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u)) + 1))
	case 2:
		l := checkLuaInt(L, 1, "random")
		u := checkLuaInt(L, 2, "random")
		if l > u {
			L.RaiseError("bad argument #2 to 'random' (interval is empty)")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u-l+1)) + float64(l)))
	default:
		L.RaiseError("wrong number of arguments")
	}
	return 1
}

// luaRandomseed is Redis 7.0's math.randomseed; the seed outlives the
// script, as in Redis.
func (h *Host) luaRandomseed(L *lua.LState) int {
	h.rand.seed(checkLuaInt(L, 1, "randomseed"))
	return 0
}
