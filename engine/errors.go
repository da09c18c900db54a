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
	// remedy is what the engine does about such a reply before on_error decides.
	remedy remedy
}

// remedy is what the engine does about an error reply before on_error decides the call.
type remedy uint8

const (
	noRemedy remedy = iota
	// reload: the server does not hold the script. The backend loads it (one load per
	// server at a time, which the other calls that miss it wait for) and calls again; a
	// reply still missing the script is decided by on_error but, like the wait for a load,
	// never counts towards the breaker: the server answered.
	reload
	// resend: on a Redis Cluster, the node did not run the call because the client's map
	// of the slots is out of date or the slot is changing hands. The engine refreshes the
	// map and sends the call once more, to the slot's owner in the new map and through
	// that owner's breaker; a second refusal is decided by on_error and counts towards the
	// breaker. Elsewhere (a standalone server that became a replica) it is a failure.
	resend
)

// ReplyClasses classifies the error replies of a Redis server, a Redis Cluster and the
// engine script; RELIABILITY.md quotes it. A reply that no row matches is a backend
// failure. Errors that are not replies (network errors, timeouts, a closed client, a
// reply that does not decode) are backend failures too, except those of the caller's
// own context; on a Redis Cluster each also refreshes the slot map (a node that cannot be
// reached may have lost its slots in a failover), but none is resent: the call may have
// run.
var ReplyClasses = []ReplyClass{
	{"RLCTL deadline passed", ClassBackend, "the server ran the call after the engine stopped waiting; nothing was charged", noRemedy},
	{"RLCTL", ClassScript, "the script refused the call: a plan/script mismatch or a plugin's validate error", noRemedy},
	{"ERR user_script", ClassScript, "a Lua runtime error in the script (a plugin bug), Redis 7", noRemedy},
	{"ERR user_function", ClassScript, "a Lua runtime error in the script's library form, run by FCALL (a plugin bug)", noRemedy},
	{"ERR Error running script", ClassScript, "a Lua runtime error in the script (a plugin bug), Redis 6", noRemedy},
	{"WRONGTYPE", ClassScript, "a rule's key holds another type: something else wrote to the rl: namespace", noRemedy},
	{"NOSCRIPT", ClassBackend, "the server does not hold the script (a new or restarted server, SCRIPT FLUSH, a failover)", reload},
	{"ERR Function not found", ClassBackend, "the server does not hold the library (a new or restarted server, FUNCTION FLUSH, a failover)", reload},
	{"LOADING", ClassBackend, "the server is loading its dataset after a restart", noRemedy},
	{"BUSY", ClassBackend, "another script or function is running past the server's busy time", noRemedy},
	{"OOM", ClassBackend, "maxmemory reached under a noeviction policy", noRemedy},
	{"READONLY", ClassBackend, "the client reached a replica (after a failover or REPLICAOF)", resend},
	{"MASTERDOWN", ClassBackend, "a replica lost its primary and refuses stale reads", noRemedy},
	{"MISCONF", ClassBackend, "the server refuses writes because it cannot persist (RDB save failing)", noRemedy},
	{"NOREPLICAS", ClassBackend, "min-replicas-to-write is not met", noRemedy},
	{"CLUSTERDOWN", ClassBackend, "the cluster cannot serve the key's slot (a primary failed and no replica took over yet)", resend},
	{"TRYAGAIN", ClassBackend, "the cluster is moving the slot the call's keys are in", resend},
	{"MOVED", ClassBackend, "a slot moved and the client did not follow", resend},
	{"ASK", ClassBackend, "a slot is migrating and the client did not follow", resend},
	{"CROSSSLOT", ClassScript, "a call's keys are in different slots: the engine grouped them wrongly", noRemedy},
	{"NOPERM", ClassBackend, "the ACL user may not run the command or touch the key", noRemedy},
	{"NOAUTH", ClassBackend, "the server needs authentication", noRemedy},
	{"WRONGPASS", ClassBackend, "the credentials are wrong", noRemedy},
	{"ERR max number of clients", ClassBackend, "the server is at maxclients", noRemedy},
	{"ERR unknown command", ClassBackend, "the server does not have EVALSHA/EVAL (renamed or disabled)", noRemedy},
}

// remedyOf returns the remedy of err's row, noRemedy for an error that is not a reply
// or that no row matches.
func remedyOf(err error) remedy {
	if r := rowOf(err); r != nil {
		return r.remedy
	}
	return noRemedy
}

// rowOf returns the row of ReplyClasses that err, an error reply, matches; nil for an
// error that is not a reply or that no row matches.
func rowOf(err error) *ReplyClass {
	if !isReply(err) {
		return nil
	}
	msg := err.Error()
	for i := range ReplyClasses {
		if strings.HasPrefix(msg, ReplyClasses[i].Prefix) {
			return &ReplyClasses[i]
		}
	}
	return nil
}

// isReply reports whether err is an error reply of a server (not a network error, a
// timeout or the engine's own).
func isReply(err error) bool {
	var re interface{ RedisError() }
	return err != nil && errors.As(err, &re)
}

// outcomeOf returns how a call that failed with err, of class, resolves the breaker's
// ticket: a backend failure is a failure, except a missing script (the server answered:
// a success) and a deadline that ended while the call waited for a load that another
// call started (it says nothing about the server); a script error is a success (the
// server answered); the caller's own doing is abandoned.
func outcomeOf(class Class, err error) outcome {
	switch {
	case class == ClassCaller || errors.Is(err, errLoadWait):
		return abandoned
	case class == ClassScript || remedyOf(err) == reload:
		return succeeded
	}
	return failed
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
	if r := rowOf(err); r != nil {
		return r.Class
	}
	return ClassBackend
}

// Classify returns how the engine treats err, an error a Backend returned (or that
// Decision.Err holds), when the caller's context is still live.
func Classify(err error) Class { return classify(context.Background(), err) }
