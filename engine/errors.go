package engine

import (
	"context"
	"errors"
	"strings"

	"github.com/rlctl/rlctl/algorithms"
)

// Errors a caller of Allow, AllowN, Peek or Release can see. Nothing else reaches the
// caller: a backend that fails, stalls or answers with an error is decided by each policy's
// on_error, and the failure is in Decision.Err.
var (
	// ErrRequest wraps a failure to evaluate a policy expression for a request.
	ErrRequest = errors.New("engine: bad request")
	// ErrScript wraps an error reply of the engine script itself (a plugin's Lua runtime
	// error, a key holding another type, a plan/server mismatch). It is never returned to a
	// caller: it is the Decision.Err of a decision made by on_error.
	ErrScript = errors.New("engine: script error")
	// ErrBreakerOpen is the Decision.Err of a decision made by on_error because the circuit
	// breaker was open: recent calls failed, so the backend was not asked.
	ErrBreakerOpen = errors.New("engine: backend circuit open")
)

// Class says how the engine treats an error.
type Class uint8

const (
	// ClassBackend: the backend could not decide (down, stalled, overloaded, misconfigured).
	// Policies decide by on_error, and the failure counts towards opening the breaker.
	ClassBackend Class = iota
	// ClassScript: the backend ran the engine script and the script failed. Policies decide
	// by on_error and the failure is logged at error level, but the backend is healthy:
	// it does not count towards the breaker, and it closes a half-open one.
	ClassScript
	// ClassCaller: the caller's own doing (a bad request, its context cancelled or past its
	// deadline). Returned to the caller; never a backend failure.
	ClassCaller
)

func (c Class) String() string {
	switch c {
	case ClassScript:
		return "script"
	case ClassCaller:
		return "caller"
	default:
		return "backend"
	}
}

// ReplyClass is one row of the error classification: the Redis error replies that start
// with Prefix are of Class.
type ReplyClass struct {
	Prefix  string
	Class   Class
	Meaning string
}

// ReplyClasses classifies the error replies of a Redis server, a Redis Cluster and the
// engine script; RELIABILITY.md quotes it. A reply that no row matches is a backend
// failure. Errors that are not replies (network errors, timeouts, a closed client, a
// reply that does not decode) are backend failures too, except those of the caller's
// own context.
var ReplyClasses = []ReplyClass{
	{"RLCTL deadline passed", ClassBackend, "the server ran the call after the engine stopped waiting; nothing was charged"},
	{"RLCTL", ClassScript, "the script refused the call: a plan/script mismatch or a plugin's validate error"},
	{"ERR user_script", ClassScript, "a Lua runtime error in the script (a plugin bug), Redis 7"},
	{"ERR user_function", ClassScript, "a Lua runtime error in the script's library form, run by FCALL (a plugin bug)"},
	{"ERR Error running script", ClassScript, "a Lua runtime error in the script (a plugin bug), Redis 6"},
	{"WRONGTYPE", ClassScript, "a rule's key holds another type: something else wrote to the rl: namespace"},
	{"NOSCRIPT", ClassBackend, "the script vanished between EVALSHA and the EVAL that reloads it"},
	{"ERR Function not found", ClassBackend, "the library vanished between the FUNCTION LOAD that reloads it and the FCALL after it"},
	{"LOADING", ClassBackend, "the server is loading its dataset after a restart"},
	{"BUSY", ClassBackend, "another script or function is running past the server's busy time"},
	{"OOM", ClassBackend, "maxmemory reached under a noeviction policy"},
	{"READONLY", ClassBackend, "the client reached a replica (after a failover or REPLICAOF)"},
	{"MASTERDOWN", ClassBackend, "a replica lost its primary and refuses stale reads"},
	{"MISCONF", ClassBackend, "the server refuses writes because it cannot persist (RDB save failing)"},
	{"NOREPLICAS", ClassBackend, "min-replicas-to-write is not met"},
	{"CLUSTERDOWN", ClassBackend, "the cluster cannot serve the key's slot"},
	{"TRYAGAIN", ClassBackend, "the cluster is moving the slot the call's keys are in"},
	{"MOVED", ClassBackend, "a slot moved and the client did not follow"},
	{"ASK", ClassBackend, "a slot is migrating and the client did not follow"},
	{"CROSSSLOT", ClassScript, "a call's keys are in different slots: the engine grouped them wrongly"},
	{"NOPERM", ClassBackend, "the ACL user may not run the command or touch the key"},
	{"NOAUTH", ClassBackend, "the server needs authentication"},
	{"WRONGPASS", ClassBackend, "the credentials are wrong"},
	{"ERR max number of clients", ClassBackend, "the server is at maxclients"},
	{"ERR unknown command", ClassBackend, "the server does not have EVALSHA/EVAL (renamed or disabled)"},
}

// classify returns the class of err, an error from a backend call made for caller's
// context.
func classify(caller context.Context, err error) Class {
	if caller.Err() != nil {
		return ClassCaller
	}
	if errors.Is(err, ErrRequest) {
		return ClassCaller
	}
	if errors.Is(err, algorithms.ErrReply) || errors.Is(err, ErrScript) {
		return ClassScript
	}
	var re interface{ RedisError() }
	if !errors.As(err, &re) {
		return ClassBackend
	}
	msg := err.Error()
	for _, r := range ReplyClasses {
		if strings.HasPrefix(msg, r.Prefix) {
			return r.Class
		}
	}
	return ClassBackend
}

// Classify returns how the engine treats err, an error a Backend returned (or that
// Decision.Err holds), when the caller's context is still live.
func Classify(err error) Class { return classify(context.Background(), err) }
