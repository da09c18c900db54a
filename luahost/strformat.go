package luahost

import (
	"fmt"
	"math"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// luaFormat is Lua 5.1's string.format (lstrlib.c str_format) with C's
// printf semantics on x86-64: %d casts to a 64-bit integer (NaN and out of
// range give MinInt64), %s converts numbers with "%.14g" and keeps strings
// of 100 bytes or more whole when no precision is given, %q quotes as Lua
// does, and infinities print as "inf". gopher-lua's own string.format is
// Go's fmt.Sprintf, which differs in many of these.
func luaFormat(L *lua.LState) int {
	format := checkLuaString(L, 1)
	top := L.GetTop()
	arg := 1
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i < len(format) && format[i] == '%' {
			b.WriteByte('%')
			continue
		}
		arg++
		if arg > top {
			L.RaiseError("bad argument #%d to 'format' (no value)", arg)
		}
		spec, next := scanFormat(L, format, i)
		i = next
		conv := byte(0)
		if i < len(format) {
			conv = format[i]
		}
		switch conv {
		case 'c':
			n := int32(cInt64(float64(checkLuaNumber(L, arg, "format"))))
			b.WriteString(pad(spec, string([]byte{byte(n)})))
		case 'd', 'i':
			n := cInt64(float64(checkLuaNumber(L, arg, "format")))
			b.WriteString(fmt.Sprintf("%"+spec.goFlags(true)+"d", n))
		case 'o', 'u', 'x', 'X':
			n := cUint64(float64(checkLuaNumber(L, arg, "format")))
			verb := conv
			if verb == 'u' {
				verb = 'd'
			}
			flags := spec.goFlags(false)
			if n == 0 && (verb == 'x' || verb == 'X') {
				flags = strings.ReplaceAll(flags, "#", "") // C prints 0 without 0x
			}
			b.WriteString(fmt.Sprintf("%"+flags+string(verb), n))
		case 'e', 'E', 'f', 'g', 'G':
			f := float64(checkLuaNumber(L, arg, "format"))
			b.WriteString(formatCFloat(spec, conv, f))
		case 'q':
			addQuoted(&b, checkLuaString(L, arg))
		case 's':
			s := checkLuaString(L, arg)
			if !spec.hasPrec && len(s) >= 100 {
				b.WriteString(s)
				continue
			}
			if k := strings.IndexByte(s, 0); k >= 0 {
				s = s[:k] // sprintf stops at NUL
			}
			if spec.hasPrec && len(s) > spec.prec {
				s = s[:spec.prec]
			}
			b.WriteString(pad(spec, s))
		default:
			L.RaiseError("invalid option '%%%c' to 'format'", conv)
		}
	}
	L.Push(lua.LString(b.String()))
	return 1
}

// fmtSpec is one printf conversion's flags, width and precision.
type fmtSpec struct {
	flags   string
	width   int
	hasW    bool
	prec    int
	hasPrec bool
}

// scanFormat reads flags, width and precision starting at format[i], with
// Lua 5.1's limits (5 flags, 2-digit width and precision), and returns the
// index of the conversion character.
func scanFormat(L *lua.LState, format string, i int) (fmtSpec, int) {
	var s fmtSpec
	start := i
	for i < len(format) && strings.IndexByte("-+ #0", format[i]) >= 0 {
		i++
	}
	if i-start >= 6 {
		L.RaiseError("invalid format (repeated flags)")
	}
	s.flags = format[start:i]
	digits := func() (int, bool) {
		n, k := 0, 0
		for k < 2 && i < len(format) && isDigit(format[i]) {
			n = n*10 + int(format[i]-'0')
			i++
			k++
		}
		return n, k > 0
	}
	s.width, s.hasW = digits()
	if i < len(format) && format[i] == '.' {
		i++
		s.prec, _ = digits()
		s.hasPrec = true
	}
	if i < len(format) && isDigit(format[i]) {
		L.RaiseError("invalid format (width or precision too long)")
	}
	return s, i
}

// goFlags renders the spec for Go's fmt; C ignores '+' and ' ' for unsigned
// conversions.
func (s fmtSpec) goFlags(signed bool) string {
	flags := s.flags
	if !signed {
		flags = strings.Map(func(r rune) rune {
			if r == '+' || r == ' ' {
				return -1
			}
			return r
		}, flags)
	}
	out := flags
	if s.hasW {
		out += fmt.Sprint(s.width)
	}
	if s.hasPrec {
		out += "." + fmt.Sprint(s.prec)
	}
	return out
}

// pad pads s with spaces to the spec's width, in bytes as C counts.
func pad(s fmtSpec, str string) string {
	if !s.hasW || len(str) >= s.width {
		return str
	}
	fill := strings.Repeat(" ", s.width-len(str))
	if strings.Contains(s.flags, "-") {
		return str + fill
	}
	return fill + str
}

// formatCFloat formats f as C's printf does for conv in e, E, f, g, G.
func formatCFloat(s fmtSpec, conv byte, f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		word := "inf"
		if math.IsNaN(f) {
			word = "nan"
		}
		if conv == 'E' || conv == 'G' {
			word = strings.ToUpper(word)
		}
		switch {
		case math.Signbit(f):
			word = "-" + word
		case strings.Contains(s.flags, "+"):
			word = "+" + word
		case strings.Contains(s.flags, " "):
			word = " " + word
		}
		return pad(s, word)
	}
	if !s.hasPrec {
		s.prec, s.hasPrec = 6, true
	}
	return fmt.Sprintf("%"+s.goFlags(true)+string(conv), f)
}

// addQuoted is Lua 5.1's %q.
func addQuoted(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\', '\n':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\r':
			b.WriteString(`\r`)
		case 0:
			b.WriteString(`\000`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// cUint64 converts f as gcc's double -> unsigned long conversion does on
// x86-64.
func cUint64(f float64) uint64 {
	if f < 9223372036854775808.0 {
		return uint64(cInt64(f))
	}
	return uint64(cInt64(f-9223372036854775808.0)) ^ (1 << 63)
}

// checkLuaString returns argument n as Lua 5.1's luaL_checklstring does:
// strings as they are, numbers formatted with "%.14g".
func checkLuaString(L *lua.LState, n int) string {
	switch v := L.Get(n).(type) {
	case lua.LString:
		return string(v)
	case lua.LNumber:
		return formatG14(float64(v))
	}
	L.TypeError(n, lua.LTString)
	return ""
}

// checkLuaNumber returns argument n as Lua 5.1's luaL_checknumber does,
// converting numeric strings.
func checkLuaNumber(L *lua.LState, n int, fname string) lua.LNumber {
	switch v := L.Get(n).(type) {
	case lua.LNumber:
		return v
	case lua.LString:
		if f, ok := luaStringToNumber(string(v)); ok {
			return lua.LNumber(f)
		}
	}
	L.RaiseError("bad argument #%d to '%s' (number expected, got %s)", n, fname, L.Get(n).Type().String())
	return 0
}

// luaStringToNumber converts s as Lua 5.1's luaO_str2d does: strtod over
// the whole string (surrounding space allowed), or a hexadecimal integer.
func luaStringToNumber(s string) (float64, bool) {
	f, n, _ := strtod(s)
	if n == 0 {
		return 0, false
	}
	rest := s[n:]
	for len(rest) > 0 && cIsSpace(rest[0]) {
		rest = rest[1:]
	}
	return f, rest == ""
}

// checkLuaInt returns argument n as luaL_checkint does: the number
// truncated to a C int.
func checkLuaInt(L *lua.LState, n int, fname string) int32 {
	return int32(cInt64(float64(checkLuaNumber(L, n, fname))))
}
