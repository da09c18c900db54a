package luahost

import (
	"context"
	"slices"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Redis Functions, as Redis 7.0 runs them. FUNCTION LOAD runs a library's code once, in a
// sandbox whose only global is a small redis table (register_function, log, the LOG_*
// levels and the version); the functions it registers keep their upvalues for as long as
// the library is loaded, and FCALL calls one with its keys and arguments as two fresh
// tables. At call time a function sees the scripts' globals minus KEYS and ARGV, and a
// redis table without register_function, replicate_commands, breakpoint and debug.
// Function names are case-insensitive, library names are not.

// functionChunkName is the name Redis 7.0 gives a library's code: Lua messages say
// "user_function:LINE:", error replies "on @user_function:LINE.". The library's "#!" line
// is its line 1.
const functionChunkName = "user_function"

// library is a loaded library.
type library struct {
	name  string
	code  string      // as loaded, "#!" line included
	funcs []*function // in registration order
}

// function is a registered function.
type function struct {
	name    string
	desc    string
	hasDesc bool
	flags   uint8 // bit i: functionFlags[i]
	fn      *lua.LFunction
	lib     *library
}

// functionFlags are the flags redis.register_function accepts, in Redis's order.
var functionFlags = [...]string{"no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"}

const flagNoWrites = 1 << 0

// Redis 7.0's error texts for functions.
const (
	msgFunctionNotFound = "ERR Function not found"
	msgBadName          = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"
)

// FunctionLoad loads a library as FUNCTION LOAD [REPLACE] does and returns its name. code
// starts with a "#!lua name=<library>" line; the rest runs once, and must register at
// least one function with redis.register_function (redis.call is not available then).
// Loading a library whose name is taken fails with "ERR Library '<name>' already exists"
// unless replace is set, which swaps the old library for the new one only if the new one
// loads. Every failure is an *ErrorReply with Redis 7.0's text.
func (h *Host) FunctionLoad(code string, replace bool) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.functionLoad(code, replace)
}

// FCall calls the loaded function (case-insensitive) with keys and args, as FCALL does, and
// returns its reply as EvalSHA does. A function no library registered is "ERR Function not
// found"; errors raised in it end in " script: <function>, on @user_function:<line>.".
func (h *Host) FCall(ctx context.Context, function string, keys, args []string) (any, error) {
	return h.fcallLocked(ctx, function, keys, args, false)
}

// FCallBounded calls function as FCall does, for a caller that knows every run of it ends
// after a bounded amount of work (the engine script of built-in algorithms, whose worst
// case per call is declared and held to Redis by tests). The host's deadline (WithTimeout)
// and ctx are checked before each Redis command the function runs instead of before every
// Lua instruction, which costs about a fifth of a short call: a loop that runs no command
// is not stopped. Once the function has run a write command it is no longer stopped, so
// a call is either stopped before it writes anything or runs to its end: a late call
// never leaves some of its writes (a decision charged on some rules but not others). The
// instruction limit (WithInstructionLimit) does not apply, and Steps reports 0 for the
// call.
func (h *Host) FCallBounded(ctx context.Context, function string, keys, args []string) (any, error) {
	return h.fcallLocked(ctx, function, keys, args, true)
}

// fcallLocked runs FCALL under h.mu; bounded: as FCallBounded.
func (h *Host) fcallLocked(ctx context.Context, name string, keys, args []string, bounded bool) (any, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if bounded {
		h.run.bounded = true
		defer func() { h.run.bounded = false }()
	}
	return h.fcall(ctx, name, keys, args, false)
}

// fcall runs FCALL (ro: FCALL_RO). h.mu is held.
func (h *Host) fcall(ctx context.Context, name string, keys, args []string, ro bool) (any, error) {
	f := h.functions[lowerASCII(name)]
	if f == nil {
		return nil, errorf(msgFunctionNotFound)
	}
	readOnly := f.flags&flagNoWrites != 0
	if ro && !readOnly {
		return nil, errorf("ERR Can not execute a script with write flag using *_ro command.")
	}
	v := h.vm
	L := v.L
	L.Push(f.fn)
	L.Push(v.argTable(keys, 0))
	L.Push(v.argTable(args, len(keys)))
	return h.exec(ctx, f.name, keys, 2, v.fenv, readOnly)
}

