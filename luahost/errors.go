package luahost

import (
	"errors"
	"strings"
)

// ErrorReply is a Redis error reply: what Redis would send as "-<Msg>".
// Eval, EvalSHA and Do return every error the script or command produced as
// an *ErrorReply, so callers can treat luahost and a go-redis client alike
// (it also implements go-redis's redis.Error interface, so
// redis.HasErrorPrefix works on it). Msg starts with the error code: "ERR",
// "WRONGTYPE", "NOSCRIPT", or whatever a script's redis.error_reply or
// {err=...} chose.
type ErrorReply struct {
	Msg   string
	cause error // ErrTimeout, ErrInstructionLimit or a context error; nil for plain replies
}

// Error returns Msg, the Redis error text.
func (e *ErrorReply) Error() string { return e.Msg }

// Unwrap returns ErrTimeout when the script was stopped by the host's
// deadline, the context's error when it was stopped by its context, and nil
// otherwise.
func (e *ErrorReply) Unwrap() error { return e.cause }

// RedisError marks ErrorReply as a Redis server error, as go-redis's
// redis.Error interface requires.
func (e *ErrorReply) RedisError() {}

// ErrTimeout is wrapped by the *ErrorReply of a script stopped because it
// ran past the host's deadline (WithTimeout). Writes the script made before
// it was stopped are kept, as Redis keeps a killed script's writes.
var ErrTimeout = errors.New("luahost: script exceeded its deadline")

// ErrInstructionLimit is wrapped by the *ErrorReply of a script stopped because it ran
// more Lua instructions than the host allows (WithInstructionLimit); its writes are kept
// as for ErrTimeout.
var ErrInstructionLimit = errors.New("luahost: script exceeded its instruction limit")

func errorf(msg string) *ErrorReply { return &ErrorReply{Msg: msg} }

// Error replies shared by many commands, with Redis 7.0's text.
func errSyntax() *ErrorReply { return errorf("ERR syntax error") }
func errWrongType() *ErrorReply {
	return errorf("WRONGTYPE Operation against a key holding the wrong kind of value")
}
func errNotInt() *ErrorReply   { return errorf("ERR value is not an integer or out of range") }
func errNotFloat() *ErrorReply { return errorf("ERR value is not a valid float") }
func errOverflow() *ErrorReply { return errorf("ERR increment or decrement would overflow") }
func errMinMax() *ErrorReply   { return errorf("ERR min or max is not a float") }
func errArity(name string) *ErrorReply {
	return errorf("ERR wrong number of arguments for '" + name + "' command")
}
func errExpireTime(name string) *ErrorReply {
	return errorf("ERR invalid expire time in '" + name + "' command")
}

// oneLine maps CR and LF to spaces, as Redis does to keep an error or
// status reply on one protocol line.
func oneLine(s string) string {
	if strings.IndexAny(s, "\r\n") < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}
