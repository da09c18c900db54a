package luahost

import (
	"math"
	"math/bits"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// newBitLib builds LuaBitOp 1.0's bit library, which Redis bundles: 32-bit
// operations on numbers, results as signed 32-bit numbers.
func (v *vm) newBitLib() *lua.LTable {
	t := v.L.NewTable()
	fold := func(name string, op func(a, b int32) int32) lua.LGFunction {
		return func(L *lua.LState) int {
			r := bitArg(L, 1, name)
			for i := 2; i <= L.GetTop(); i++ {
				r = op(r, bitArg(L, i, name))
			}
			L.Push(lua.LNumber(r))
			return 1
		}
	}
	shift := func(name string, op func(a int32, n uint) int32) lua.LGFunction {
		return func(L *lua.LState) int {
			a := bitArg(L, 1, name)
			n := uint(bitArg(L, 2, name)) & 31
			L.Push(lua.LNumber(op(a, n)))
			return 1
		}
	}
	v.setFuncs(t, map[string]lua.LGFunction{
		"tobit": func(L *lua.LState) int {
			L.Push(lua.LNumber(bitArg(L, 1, "tobit")))
			return 1
		},
		"bnot": func(L *lua.LState) int {
			L.Push(lua.LNumber(^bitArg(L, 1, "bnot")))
			return 1
		},
		"band":    fold("band", func(a, b int32) int32 { return a & b }),
		"bor":     fold("bor", func(a, b int32) int32 { return a | b }),
		"bxor":    fold("bxor", func(a, b int32) int32 { return a ^ b }),
		"lshift":  shift("lshift", func(a int32, n uint) int32 { return int32(uint32(a) << n) }),
		"rshift":  shift("rshift", func(a int32, n uint) int32 { return int32(uint32(a) >> n) }),
		"arshift": shift("arshift", func(a int32, n uint) int32 { return a >> n }),
		"rol":     shift("rol", func(a int32, n uint) int32 { return int32(bits.RotateLeft32(uint32(a), int(n))) }),
		"ror":     shift("ror", func(a int32, n uint) int32 { return int32(bits.RotateLeft32(uint32(a), -int(n))) }),
		"bswap": func(L *lua.LState) int {
			L.Push(lua.LNumber(int32(bits.ReverseBytes32(uint32(bitArg(L, 1, "bswap"))))))
			return 1
		},
		"tohex": func(L *lua.LState) int {
			b := uint32(bitArg(L, 1, "tohex"))
			n := int32(8)
			if L.Get(2) != lua.LNil {
				n = bitArg(L, 2, "tohex")
			}
			digits := "0123456789abcdef"
			if n < 0 {
				n = -n
				digits = "0123456789ABCDEF"
			}
			if n > 8 {
				n = 8
			}
			var out strings.Builder
			for i := n - 1; i >= 0; i-- {
				out.WriteByte(digits[(b>>(4*uint(i)))&15])
			}
			L.Push(lua.LString(out.String()))
			return 1
		},
	})
	return t
}

// bitArg normalises argument n to 32 bits as LuaBitOp's barg does: add
// 2^52+2^51 and keep the low 32 bits of the double's representation, which
// rounds to nearest and wraps modulo 2^32.
func bitArg(L *lua.LState, n int, name string) int32 {
	f := float64(checkLuaNumber(L, n, name))
	return int32(uint32(math.Float64bits(f + 6755399441055744.0)))
}
