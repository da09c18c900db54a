package luahost

import lua "github.com/yuin/gopher-lua"

// Go boxes every float64 it stores in an interface, so each number a Go function hands
// to Lua costs an allocation. The integers scripts see most (bytes, counts, small
// parameters) are boxed once here instead.
const boxedInts = 1024

var smallInts = func() (t [boxedInts]lua.LValue) {
	for i := range t {
		t[i] = lua.LNumber(i)
	}
	return t
}()

// luaNumber returns f as a Lua value, without allocating for the integers 0 to 1023.
func luaNumber(f float64) lua.LValue {
	if f >= 0 && f < boxedInts {
		if i := int(f); float64(i) == f && (i != 0 || !isNegZero(f)) {
			return smallInts[i]
		}
	}
	return lua.LNumber(f)
}

func isNegZero(f float64) bool { return f == 0 && 1/f < 0 }

// typeNames are the results of type, boxed once.
var typeNames = func() (names [lua.LTChannel + 1]lua.LValue) {
	for t := range names {
		names[t] = lua.LString(lua.LValueType(t).String())
	}
	return names
}()

// luaType is type, answering with pre-boxed names.
func luaType(L *lua.LState) int {
	t := L.CheckAny(1).Type()
	if int(t) < len(typeNames) {
		L.Push(typeNames[t])
	} else {
		L.Push(lua.LString(t.String()))
	}
	return 1
}
