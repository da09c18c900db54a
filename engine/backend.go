package engine

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/rlctl/rlctl/algorithms"
	"github.com/rlctl/rlctl/luahost"
)

// Backend runs an engine script call and returns its raw reply (as go-redis decodes RESP2:
// int64, string, nil, []any) or an error, which is a script error reply when the script
// rejected the call.
type Backend interface {
	Eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error)
	// Del deletes keys (Engine.Reset).
	Del(ctx context.Context, keys ...string) error
}

// Redis is a Backend on a go-redis client: standalone, Sentinel or Cluster. It calls
// EVALSHA and, when the server does not know the script (NOSCRIPT: a restart, a failover,
// SCRIPT FLUSH), sends the script itself with EVAL, which runs it and caches it again, so
// even a flush racing with the call is invisible to the caller.
type Redis struct {
	c redis.Scripter
}

// NewRedis returns a Backend that runs scripts on c (e.g. a *redis.Client, *redis.ClusterClient
// or any redis.UniversalClient).
func NewRedis(c redis.Scripter) *Redis { return &Redis{c: c} }

// Eval implements Backend.
func (r *Redis) Eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error) {
	args := make([]any, len(argv))
	for i, a := range argv {
		args[i] = a
	}
	v, err := r.c.EvalSha(ctx, s.SHA1, keys, args...).Result()
	if err == nil || !isNoScript(err) {
		return v, err
	}
	return r.c.Eval(ctx, s.Source, keys, args...).Result()
}

// Del implements Backend. On a cluster, keys of different slots are deleted one by one.
func (r *Redis) Del(ctx context.Context, keys ...string) error {
	c, ok := r.c.(redis.Cmdable)
	if !ok {
		return errors.New("engine: the Redis client cannot DEL")
	}
	for _, k := range keys {
		if err := c.Del(ctx, k).Err(); err != nil {
			return err
		}
	}
	return nil
}

func isNoScript(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "NOSCRIPT")
}

// Local is a Backend that runs scripts in-process on a luahost.Host, for single-instance
// services, the on_error = "local" fallback, and simulations on a virtual clock.
type Local struct {
	h *luahost.Host
}

// NewLocal returns a Backend on h.
func NewLocal(h *luahost.Host) *Local { return &Local{h: h} }

// Eval implements Backend.
func (l *Local) Eval(ctx context.Context, s *algorithms.Script, keys, argv []string) (any, error) {
	v, err := l.h.EvalSHA(ctx, s.SHA1, keys, argv)
	if err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		return v, err
	}
	if _, err := l.h.Load(s.Source); err != nil {
		return nil, err
	}
	return l.h.EvalSHA(ctx, s.SHA1, keys, argv)
}

// Del implements Backend.
func (l *Local) Del(ctx context.Context, keys ...string) error {
	for _, k := range keys {
		if _, err := l.h.Do(ctx, "DEL", k); err != nil {
			return err
		}
	}
	return nil
}