// argTable returns a new array of vals. The Lua strings of the last call are reused where
// the values repeat (from is vals' position in the call's keys and arguments), which
// saves boxing each one again.
func (v *vm) argTable(vals []string, from int) *lua.LTable {
	t := v.L.CreateTable(len(vals), 0)
	if n := from + len(vals); n > len(v.boxed) {
		v.boxed = append(v.boxed, make([]lua.LValue, n-len(v.boxed))...)
	}
	for i, s := range vals {
		b := v.boxed[from+i]
		if cur, ok := b.(lua.LString); !ok || string(cur) != s {
			b = lua.LString(s)
			v.boxed[from+i] = b
		}
		t.RawSetInt(i+1, b)
	}
	return t
}

// functionLoad is FunctionLoad with h.mu held.
func (h *Host) functionLoad(code string, replace bool) (string, error) {
	name, body, err := parseLibraryMetadata(code)
	if err != nil {
		return "", err
	}
	old := h.libraries[name]
	if old != nil && !replace {
		return "", errorf("ERR Library '" + name + "' already exists")
	}
	lib, err := h.instantiate(name, code, body)
	if err != nil {
		return "", err
	}
	if len(lib.funcs) == 0 {
		return "", errorf("ERR No functions registered")
	}
	for _, f := range lib.funcs {
		if other := h.functions[lowerASCII(f.name)]; other != nil && other.lib != old {
			return "", errorf("ERR Function " + f.name + " already exists")
		}
	}
	if old != nil {
		h.unlink(old)
	}
	h.libraries[name] = lib
	for _, f := range lib.funcs {
		h.functions[lowerASCII(f.name)] = f
	}
	return name, nil
}

func (h *Host) unlink(lib *library) {
	delete(h.libraries, lib.name)
	for _, f := range lib.funcs {
		delete(h.functions, lowerASCII(f.name))
	}
}

// instantiate compiles a library's code and runs it in the load sandbox.
func (h *Host) instantiate(name, code, body string) (*library, error) {
	proto, err := compile(body, functionChunkName)
	if err != nil {
		return nil, errorf(oneLine("ERR Error compiling function: " + compileErrorDetail(body, functionChunkName, err)))
	}
	v := h.vm
	L := v.L
	fn := L.NewFunctionFromProto(proto)
	fn.Env = v.fenv
	lib := &library{name: name, code: code}

	v.fenvMeta.RawSetString("__index", v.loadGlobals)
	h.loading = lib
	h.run.sha = ""
	h.run.setKeys(nil)
	watch := h.watch(context.Background())
	L.Push(fn)
	err = L.PCall(0, 0, nil)
	h.unwatch(watch)
	h.loading = nil
	v.fenvMeta.RawSetString("__index", v.fglobals)
	if err != nil {
		e := h.loadError(err)
		e.Msg = oneLine("ERR Error registering functions: " + e.Msg)
		return nil, e
	}
	return lib, nil
}

// loadError turns the error of a library's code into Redis's message: a string gets "ERR "
// in front, an error table gives its err field.
func (h *Host) loadError(err error) *ErrorReply {
	var obj lua.LValue = lua.LString(err.Error())
	if aerr, ok := err.(*lua.ApiError); ok {
		obj = aerr.Object
	}
	msg := "ERR unknown error"
	switch o := obj.(type) {
	case lua.LString, lua.LNumber:
		msg = "ERR " + luaToString(o)
	case *lua.LTable:
		if e, ok := o.RawGetString("err").(lua.LString); ok {
			msg = string(e)
		}
	}
	if derr := h.run.dl.err; derr != nil {
		return &ErrorReply{Msg: h.killedMessage(derr), cause: derr}
	}
	return &ErrorReply{Msg: msg}
}

// parseLibraryMetadata reads a library's "#!<engine> name=<name>" line as Redis 7.0 does
// and returns the name and the code after the line (starting with its newline, so that
// line numbers count the "#!" line).
func parseLibraryMetadata(code string) (name, body string, err error) {
	if !strings.HasPrefix(code, "#!") {
		return "", "", errorf("ERR Missing library metadata")
	}
	end := strings.IndexByte(code, '\n')
	if end < 0 {
		return "", "", errorf("ERR Invalid library metadata")
	}
	parts, ok := splitArgs(code[:end])
	if !ok || len(parts) == 0 {
		return "", "", errorf("ERR Invalid library metadata")
	}
	engine := parts[0][min(2, len(parts[0])):]
	named := false
	for _, p := range parts[1:] {
		if !hasPrefixFold(p, "name=") {
			return "", "", errorf("ERR Invalid metadata value given: " + p)
		}
		if named {
			return "", "", errorf("ERR Invalid metadata value, name argument was given multiple times")
		}
		name, named = p[5:], true
	}
	if !named {
		return "", "", errorf("ERR Library name was not given")
	}
	if !validFunctionName(name) {
		return "", "", errorf("ERR " + msgBadName)
	}
	if !equalFoldASCII(engine, "lua") {
		return "", "", errorf("ERR Engine '" + engine + "' not found")
	}
	return name, code[end:], nil
}

// validFunctionName reports whether s is a valid library or function name: letters,
// digits and underscores, at least one.
func validFunctionName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

// splitArgs splits a line into arguments as Redis's sdssplitargs does: separated by
// spaces, "double quotes" with C escapes and 'single quotes' with \' group. ok is false
// for an unbalanced quote or a closing quote followed by anything but a space.
func splitArgs(line string) (args []string, ok bool) {
	p := 0
	for {
		for p < len(line) && cIsSpace(line[p]) {
			p++
		}
		if p >= len(line) {
			return args, true
		}
		var cur []byte
		inq, insq := false, false
		for done := false; !done; {
			if inq {
				if p >= len(line) {
					return nil, false
				}
				switch {
				case line[p] == '\\' && p+3 < len(line) && line[p+1] == 'x' && isHex(line[p+2]) && isHex(line[p+3]):
					cur = append(cur, byte(digitVal(line[p+2])<<4|digitVal(line[p+3])))
					p += 3
				case line[p] == '\\' && p+1 < len(line):
					p++
					c := line[p]
					switch c {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					case 'b':
						c = '\b'
					case 'a':
						c = '\a'
					}
					cur = append(cur, c)
				case line[p] == '"':
					if p+1 < len(line) && !cIsSpace(line[p+1]) {
						return nil, false
					}
					done = true
				default:
					cur = append(cur, line[p])
				}
			} else if insq {
				if p >= len(line) {
					return nil, false
				}
				switch {
				case line[p] == '\\' && p+1 < len(line) && line[p+1] == '\'':
					p++
					cur = append(cur, '\'')
				case line[p] == '\'':
					if p+1 < len(line) && !cIsSpace(line[p+1]) {
						return nil, false
					}
					done = true
				default:
					cur = append(cur, line[p])
				}
			} else {
				if p >= len(line) {
					break
				}
				switch line[p] {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					cur = append(cur, line[p])
				}
			}
			if p < len(line) {
				p++
			}
		}
		args = append(args, string(cur))
	}
}

// luaRegisterFunction is redis.register_function(name, callback) or
// redis.register_function{function_name=..., callback=..., flags={...}, description=...}.
func (h *Host) luaRegisterFunction(L *lua.LState) int {
	lib := h.loading
	if lib == nil {
		raiseRedisError(L, "ERR redis.register_function can only be called on FUNCTION LOAD command")
	}
	f := &function{lib: lib}
	switch L.GetTop() {
	case 1:
		readNamedArgs(L, f)
	case 2:
		name, ok := luaStringArg(L.Get(1))
		if !ok {
			raiseRedisError(L, "ERR first argument to redis.register_function must be a string")
		}
		fn, ok := L.Get(2).(*lua.LFunction)
		if !ok {
			raiseRedisError(L, "ERR second argument to redis.register_function must be a function")
		}
		f.name, f.fn = name, fn
	default:
		raiseRedisError(L, "ERR wrong number of arguments to redis.register_function")
	}
	// Redis 7.0 reports a bad function name with the library names' message.
	if !validFunctionName(f.name) {
		raiseRedisError(L, "ERR "+msgBadName)
	}
	for _, g := range lib.funcs {
		if equalFoldASCII(g.name, f.name) {
			raiseRedisError(L, "ERR Function already exists in the library")
		}
	}
	lib.funcs = append(lib.funcs, f)
	return 0
}

// readNamedArgs reads register_function's table form into f.
func readNamedArgs(L *lua.LState, f *function) {
	t, ok := L.Get(1).(*lua.LTable)
	if !ok {
		raiseRedisError(L, "ERR calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).")
	}
	named := false
	t.ForEach(func(k, val lua.LValue) {
		key, ok := luaStringArg(k)
		if !ok {
			raiseRedisError(L, "ERR named argument key given to redis.register_function is not a string")
		}
		switch {
		case equalFoldASCII(key, "function_name"):
			if f.name, ok = luaStringArg(val); !ok {
				raiseRedisError(L, "ERR function_name argument given to redis.register_function must be a string")
			}
			named = true
		case equalFoldASCII(key, "description"):
			if f.desc, ok = luaStringArg(val); !ok {
				raiseRedisError(L, "ERR description argument given to redis.register_function must be a string")
			}
			f.hasDesc = true
		case equalFoldASCII(key, "callback"):
			if f.fn, ok = val.(*lua.LFunction); !ok {
				raiseRedisError(L, "ERR callback argument given to redis.register_function must be a function")
			}
		case equalFoldASCII(key, "flags"):
			ft, ok := val.(*lua.LTable)
			if !ok {
				raiseRedisError(L, "ERR flags argument to redis.register_function must be a table representing function flags")
			}
			if f.flags, ok = readFlags(ft); !ok {
				raiseRedisError(L, "ERR unknown flag given")
			}
		default:
			raiseRedisError(L, "ERR unknown argument given to redis.register_function")
		}
	})
	if !named {
		raiseRedisError(L, "ERR redis.register_function must get a function name argument")
	}
	if f.fn == nil {
		raiseRedisError(L, "ERR redis.register_function must get a callback argument")
	}
}

// readFlags reads the flags t[1], t[2], ... up to the first nil.
func readFlags(t *lua.LTable) (uint8, bool) {
	var flags uint8
	for i := 1; ; i++ {
		v := t.RawGetInt(i)
		if v == lua.LNil {
			return flags, true
		}
		s, ok := luaStringArg(v)
		if !ok {
			return 0, false
		}
		j := slices.IndexFunc(functionFlags[:], func(f string) bool { return equalFoldASCII(f, s) })
		if j < 0 {
			return 0, false
		}
		flags |= 1 << j
	}
}

// luaStringArg returns v as C's lua_tostring does for a string or number.
func luaStringArg(v lua.LValue) (string, bool) {
	switch v := v.(type) {
	case lua.LString:
		return string(v), true
	case lua.LNumber:
		return formatG14(float64(v)), true
	}
	return "", false
}

// doFunction runs FCALL, FCALL_RO and FUNCTION LOAD, DELETE, FLUSH and LIST for Do. ok is
// false when args is none of those. h.mu is held.
func (h *Host) doFunction(ctx context.Context, args []string) (reply any, ok bool) {
	name := args[0]
	switch {
	case equalFoldASCII(name, "fcall"), equalFoldASCII(name, "fcall_ro"):
		ro := len(name) == len("fcall_ro")
		if len(args) < 3 {
			return errArity(lowerASCII(name)), true
		}
		r, err := h.doFCall(ctx, args, ro)
		if err != nil {
			return err, true
		}
		return r, true
	case equalFoldASCII(name, "function"):
		if len(args) < 2 {
			return errArity("function"), true
		}
		return h.doFunctionSub(args), true
	}
	return nil, false
}

func (h *Host) doFCall(ctx context.Context, args []string, ro bool) (any, error) {
	if h.functions[lowerASCII(args[1])] == nil {
		return nil, errorf(msgFunctionNotFound)
	}
	n, ok := parseInt(args[2])
	switch {
	case !ok:
		return nil, errorf("ERR Bad number of keys provided")
	case n > int64(len(args)-3):
		return nil, errorf("ERR Number of keys can't be greater than number of args")
	case n < 0:
		return nil, errorf("ERR Number of keys can't be negative")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return h.fcall(ctx, args[1], args[3:3+n], args[3+n:], ro)
}

func (h *Host) doFunctionSub(args []string) any {
	sub := lowerASCII(args[1])
	switch sub {
	case "load":
		if len(args) < 3 {
			return errArity("function|load")
		}
		replace := false
		for _, o := range args[2 : len(args)-1] {
			if !equalFoldASCII(o, "replace") {
				return errorf(oneLine("ERR Unknown option given: " + o))
			}
			replace = true
		}
		name, err := h.functionLoad(args[len(args)-1], replace)
		if err != nil {
			return err
		}
		return name
	case "delete":
		if len(args) != 3 {
			return errArity("function|delete")
		}
		lib := h.libraries[args[2]]
		if lib == nil {
			return errorf("ERR Library not found")
		}
		h.unlink(lib)
		return statusReply("OK")
	case "flush":
		if len(args) > 3 {
			return errorf("ERR unknown subcommand or wrong number of arguments for 'FLUSH'. Try FUNCTION HELP.")
		}
		if len(args) == 3 && !equalFoldASCII(args[2], "sync") && !equalFoldASCII(args[2], "async") {
			return errorf("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
		}
		clear(h.libraries)
		clear(h.functions)
		return statusReply("OK")
	case "list":
		return h.functionList(args[2:])
	case "dump", "restore", "stats", "kill", "help":
		return errorf("ERR luahost does not implement 'function|" + sub + "'")
	}
	return errorf(oneLine("ERR unknown subcommand '" + truncate(args[1], 128) + "'. Try FUNCTION HELP."))
}

// functionList is FUNCTION LIST [WITHCODE] [LIBRARYNAME pattern], with libraries and their
// functions sorted by name (Redis lists them in its hash tables' order).
func (h *Host) functionList(opts []string) any {
	withCode, pattern, filter := false, "", false
	for i := 0; i < len(opts); i++ {
		switch o := opts[i]; {
		case !withCode && equalFoldASCII(o, "withcode"):
			withCode = true
		case !filter && equalFoldASCII(o, "libraryname"):
			if i >= len(opts)-1 {
				return errorf("ERR library name argument was not given")
			}
			i++
			pattern, filter = opts[i], true
		default:
			return errorf(oneLine("ERR Unknown argument " + o))
		}
	}
	names := make([]string, 0, len(h.libraries))
	for n := range h.libraries {
		if !filter || globMatch(pattern, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	out := make([]any, 0, len(names))
	for _, n := range names {
		lib := h.libraries[n]
		funcs := slices.Clone(lib.funcs)
		slices.SortFunc(funcs, func(a, b *function) int { return strings.Compare(a.name, b.name) })
		fs := make([]any, len(funcs))
		for i, f := range funcs {
			var desc any
			if f.hasDesc {
				desc = f.desc
			}
			flags := []any{}
			for j, name := range functionFlags {
				if f.flags&(1<<j) != 0 {
					flags = append(flags, name)
				}
			}
			fs[i] = []any{"name", f.name, "description", desc, "flags", flags}
		}
		l := []any{"library_name", lib.name, "engine", "LUA", "functions", fs}
		if withCode {
			l = append(l, "library_code", lib.code)
		}
		out = append(out, l)
	}
	return out
}

// globMatch matches s against a Redis glob pattern (*, ?, [...] with ^ and ranges, \
// escapes), ignoring ASCII case, as stringmatchlen does for FUNCTION LIST.
func globMatch(pattern, s string) bool {
	lower := func(c byte) byte {
		if 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	p := 0
	for p < len(pattern) {
		switch pattern[p] {
		case '*':
			for p+1 < len(pattern) && pattern[p+1] == '*' {
				p++
			}
			if p+1 == len(pattern) {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globMatch(pattern[p+1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
			s = s[1:]
		case '[':
			if s == "" {
				return false
			}
			p++
			not := p < len(pattern) && pattern[p] == '^'
			if not {
				p++
			}
			match := false
			for p < len(pattern) && pattern[p] != ']' {
				switch {
				case pattern[p] == '\\' && p+1 < len(pattern):
					p++
					match = match || lower(pattern[p]) == lower(s[0])
				case p+2 < len(pattern) && pattern[p+1] == '-':
					lo, hi := lower(pattern[p]), lower(pattern[p+2])
					if lo > hi {
						lo, hi = hi, lo
					}
					c := lower(s[0])
					match = match || lo <= c && c <= hi
					p += 2
				default:
					match = match || lower(pattern[p]) == lower(s[0])
				}
				p++
			}
			if p >= len(pattern) {
				p-- // an unterminated class ends the pattern
			}
			if match == not {
				return false
			}
			s = s[1:]
		case '\\':
			if p+1 < len(pattern) {
				p++
			}
			fallthrough
		default:
			if s == "" || lower(pattern[p]) != lower(s[0]) {
				return false
			}
			s = s[1:]
		}
		p++
	}
	return s == ""
}
